package dataplane

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Protocol is the traffic of a measurement.
type Protocol string

// The protocols measured.
const (
	HTTP1 Protocol = "http1" // HTTP/1.1 GET over keep-alive connections
	GRPC  Protocol = "grpc"  // unary gRPC (grpc.health.v1.Health/Check) over one HTTP/2 connection
)

// Variant is a path between the generator and the application.
type Variant string

// The paths compared.
const (
	Direct   Variant = "direct"   // generator -> app
	Nginx    Variant = "nginx"    // generator -> nginx -> nginx -> app
	Meridian Variant = "meridian" // generator -> client proxy -> mTLS -> server proxy -> app
)

// Config configures a run.
type Config struct {
	// Binary is the meridian executable that runs the control plane and the proxies.
	Binary string
	// ProxyBinary, when set, runs the proxies instead (`<ProxyBinary> proxy`): an executable
	// built with less linked in shows what the rest of the binary costs in RSS.
	ProxyBinary string
	// Nginx is the nginx executable ("nginx": found on PATH).
	Nginx string
	// Protocols and Variants are measured, every variant for every protocol.
	Protocols []Protocol
	Variants  []Variant
	// Rate is the constant request rate of every segment, requests per second.
	Rate float64
	// Rounds of Segment each: the measured time of a variant is Rounds x Segment. Each
	// variant first runs Warmup, not counted.
	Rounds  int
	Segment time.Duration
	Warmup  time.Duration
	// Connections is the number of HTTP/1.1 keep-alive connections the generator spreads its
	// requests over, and the number of gRPC calls it may have in flight at once.
	Connections int
	// NginxWorkers is each nginx's worker_processes (0: auto, one per CPU), and
	// ProxyGOMAXPROCS each proxy's GOMAXPROCS (0: Go's default, every CPU). Both default to
	// one: a sidecar's share, as Linkerd runs its proxies (one runtime worker unless
	// configured otherwise), so each proxy of either pair has one core's worth of threads.
	NginxWorkers    int
	ProxyGOMAXPROCS int
	// ReadyTimeout bounds the start of the processes (certificates, discovery, listeners).
	ReadyTimeout time.Duration
	// ProfileDir, when set, receives CPU and allocation profiles of both proxies, taken over
	// one Meridian segment of each protocol (PROTOCOL-client.cpu.pb.gz, ...).
	ProfileDir string
	// KeepLogs keeps the work directory (configurations and process logs) after a run that
	// succeeded; it is always kept after a failure.
	KeepLogs bool
	// Progress receives one line per segment (nil: none).
	Progress io.Writer
}

// DefaultConfig is issue 13's benchmark: 2,000 requests/s of each protocol, 30 s measured
// per variant (10 rounds of 3 s) after 5 s of warm-up.
func DefaultConfig() Config {
	return Config{
		Nginx:           "nginx",
		Protocols:       []Protocol{HTTP1, GRPC},
		Variants:        []Variant{Direct, Nginx, Meridian},
		Rate:            2000,
		Rounds:          10,
		Segment:         3 * time.Second,
		Warmup:          5 * time.Second,
		Connections:     16,
		NginxWorkers:    1,
		ProxyGOMAXPROCS: 1,
		ReadyTimeout:    time.Minute,
	}
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Binary == "" && slices.Contains(c.Variants, Meridian) {
		errs = append(errs, errors.New("no meridian binary to run the proxies with"))
	}
	if c.Nginx == "" && slices.Contains(c.Variants, Nginx) {
		errs = append(errs, errors.New("no nginx executable"))
	}
	if len(c.Protocols) == 0 || len(c.Variants) == 0 {
		errs = append(errs, errors.New("nothing to measure: no protocol or no variant"))
	}
	for _, p := range c.Protocols {
		if p != HTTP1 && p != GRPC {
			errs = append(errs, fmt.Errorf("protocol %q: want http1 or grpc", p))
		}
	}
	for _, v := range c.Variants {
		if v != Direct && v != Nginx && v != Meridian {
			errs = append(errs, fmt.Errorf("variant %q: want direct, nginx or meridian", v))
		}
	}
	if c.Rate <= 0 || c.Rate > 100_000 {
		errs = append(errs, fmt.Errorf("rate %g outside (0, 100000] requests/s", c.Rate))
	}
	if c.Rounds < 1 || c.Segment <= 0 || c.Warmup < 0 {
		errs = append(errs, errors.New("want at least one round, a positive segment and a warm-up that is not negative"))
	}
	if c.Connections < 1 || c.Connections > 1000 {
		errs = append(errs, fmt.Errorf("connections %d outside 1..1000", c.Connections))
	}
	if c.NginxWorkers < 0 || c.ProxyGOMAXPROCS < 0 {
		errs = append(errs, errors.New("nginx workers and proxy GOMAXPROCS must not be negative"))
	}
	if c.ReadyTimeout <= 0 {
		errs = append(errs, errors.New("the ready timeout must be positive"))
	}
	return errors.Join(errs...)
}

// ParseProtocols parses "http1,grpc".
func ParseProtocols(s []string) ([]Protocol, error) {
	out := make([]Protocol, 0, len(s))
	for _, p := range s {
		switch Protocol(p) {
		case HTTP1, GRPC:
			out = append(out, Protocol(p))
		default:
			return nil, fmt.Errorf("protocol %q: want http1 or grpc", p)
		}
	}
	return out, nil
}

// ParseVariants parses "direct,nginx,meridian".
func ParseVariants(s []string) ([]Variant, error) {
	out := make([]Variant, 0, len(s))
	for _, v := range s {
		switch Variant(v) {
		case Direct, Nginx, Meridian:
			out = append(out, Variant(v))
		default:
			return nil, fmt.Errorf("variant %q: want direct, nginx or meridian", v)
		}
	}
	return out, nil
}

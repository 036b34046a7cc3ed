package dataplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/meridian-mesh/meridian/bench/internal/schedstat"
	"go.uber.org/zap"
)

// Run starts the cluster, measures every protocol and returns what it measured. The result
// is returned, as far as it got, with an error too.
func Run(ctx context.Context, cfg Config, log *zap.Logger) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.ProfileDir != "" { // before the measurements, not after them
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("profile directory: %w", err)
		}
	}
	// Few collections in the generator and the application (this process): their pauses
	// would count against every variant. The heap may grow to a GiB before one runs.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	c, err := startCluster(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() { c.close(ok) }()
	res := &Result{
		RatePerSecond: cfg.Rate, Rounds: cfg.Rounds, SegmentSeconds: cfg.Segment.Seconds(), WarmupSeconds: cfg.Warmup.Seconds(),
		Connections: cfg.Connections, CPUs: runtime.NumCPU(), NginxVersion: c.nginxVersion, NginxWorkers: cfg.NginxWorkers,
		ProxyGOMAXPROCS: cfg.ProxyGOMAXPROCS, GoVersion: runtime.Version(),
	}
	for _, p := range cfg.Protocols {
		pr, err := c.measure(ctx, p)
		if err != nil {
			return res, fmt.Errorf("%s: %w", p, err)
		}
		res.Protocols = append(res.Protocols, *pr)
	}
	res.checkTargets()
	ok = true
	return res, nil
}

// variantRun is one variant of a protocol while it is measured.
type variantRun struct {
	v                Variant
	senders          []sender
	cleanup          func()
	meters           []*meter
	latency, service *hdrhistogram.Histogram
	sent, errors     int64
	seconds          float64
	lateMax          time.Duration
	firstErr         error
	rounds           []RoundResult
}

// newVariantRun builds the generator's senders for v and p, and meters for v's processes.
func (c *cluster) newVariantRun(v Variant, p Protocol) (*variantRun, error) {
	t := c.topo
	vr := &variantRun{v: v, latency: newHistogram(), service: newHistogram(), cleanup: func() {}}
	addr, authority, proxy := t.hostPort(hostApp, appHTTPPort), httpAuthority, false
	switch v {
	case Nginx:
		addr = t.hostPort(hostNginx1, appHTTPPort)
	case Meridian:
		addr, proxy = t.hostPort(hostClient, outboundPort), true
	}
	if p == GRPC {
		addr, authority = t.hostPort(hostApp, appGRPCPort), ""
		switch v {
		case Nginx:
			addr = t.hostPort(hostNginx1, appGRPCPort)
		case Meridian:
			addr, authority = t.hostPort(hostClient, outboundPort), grpcAuthority
		}
		g, err := newGRPCClient(addr, authority)
		if err != nil {
			return nil, err
		}
		vr.cleanup = g.close
		for range c.cfg.Connections {
			vr.senders = append(vr.senders, grpcSender{g})
		}
	} else {
		for range c.cfg.Connections {
			vr.senders = append(vr.senders, newH1Sender(addr, authority, proxy))
		}
	}
	for i, pp := range c.procs(v) {
		m := &meter{name: pp.Name(), p: pp}
		if v == Meridian {
			m.metrics = c.adminURL([]byte{hostClient, hostApp}[i], "/metrics")
		}
		vr.meters = append(vr.meters, m)
	}
	return vr, nil
}

func (vr *variantRun) close() {
	for _, s := range vr.senders {
		s.close()
	}
	vr.cleanup()
}

// measure runs one protocol: a warm-up per variant, the calibration of the proxies'
// allocation without load, then the rounds, each running every variant in a rotated
// order; with cfg.ProfileDir, one more Meridian segment under the profilers.
func (c *cluster) measure(ctx context.Context, p Protocol) (*ProtocolResult, error) {
	var runs []*variantRun
	defer func() {
		for _, vr := range runs {
			vr.close()
		}
	}()
	pr := &ProtocolResult{Protocol: p}
	for _, v := range c.cfg.Variants {
		vr, err := c.newVariantRun(v, p)
		if err != nil {
			return nil, err
		}
		runs = append(runs, vr)
		c.app.clientID.Store(nil)
		if c.cfg.Warmup > 0 {
			seg := runSegment(ctx, vr.senders, c.cfg.Rate, c.cfg.Warmup)
			c.progress("%s warm-up %s: %d requests, %d errors", p, v, seg.sent, seg.errors)
			if seg.errors == seg.sent {
				return nil, fmt.Errorf("%s: every warm-up request failed: %w", v, seg.err)
			}
		}
		if v == Meridian {
			if err := c.checkMeridian(ctx, vr, p); err != nil {
				return nil, err
			}
			pr.ClientIDSeen = c.app.lastClientID()
		}
	}
	for r := range c.cfg.Rounds {
		for i := range runs {
			vr := runs[(i+r)%len(runs)]
			if err := c.segment(ctx, vr); err != nil {
				return nil, err
			}
			last := vr.rounds[len(vr.rounds)-1]
			c.progress("%s round %d/%d %-8s p50 %.3f ms, p99 %.3f ms, %d errors, harness CPU wait %.0f ms", p, r+1, c.cfg.Rounds, vr.v,
				last.P50Ms, last.P99Ms, last.Errors, last.HarnessWaitMs)
		}
	}
	for _, vr := range runs {
		pr.Variants = append(pr.Variants, vr.result())
	}
	pr.compare()
	if c.cfg.ProfileDir != "" {
		for _, vr := range runs {
			if vr.v == Meridian {
				if err := c.profile(ctx, vr, p); err != nil {
					return nil, err
				}
			}
		}
	}
	return pr, ctx.Err()
}

// checkMeridian checks that the warm-up crossed mTLS (the application saw the client's
// identity) and measures the proxies' allocation without load.
func (c *cluster) checkMeridian(ctx context.Context, vr *variantRun, p Protocol) error {
	if got := c.app.lastClientID(); got != clientID {
		return fmt.Errorf("%w (%s: got %q, want %q)", errNoIdentity, p, got, clientID)
	}
	for _, m := range vr.meters {
		if err := m.calibrate(ctx, 2*time.Second); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// segment runs one measured segment of vr, with its processes metered.
func (c *cluster) segment(ctx context.Context, vr *variantRun) error {
	before := make([]reading, len(vr.meters))
	for i, m := range vr.meters {
		var err error
		if before[i], err = m.read(ctx); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	stop := sampleRSS(vr.meters, 200*time.Millisecond)
	wait0, _ := schedstat.RunqueueWait(0)
	seg := runSegment(ctx, vr.senders, c.cfg.Rate, c.cfg.Segment)
	wait1, _ := schedstat.RunqueueWait(0)
	stop()
	for i, m := range vr.meters {
		after, err := m.read(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		m.add(before[i], after, seg.sent)
	}
	vr.latency.Merge(seg.latency)
	vr.service.Merge(seg.service)
	vr.rounds = append(vr.rounds, RoundResult{P50Ms: ms(seg.latency.ValueAtQuantile(50)), P99Ms: ms(seg.latency.ValueAtQuantile(99)),
		Requests: seg.sent, Errors: seg.errors, HarnessWaitMs: (wait1 - wait0) * 1000})
	vr.sent += seg.sent
	vr.errors += seg.errors
	vr.seconds += seg.elapsed.Seconds()
	vr.lateMax = max(vr.lateMax, seg.lateMax)
	if vr.firstErr == nil {
		vr.firstErr = seg.err
	}
	if seg.sent > 0 && seg.errors == seg.sent {
		return fmt.Errorf("%s: every request of a segment failed: %w", vr.v, seg.err)
	}
	return ctx.Err()
}

// result summarises vr.
func (vr *variantRun) result() VariantResult {
	v := VariantResult{Variant: vr.v, Requests: vr.sent, Errors: vr.errors, LateMaxMs: float64(vr.lateMax.Microseconds()) / 1000}
	if vr.firstErr != nil {
		v.FirstError = vr.firstErr.Error()
	}
	if vr.seconds > 0 {
		v.AchievedRate = float64(vr.sent-vr.errors) / vr.seconds
	}
	v.fill(vr.latency, vr.service)
	v.Rounds = vr.rounds
	v.MedianP50Ms = median(vr.rounds, func(r RoundResult) float64 { return r.P50Ms })
	v.MedianP99Ms = median(vr.rounds, func(r RoundResult) float64 { return r.P99Ms })
	for _, m := range vr.meters {
		pr := ProcessResult{Name: m.name, RSSMaxBytes: m.rssMax.RSS, RSSAnonBytes: m.rssMax.Anon, RSSFileBytes: m.rssMax.File,
			CPUMicrosPerRequest: m.perRequest(m.cpu) * 1e6}
		if mem, err := m.rss(); err == nil {
			pr.RSSPeakBytes = mem.HWM
		}
		if m.metrics != "" {
			net, raw := m.perRequest(m.net), m.perRequest(m.mallocs)
			pr.AllocsPerRequest, pr.AllocsPerRequestRaw = &net, &raw
		}
		v.Processes = append(v.Processes, pr)
	}
	return v
}

// profile runs one more segment of Meridian under the profilers: each proxy's CPU profile
// and allocation profile (a delta over the segment) go to cfg.ProfileDir.
func (c *cluster) profile(ctx context.Context, vr *variantRun, p Protocol) error {
	secs := max(1, int(c.cfg.Segment.Seconds())-1)
	var wg sync.WaitGroup
	errs := make([]error, 2*len(vr.meters))
	for i, m := range vr.meters {
		host := []byte{hostClient, hostApp}[i]
		for j, kind := range []string{"profile", "allocs"} {
			url := c.adminURL(host, "/debug/pprof/"+kind+"?seconds="+strconv.Itoa(secs))
			name := fmt.Sprintf("%s-%s.%s.pb.gz", p, m.name, map[string]string{"profile": "cpu", "allocs": "allocs"}[kind])
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[2*i+j] = saveProfile(ctx, url, filepath.Join(c.cfg.ProfileDir, name))
			}()
		}
	}
	seg := runSegment(ctx, vr.senders, c.cfg.Rate, c.cfg.Segment)
	wg.Wait()
	c.progress("%s profiled %s: %d requests, %d errors; profiles in %s", p, vr.v, seg.sent, seg.errors, c.cfg.ProfileDir)
	return errors.Join(errs...)
}

func (c *cluster) progress(format string, args ...any) {
	if c.cfg.Progress != nil {
		fmt.Fprintf(c.cfg.Progress, format+"\n", args...)
	}
}

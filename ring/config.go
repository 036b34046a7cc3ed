package ring

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// DefaultGossipPort is the memberlist port replicas gossip on.
const DefaultGossipPort = 7946

// Config configures a Cluster. Build it with DefaultConfig and fill in the fields; cmd/
// maps flags onto it.
type Config struct {
	// NodeName is this replica's unique name in the cluster (the pod name in Kubernetes).
	// Default: the hostname.
	NodeName string
	// GossipAddr is the host:port the gossip listener binds (TCP and UDP). Port 0 picks a
	// free port; read it back with Cluster.GossipAddr. Default "0.0.0.0:7946".
	GossipAddr string
	// AdvertiseAddr is the ip[:port] other members reach this one's gossip at, when it
	// differs from GossipAddr (for instance the pod IP when binding 0.0.0.0). Empty:
	// memberlist picks the bind address, or a private address when bound to 0.0.0.0.
	// The port defaults to the bound gossip port.
	AdvertiseAddr string
	// GRPCAddr is the replica's gRPC address (host:port) other replicas and clients dial;
	// it travels in this member's gossip metadata and is Member.Addr in every ring.
	// Required.
	GRPCAddr string
	// Join lists seeds: host:port, ip:port or a DNS name (with or without port; default
	// the gossip port), such as a headless Service. Names are resolved to all their A and
	// AAAA records at each attempt. Empty: this replica forms a cluster on its own.
	Join []string
	// GossipKey, when set, encrypts and authenticates gossip (AES, 16, 24 or 32 bytes).
	// Every member needs the same key; a member with another key cannot join.
	GossipKey []byte
	// Hash is the ring shape; every member must use the same.
	Hash HashConfig
	// JoinRetryMin and JoinRetryMax bound the exponential backoff between failed join
	// attempts (with jitter).
	JoinRetryMin, JoinRetryMax time.Duration
	// RejoinInterval is how often a member that finds itself alone (or has found no peer
	// to join yet) tries the seeds again.
	RejoinInterval time.Duration
	// LeaveTimeout bounds how long Run waits for the leave broadcast on shutdown.
	LeaveTimeout time.Duration
	// Fast shortens memberlist's gossip, probe and push-pull intervals and the retry
	// intervals above, for tests on one machine. Not for production.
	Fast bool
	// Logger receives the cluster's and memberlist's logs. Default: a no-op logger.
	Logger *zap.Logger
	// Registerer, when set, registers the ring_members and ring_changes_total metrics.
	Registerer prometheus.Registerer

	// lookupNetIP resolves seed names; nil means net.DefaultResolver. Tests replace it.
	lookupNetIP func(ctx context.Context, host string) ([]netip.Addr, error)
}

// DefaultConfig returns the defaults: node name from the hostname, gossip on
// 0.0.0.0:7946, the default ring shape, join backoff 500ms..30s, rejoin every 10s while
// alone, leave timeout 5s.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		NodeName:       host,
		GossipAddr:     net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultGossipPort)),
		Hash:           DefaultHashConfig(),
		JoinRetryMin:   500 * time.Millisecond,
		JoinRetryMax:   30 * time.Second,
		RejoinInterval: 10 * time.Second,
		LeaveTimeout:   5 * time.Second,
	}
}

// ParseJoin splits a --join flag value: comma-separated seeds, blanks and spaces ignored.
// It does not resolve names; see Config.Join for the accepted forms and CheckSeed for the
// syntax check.
func ParseJoin(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// CheckSeed reports whether seed has the form Config.Join accepts: host, host:port,
// ip or ip:port ([v6]:port), with a port in 1..65535.
func CheckSeed(seed string) error {
	_, _, err := splitSeed(seed, DefaultGossipPort)
	return err
}

// splitSeed splits seed into host and port, defaulting the port.
func splitSeed(seed string, defPort int) (string, int, error) {
	if seed == "" {
		return "", 0, fmt.Errorf("empty seed address")
	}
	host, portStr, err := net.SplitHostPort(seed)
	if err != nil {
		// No port: a bare host, IPv4 or IPv6 address.
		if strings.ContainsAny(seed, "[]/ ") || (strings.Count(seed, ":") == 1) {
			return "", 0, fmt.Errorf("seed %q: want host, host:port, ip or [ipv6]:port", seed)
		}
		host, portStr = seed, strconv.Itoa(defPort)
		if strings.Contains(seed, ":") { // bare IPv6
			if _, perr := netip.ParseAddr(seed); perr != nil {
				return "", 0, fmt.Errorf("seed %q: not an IPv6 address: %v", seed, perr)
			}
		}
	}
	if host == "" {
		return "", 0, fmt.Errorf("seed %q: empty host", seed)
	}
	if strings.ContainsAny(host, "/ ") {
		return "", 0, fmt.Errorf("seed %q: bad host %q", seed, host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("seed %q: port %q: want 1..65535", seed, portStr)
	}
	return host, port, nil
}

// ParseGossipKey decodes a gossip encryption key: standard base64 (surrounding
// whitespace ignored) of 16, 24 or 32 bytes, or exactly 16, 24 or 32 raw bytes.
func ParseGossipKey(b []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(b)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if k, err := enc.DecodeString(string(trimmed)); err == nil && validKeyLen(len(k)) {
			return k, nil
		}
	}
	if validKeyLen(len(b)) {
		return bytes.Clone(b), nil
	}
	if validKeyLen(len(trimmed)) {
		return bytes.Clone(trimmed), nil
	}
	return nil, fmt.Errorf("gossip key: want 16, 24 or 32 bytes, raw or base64 (got %d bytes)", len(b))
}

// LoadGossipKey reads a gossip key file (--gossip-key-file); see ParseGossipKey.
func LoadGossipKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gossip key %s: %w", path, err)
	}
	k, err := ParseGossipKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func validKeyLen(n int) bool { return n == 16 || n == 24 || n == 32 }

// validate checks c and fills defaults for zero durations.
func (c *Config) validate() error {
	if c.NodeName == "" {
		return fmt.Errorf("ring: empty node name")
	}
	if c.GRPCAddr == "" {
		return fmt.Errorf("ring: empty gRPC address to advertise")
	}
	if _, err := encodeMeta(c.GRPCAddr); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	if c.GossipKey != nil && !validKeyLen(len(c.GossipKey)) {
		return fmt.Errorf("ring: gossip key is %d bytes, want 16, 24 or 32", len(c.GossipKey))
	}
	for _, s := range c.Join {
		if err := CheckSeed(s); err != nil {
			return fmt.Errorf("ring: join: %w", err)
		}
	}
	if err := c.Hash.Validate(); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	d := DefaultConfig()
	if c.Fast {
		d.JoinRetryMin, d.JoinRetryMax, d.RejoinInterval, d.LeaveTimeout = 50*time.Millisecond, time.Second, 200*time.Millisecond, 2*time.Second
	}
	prod := DefaultConfig()
	for _, p := range []struct{ v, d, prod *time.Duration }{
		{&c.JoinRetryMin, &d.JoinRetryMin, &prod.JoinRetryMin},
		{&c.JoinRetryMax, &d.JoinRetryMax, &prod.JoinRetryMax},
		{&c.RejoinInterval, &d.RejoinInterval, &prod.RejoinInterval},
		{&c.LeaveTimeout, &d.LeaveTimeout, &prod.LeaveTimeout},
	} {
		// Zero takes the default; with Fast, so does the production default.
		if *p.v <= 0 || (c.Fast && *p.v == *p.prod) {
			*p.v = *p.d
		}
	}
	if c.JoinRetryMax < c.JoinRetryMin {
		c.JoinRetryMax = c.JoinRetryMin
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.lookupNetIP == nil {
		c.lookupNetIP = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	return nil
}

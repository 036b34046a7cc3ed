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
	// GossipAddr is the ip:port the gossip listener binds (TCP and UDP). Port 0 picks a
	// free port; read it back with Cluster.GossipAddr. Empty (the default): the host of
	// GRPCAddr, which must then be an IP address, on DefaultGossipPort (DefaultGossipAddr),
	// so that gossip listens where the replica is reached and not on every interface.
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
	// GossipKey is the primary gossip key: it encrypts and authenticates what this member
	// sends (AES-GCM; 16, 24 or 32 bytes). A member whose messages no installed key opens
	// (another key, or none) cannot join, and is counted in ring_gossip_refused_total.
	// Required unless InsecureGossip; change it on a running member with
	// Cluster.SetGossipKeys.
	GossipKey []byte
	// AcceptedKeys are further keys that open incoming messages but do not encrypt: the
	// middle step of a rotation (see Cluster.SetGossipKeys). They need a GossipKey.
	AcceptedKeys [][]byte
	// InsecureGossip allows an empty GossipKey: gossip in plaintext, which any process that
	// reaches the gossip port can join and so take a share of the services and serve its
	// own endpoints for them. For tests and a local mesh only; New logs a warning, the
	// ring_insecure_gossip gauge is 1 and Warnings says so. It cannot be combined with a key.
	InsecureGossip bool
	// Hash is the ring shape. The member advertises it in its metadata, and builds its
	// rings with it while every member advertises the same; otherwise (a rolling upgrade
	// between shapes, or members configured apart) with LegacyHashConfig, which every
	// member computes alike.
	Hash HashConfig
	// JoinRetryMin and JoinRetryMax bound the exponential backoff between failed join
	// attempts (with jitter).
	JoinRetryMin, JoinRetryMax time.Duration
	// RejoinInterval is how often a joined member resolves its seeds again and joins every
	// seed address that is not a live member: a member left alone after a partition, or
	// the halves of a split that both kept members, merge again within about this interval
	// of the network healing (plus a dial that was in flight). Before the first join,
	// attempts back off from JoinRetryMin to JoinRetryMax instead.
	RejoinInterval time.Duration
	// LeaveTimeout bounds how long Run waits for the leave broadcast on shutdown (and half
	// of it for the leaving metadata before it): at most 1.5 times it in all.
	LeaveTimeout time.Duration
	// ProbeInterval is memberlist's failure-detection period: each member probes one other
	// per interval; a reply is due within half of it, and the other half is for indirect
	// probes through other members and a TCP ping. A member that stops answering is suspected
	// after about one to three intervals (with four members) and declared dead, unless it
	// refutes, SuspicionMult (4) intervals later (times log10 of the members beyond ten):
	// about 2.5 to 3.5s after a crash with the default 500ms (5 to 7s with memberlist's LAN
	// default of 1s). A replica that pauses longer than that (a long garbage collection on
	// an overloaded node) is declared dead too, so a longer interval tolerates longer pauses
	// and a crash takes longer to notice.
	ProbeInterval time.Duration
	// DeadHold is how long a member memberlist declared dead stays in the ring while its
	// gRPC address still accepts connections: a replica too starved of CPU to answer its
	// probes in time (a throttled pod, an overloaded node), not a crashed one, which refutes
	// moments later; dropping it and taking it back would move its services twice (a flap).
	// A member whose address refuses, or does not answer within a second, leaves at once,
	// and so does one that left on purpose. Negative: every member declared dead leaves at
	// once. Default 5s.
	DeadHold time.Duration
	// ColdStartWait bounds a cold start's wait. A member that sees no serving member when
	// it starts (every member it sees is starting too: replicas started together, at
	// install or after they all went down) waits before it reports Settled, so that the
	// first one up does not load the whole cluster before the others join. It waits until
	// ExpectMembers are present, or until the ring, of two members or more, has not changed
	// for a sixth of this (5s at 30s), or until another member serves having formed its
	// ring with no more members than this one sees, or for this long in all (coldstart.go).
	// While it waits it advertises that it is starting. A member that joins a serving ring
	// settles at once. 0 (the default): no wait; Settled is true from New.
	ColdStartWait time.Duration
	// ExpectMembers ends a cold start's wait as soon as the ring has this many members (the
	// replica count, when the caller knows it). 0: not known.
	ExpectMembers int
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

// DefaultConfig returns the defaults: node name from the hostname, gossip on the gRPC
// address's host at port 7946, no key (one must be set, or InsecureGossip), the default
// ring shape, join backoff 500ms..30s, seeds retried every second while one is missing,
// leave timeout 5s, a probe every 500ms, a dead member that still accepts connections held
// for 5s.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		NodeName:       host,
		Hash:           DefaultHashConfig(),
		JoinRetryMin:   500 * time.Millisecond,
		JoinRetryMax:   30 * time.Second,
		RejoinInterval: time.Second,
		LeaveTimeout:   5 * time.Second,
		ProbeInterval:  500 * time.Millisecond,
		DeadHold:       5 * time.Second,
	}
}

// DefaultGossipAddr returns where gossip binds when Config.GossipAddr is empty: the host of
// grpcAddr (host:port), which must be an IP address, on DefaultGossipPort.
func DefaultGossipAddr(grpcAddr string) (string, error) {
	host, _, err := net.SplitHostPort(grpcAddr)
	if err != nil {
		return "", fmt.Errorf("gRPC address %q: %w", grpcAddr, err)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("gossip binds to the gRPC address's host by default, and %q is not an IP address: give the gossip address", host)
	}
	return netip.AddrPortFrom(a, DefaultGossipPort).String(), nil
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

// checkKeys checks a primary key and accepted keys: every key 16, 24 or 32 bytes, and
// accepted keys only with a primary.
func checkKeys(primary []byte, accepted [][]byte) error {
	if primary != nil && !validKeyLen(len(primary)) {
		return fmt.Errorf("gossip key is %d bytes, want 16, 24 or 32", len(primary))
	}
	for i, k := range accepted {
		if !validKeyLen(len(k)) {
			return fmt.Errorf("accepted gossip key %d is %d bytes, want 16, 24 or 32", i+1, len(k))
		}
	}
	if len(primary) == 0 && len(accepted) > 0 {
		return fmt.Errorf("accepted gossip keys without a primary key")
	}
	return nil
}

// validate checks c and fills defaults for zero durations.
func (c *Config) validate() error {
	if c.NodeName == "" {
		return fmt.Errorf("ring: empty node name")
	}
	if c.GRPCAddr == "" {
		return fmt.Errorf("ring: empty gRPC address to advertise")
	}
	if _, err := encodeMeta(c.GRPCAddr, c.Hash.String(), startState{starting: true, formed: 1 << 30}); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	if err := checkKeys(c.GossipKey, c.AcceptedKeys); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	switch {
	case len(c.GossipKey) == 0 && !c.InsecureGossip:
		return fmt.Errorf("ring: no gossip key: without one, any process that reaches the gossip port can join the ring and serve its own endpoints; give a key, or allow plaintext gossip explicitly (InsecureGossip, for tests and a local mesh)")
	case len(c.GossipKey) > 0 && c.InsecureGossip:
		return fmt.Errorf("ring: a gossip key and InsecureGossip: choose one")
	}
	if c.GossipAddr == "" {
		a, err := DefaultGossipAddr(c.GRPCAddr)
		if err != nil {
			return fmt.Errorf("ring: %w", err)
		}
		c.GossipAddr = a
	}
	for _, s := range c.Join {
		if err := CheckSeed(s); err != nil {
			return fmt.Errorf("ring: join: %w", err)
		}
	}
	if err := c.Hash.Validate(); err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	if c.ColdStartWait < 0 {
		return fmt.Errorf("ring: negative cold-start wait %s", c.ColdStartWait)
	}
	if c.ExpectMembers < 0 {
		return fmt.Errorf("ring: negative expected members %d", c.ExpectMembers)
	}
	d := DefaultConfig()
	if c.Fast {
		d.JoinRetryMin, d.JoinRetryMax, d.RejoinInterval, d.LeaveTimeout = 50*time.Millisecond, time.Second, 200*time.Millisecond, 2*time.Second
		d.DeadHold = 2 * time.Second
	}
	prod := DefaultConfig()
	for _, p := range []struct{ v, d, prod *time.Duration }{
		{&c.JoinRetryMin, &d.JoinRetryMin, &prod.JoinRetryMin},
		{&c.JoinRetryMax, &d.JoinRetryMax, &prod.JoinRetryMax},
		{&c.RejoinInterval, &d.RejoinInterval, &prod.RejoinInterval},
		{&c.LeaveTimeout, &d.LeaveTimeout, &prod.LeaveTimeout},
		{&c.ProbeInterval, &d.ProbeInterval, &prod.ProbeInterval},
	} {
		// Zero takes the default; with Fast, so does the production default.
		if *p.v <= 0 || (c.Fast && *p.v == *p.prod) {
			*p.v = *p.d
		}
	}
	if c.DeadHold == 0 || (c.Fast && c.DeadHold == prod.DeadHold) {
		c.DeadHold = d.DeadHold // negative: no hold
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

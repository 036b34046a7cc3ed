package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/shard"
)

// alone starts a replica without a ring on the cluster's directory.
func alone(t *testing.T, c *cluster) *node {
	return startNode(t, c, "alone", nil, false, shard.Forward)
}

func TestResolveMeshedEndpoints(t *testing.T) {
	c := newCluster(t)
	s := svc{ns: "shop", name: "web", ips: []string{"10.0.0.2", "10.0.0.1"}, meshed: true}
	c.write(s)
	n := alone(t, c)
	r := newResolver(t, n.Addr, func(cfg *Config) { cfg.ContextToken = `{"ns":"shop","nodeName":"n1","pod":"client"}` })
	h := resolve(t, r, "WEB.shop.svc.cluster.local.") // normalised, port 80
	if h.Authority() != "web.shop.svc.cluster.local:80" {
		t.Fatalf("authority %q", h.Authority())
	}
	waitEndpoints(t, h, endpointsOf(8080, s.ips...))
	snap := h.Snapshot()
	for i, e := range snap.Endpoints {
		if e.Weight != DefaultWeight || !strings.HasPrefix(e.Identity, "web.shop.serviceaccount.identity.linkerd.") || e.Hint != HintH2 {
			t.Fatalf("endpoint %d: %+v", i, e)
		}
		if e.Labels["service"] != "web" || e.Labels["namespace"] != "shop" || e.Labels["pod"] != fmt.Sprintf("web-%d", 1-i) {
			t.Fatalf("endpoint %d labels %v", i, e.Labels)
		}
	}
	if snap.Profile.FullyQualifiedName != "web.shop.svc.cluster.local" || snap.Profile.Opaque {
		t.Fatalf("profile %+v", snap.Profile)
	}
}

// NoEndpoints{exists: true} resolves to a service with an empty set, and empties a set later.
func TestNoEndpoints(t *testing.T) {
	c := newCluster(t)
	s := svc{ns: "shop", name: "web", noSlice: true}
	c.write(s)
	n := alone(t, c)
	r := newResolver(t, n.Addr, nil)
	h := resolve(t, r, "web.shop.svc.cluster.local:80")
	if snap := h.Snapshot(); !snap.Resolved || !snap.Exists || len(snap.Endpoints) != 0 {
		t.Fatalf("snapshot %+v", snap)
	}
	s.noSlice, s.ips = false, []string{"10.0.0.1"}
	c.write(s)
	waitEndpoints(t, h, endpointsOf(8080, s.ips...))
	s.ips = nil
	c.write(s)
	waitEndpoints(t, h, []string{})
}

// NotFound resolves to a service that does not exist; it is asked again, and found once it
// is created.
func TestNotFoundThenCreated(t *testing.T) {
	c := newCluster(t)
	n := alone(t, c)
	r := newResolver(t, n.Addr, func(cfg *Config) { cfg.BackoffMax = 300 * time.Millisecond })
	h := resolve(t, r, "web.shop.svc.cluster.local:80")
	if snap := h.Snapshot(); !snap.Resolved || snap.Exists || len(snap.Endpoints) != 0 || snap.Profile != (Profile{}) {
		t.Fatalf("snapshot of an unknown service %+v", snap)
	}
	c.write(svc{ns: "shop", name: "web", ips: []string{"10.0.0.1"}})
	waitEndpoints(t, h, endpointsOf(8080, "10.0.0.1"))
	testutil.Eventually(t, within, "the profile", func() bool {
		return h.Snapshot().Profile.FullyQualifiedName == "web.shop.svc.cluster.local"
	})
}

// InvalidArgument (a name outside the cluster) is ErrNotMeshName, remembered while the
// target would be; an authority that does not parse is ErrNotMeshName without a stream. (An
// IP address is looked up by its profile: ip_test.go.)
func TestNotMeshName(t *testing.T) {
	n := alone(t, newCluster(t))
	r := newResolver(t, n.Addr, nil)
	for _, a := range []string{"example.com", "web.shop.svc.cluster.local:0", "a b:80", "[fe80::1%eth0]:80"} {
		h, err := tryResolve(r, a)
		if !errors.Is(err, ErrNotMeshName) {
			t.Fatalf("%s: handle %v, error %v; want ErrNotMeshName", a, h, err)
		}
		t.Logf("%s: %v", a, err)
	}
	started := startedGets(t, n)
	if started != 1 {
		t.Fatalf("%v Get streams, want 1 (the external name)", started)
	}
	if _, err := tryResolve(r, "example.com:80"); !errors.Is(err, ErrNotMeshName) {
		t.Fatalf("again: %v", err)
	}
	if got := startedGets(t, n); got != started {
		t.Fatal("a remembered rejection asked the destination again")
	}
}

// A held target keeps its streams; one no one holds is dropped after the idle timeout, and
// a Resolve before that takes it again without a new stream.
func TestIdleTargetDropped(t *testing.T) {
	c := newCluster(t)
	c.write(svc{ns: "shop", name: "web", ips: []string{"10.0.0.1"}})
	n := alone(t, c)
	const idle = 300 * time.Millisecond
	r := newResolver(t, n.Addr, func(cfg *Config) { cfg.IdleTimeout = idle })
	h, err := tryResolve(r, "web.shop.svc.cluster.local:80")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Never(t, 3*idle, "a held target dropped", func() bool { return n.GetStreams(t) != 1 })
	h.Release()
	h.Release() // idempotent: one holder, one reference
	h2 := resolve(t, r, "web.shop.svc.cluster.local:80")
	if h2.t != h.t || startedGets(t, n) != 1 {
		t.Fatalf("a target taken again within the idle timeout was not reused (%v Get streams started)", startedGets(t, n))
	}
	testutil.Never(t, 3*idle, "a held target dropped", func() bool { return r.numTargets() != 1 })
	h2.Release()
	testutil.Eventually(t, within, "the idle target to be dropped", func() bool { return r.numTargets() == 0 })
	testutil.Eventually(t, within, "its streams to end", func() bool {
		return n.GetStreams(t) == 0 && proxytest.Gathered(t, n.Reg, "destination_streams", map[string]string{"method": "get_profile"}) == 0
	})
	// The snapshot of a dropped target still reads; a new Resolve starts new streams.
	if got := addrs(h2.Snapshot()); !slices.Equal(got, endpointsOf(8080, "10.0.0.1")) {
		t.Fatalf("snapshot after the drop %v", got)
	}
	resolve(t, r, "web.shop.svc.cluster.local:80")
	if got := startedGets(t, n); got != 2 {
		t.Fatalf("%v Get streams started, want 2", got)
	}
}

// Concurrent Resolve calls for one authority share one pair of streams.
func TestConcurrentResolveSharesStreams(t *testing.T) {
	c := newCluster(t)
	c.write(svc{ns: "shop", name: "web", ips: []string{"10.0.0.1", "10.0.0.2"}})
	n := alone(t, c)
	r := newResolver(t, n.Addr, nil)
	const callers = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	handles := make([]*Target, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			handles[i], errs[i] = tryResolve(r, "web.shop.svc.cluster.local")
		}()
	}
	close(start)
	testutil.Wait(t, within, "the Resolve calls", wg.Wait)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		if handles[i].t != handles[0].t {
			t.Fatalf("caller %d got a target of its own", i)
		}
	}
	if got := startedGets(t, n); got != 1 {
		t.Fatalf("%v Get streams for one authority", got)
	}
	if got := proxytest.Gathered(t, n.Reg, "grpc_server_started_total", map[string]string{"grpc_method": "GetProfile"}); got != 1 {
		t.Fatalf("%v GetProfile streams for one authority", got)
	}
	r.mu.Lock()
	refs := handles[0].t.refs
	r.mu.Unlock()
	if refs != callers {
		t.Fatalf("%d references, want %d", refs, callers)
	}
	for _, h := range handles {
		h.Release()
	}
	r.mu.Lock()
	refs = handles[0].t.refs
	r.mu.Unlock()
	if refs != 0 {
		t.Fatalf("%d references after every release", refs)
	}
}

// While the only replica is down the target keeps its last set (and serves it); when a
// replica answers again its first Add replaces the set.
func TestDestinationDownKeepsLastSet(t *testing.T) {
	c := newCluster(t)
	s := svc{ns: "shop", name: "web", ips: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}}
	c.write(s)
	n := startNode(t, c, "first", nil, false, shard.Forward)
	sw := &switchConns{pool: poolPlain(t), dst: n.Addr}
	cfg := DefaultConfig()
	cfg.Addr, cfg.BackoffMax = dstName, 200*time.Millisecond
	r := runResolver(t, cfg, sw)
	h := resolve(t, r, "web.shop.svc.cluster.local:80")
	waitEndpoints(t, h, endpointsOf(8080, s.ips...))
	rec := record(t, h)
	n.Kill()
	version := h.Snapshot().Version
	testutil.Never(t, time.Second, "the snapshot to change while the destination is down", func() bool {
		return h.Snapshot().Version != version
	})
	// The set changes while no one serves it; a new replica serves the new set, and the
	// resolver's reconnect replaces what it held.
	s.ips = []string{"10.0.0.3", "10.0.0.4"}
	c.write(s)
	sw.set(startNode(t, c, "second", nil, false, shard.Forward).Addr)
	waitEndpoints(t, h, endpointsOf(8080, s.ips...))
	snaps := rec.upTo(t, h)
	last := snaps[len(snaps)-1]
	if len(snaps) != 2 || last.Version != version+1 {
		t.Fatalf("the reconnect published %d states (want one change, the replacement): %v", len(snaps)-1, versions(snaps))
	}
}

func versions(snaps []*Snapshot) []string {
	var out []string
	for _, s := range snaps {
		out = append(out, fmt.Sprintf("v%d=%v", s.Version, addrs(s)))
	}
	return out
}

// Resolve waits for Run, and fails with ErrStopped after it; a Resolve whose context ends
// first says why.
func TestResolveLifecycle(t *testing.T) {
	c := newCluster(t)
	c.write(svc{ns: "shop", name: "web", ips: []string{"10.0.0.1"}})
	n := alone(t, c)
	cfg := DefaultConfig()
	cfg.Addr = n.Addr
	r := NewResolver(cfg, poolPlain(t), nil)
	got := make(chan error, 1)
	go func() {
		_, err := tryResolve(r, "web.shop.svc.cluster.local")
		got <- err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := testutil.Recv(t, got, within, "Resolve before Run"); err != nil {
		t.Fatalf("Resolve before Run: %v", err)
	}
	if err := r.Run(ctx); err == nil {
		t.Fatal("a second Run must fail")
	}
	// A name no one answers for: the context ends first, with the stream's error.
	dead := newResolver(t, "127.0.0.1:1", nil)
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if _, err := dead.Resolve(short, "web.shop.svc.cluster.local"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "web.shop.svc.cluster.local:80") {
		t.Fatalf("unreachable destination: %v", err)
	}
	cancel()
	if err := testutil.Recv(t, done, within, "Run to return"); err != nil {
		t.Fatal(err)
	}
	if _, err := tryResolve(r, "web.shop.svc.cluster.local"); !errors.Is(err, ErrStopped) {
		t.Fatalf("Resolve after Run: %v", err)
	}
	if err := NewResolver(DefaultConfig(), nil, nil).Run(context.Background()); err == nil {
		t.Fatal("Run without an address must fail")
	}
}

package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"google.golang.org/grpc"
)

const gatewayPolicyAlt = `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: web-from-web, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
  - {kind: ServiceAccount, name: web}
`

func fastConfig() WatchConfig {
	return WatchConfig{Workload: `{"ns":"shop","pod":"web-0"}`, InitialTimeout: wait, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
}

func hasWarning(w *Watcher, parts ...string) bool {
	for _, line := range w.Warnings() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestWatcherFollowsTheService: the first policy arrives from the real policy service, a
// change reaches the port, and while the service is down the last policy stays in force
// (and Warnings say so) until the service is back.
func TestWatcherFollowsTheService(t *testing.T) {
	idx := proxytest.NewPolicyIndex(t, seedYAML(t))
	ctl := proxytest.ServePolicy(t, idx, "127.0.0.1:0")
	w := runWatcher(t, fastConfig(), testutil.DialGRPC(t, ctl.Addr), mustDefault(t, DefaultAllUnauthenticated))

	p := w.Lookup(context.Background(), 8080)
	defer p.Release()
	if p.Source() != SourceService || p.Policy().Name != "web-http" {
		t.Fatalf("first policy: %v %s", p.Source(), p.Policy().Name)
	}
	allowed := func(c Client) bool { return p.Policy().Route(request("GET", "/api")).Authorize(c) != nil }
	if !allowed(fromGateway) || allowed(fromWeb) {
		t.Fatal("web-http does not authorize exactly the gateway")
	}

	changed := p.Changed()
	proxytest.ApplyPolicy(t, idx, gatewayPolicyAlt)
	waitClosed(t, changed, wait, "the policy change")
	testutil.Eventually(t, wait, "web allowed after the change", func() bool { return allowed(fromWeb) })

	ctl.Stop()
	testutil.Eventually(t, wait, "a warning for the stale policy", func() bool {
		return hasWarning(w, "port 8080", "unavailable", "the last policy received (server web-http)")
	})
	if p.Source() != SourceService || !allowed(fromWeb) || !allowed(fromGateway) || allowed(plainClient) {
		t.Fatal("the last policy is not kept while the service is down")
	}

	// The service comes back on the same address without the new policy: the stream
	// reconnects and the port follows it again.
	idx2 := proxytest.NewPolicyIndex(t, seedYAML(t))
	proxytest.ServePolicy(t, idx2, ctl.Addr)
	testutil.Eventually(t, wait, "the policy from the restarted service", func() bool { return !allowed(fromWeb) && allowed(fromGateway) })
	testutil.Eventually(t, wait, "the warning cleared", func() bool { return !hasWarning(w, "port 8080") })
}

// TestWatcherDefaultWithoutService: with the service unreachable from the start, a port gets
// the default policy as soon as the first attempt fails, and says so.
func TestWatcherDefaultWithoutService(t *testing.T) {
	lis := testutil.Listen(t)
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	w := runWatcher(t, fastConfig(), testutil.DialGRPC(t, addr), mustDefault(t, DefaultDeny))
	p := w.Lookup(context.Background(), 8080)
	defer p.Release()
	if p.Source() != SourceDefault || p.Policy().Name != "deny" {
		t.Fatalf("policy without a service: %v %s", p.Source(), p.Policy().Name)
	}
	testutil.Eventually(t, wait, "a warning for the default", func() bool {
		return hasWarning(w, "port 8080", "the default policy (deny)")
	})
}

// TestWatcherWithoutWorkload: no workload, no streams: the default at once.
func TestWatcherWithoutWorkload(t *testing.T) {
	w := runWatcher(t, WatchConfig{Ports: []uint16{80}}, nil, mustDefault(t, DefaultAudit))
	p := w.Lookup(context.Background(), 80)
	defer p.Release()
	if p.Source() != SourceDefault || p.Policy().Name != "audit" || !hasWarning(w, "no policy service") {
		t.Fatalf("%v %s %v", p.Source(), p.Policy().Name, w.Warnings())
	}
}

// fakePolicies sends the messages the test gives it on every WatchPort stream.
type fakePolicies struct {
	inbound.UnimplementedInboundServerPoliciesServer
	msgs chan *inbound.Server
}

func (f *fakePolicies) WatchPort(_ *inbound.PortSpec, st inbound.InboundServerPolicies_WatchPortServer) error {
	for {
		select {
		case m := <-f.msgs:
			if err := st.Send(m); err != nil {
				return err
			}
		case <-st.Context().Done():
			return nil
		}
	}
}

// TestWatcherInvalidPolicy: a policy that does not compile never widens anything: with no
// good policy before it the port denies; after a good one, the good one stays.
func TestWatcherInvalidPolicy(t *testing.T) {
	fake := &fakePolicies{msgs: make(chan *inbound.Server)}
	addr := testutil.ServeGRPC(t, func(s *grpc.Server) { inbound.RegisterInboundServerPoliciesServer(s, fake) })
	w := runWatcher(t, fastConfig(), testutil.DialGRPC(t, addr), mustDefault(t, DefaultAllUnauthenticated))
	p := w.acquire(8080)
	defer p.Release()
	send := func(m *inbound.Server) {
		ch := p.Changed()
		select {
		case fake.msgs <- m:
		case <-time.After(wait):
			t.Fatal("the stream did not take the message")
		}
		waitClosed(t, ch, wait, "the policy change")
	}
	bad := validServer()
	bad.Protocol = nil
	send(bad)
	if p.Source() != SourceInvalid || p.Policy().AuthorizeTCP(fromLoopback) != nil {
		t.Fatalf("after an invalid first policy: %v %s", p.Source(), p.Policy().Name)
	}
	send(validServer())
	if p.Source() != SourceService || p.Policy().Name != "srv" {
		t.Fatalf("after a valid policy: %v", p.Source())
	}
	good := p.Policy()
	select {
	case fake.msgs <- bad:
	case <-time.After(wait):
		t.Fatal("the stream did not take the message")
	}
	testutil.Eventually(t, wait, "a warning for the invalid policy", func() bool { return hasWarning(w, "invalid policy ignored", "server srv") })
	if p.Policy() != good {
		t.Fatal("an invalid policy replaced a good one")
	}
}

// TestWatcherIdleAndBounds: a port nobody holds is dropped after the idle timeout (a
// configured one never is), and a port beyond MaxPorts authorizes nothing.
func TestWatcherIdleAndBounds(t *testing.T) {
	idx := proxytest.NewPolicyIndex(t, seedYAML(t))
	ctl := proxytest.ServePolicy(t, idx, "127.0.0.1:0")
	cfg := fastConfig()
	cfg.Ports, cfg.MaxPorts, cfg.IdleTimeout = []uint16{9000}, 2, 20*time.Millisecond
	w := runWatcher(t, cfg, testutil.DialGRPC(t, ctl.Addr), mustDefault(t, DefaultAllUnauthenticated))
	watched := func(port uint16) bool {
		w.mu.RLock()
		defer w.mu.RUnlock()
		return w.ports[port] != nil
	}
	p := w.Lookup(context.Background(), 8080)
	over := w.Lookup(context.Background(), 8081)
	if over.Source() != SourceOverflow || over.Policy().AuthorizeTCP(fromLoopback) != nil || !hasWarning(w, "beyond the 2 watched") {
		t.Fatalf("port beyond MaxPorts: %v %v", over.Source(), w.Warnings())
	}
	over.Release()
	testutil.Never(t, 100*time.Millisecond, "a held port dropped", func() bool { return !watched(8080) })
	p.Release()
	testutil.Eventually(t, wait, "the idle port dropped", func() bool { return !watched(8080) })
	if !watched(9000) {
		t.Fatal("a configured port was dropped")
	}
	p = w.Lookup(context.Background(), 8080) // back, with a new stream
	defer p.Release()
	if p.Source() != SourceService || p.Policy().Name != "web-http" {
		t.Fatalf("port looked up again: %v %s", p.Source(), p.Policy().Name)
	}
}

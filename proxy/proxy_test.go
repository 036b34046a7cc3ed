package proxy

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/config"
	"github.com/meridian-mesh/meridian/proxy/inbound"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// local is a configuration on one machine with identity disabled: nothing needs a control
// plane to start.
func local() config.Config {
	cfg := config.Default()
	cfg.IdentityDisabled = true
	cfg.DestinationAddr = "127.0.0.1:1"
	cfg.InboundAddr, cfg.OutboundAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ShutdownGracePeriod = time.Second
	return cfg
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"no destination", func(c *config.Config) { c.DestinationAddr = "" }, "DESTINATION_SVC_ADDR"},
		{"trust anchors without a certificate", func(c *config.Config) {
			c.IdentityDisabled, c.IdentityAddr, c.LocalName, c.TokenFile = false, "127.0.0.1:1", "a.b.serviceaccount.identity.linkerd.cluster.local", "/dev/null"
			c.TrustAnchors = "not PEM"
		}, "TRUST_ANCHORS"},
		{"destination mTLS without identity", func(c *config.Config) { c.DestinationName = "destination.linkerd" }, "identity is disabled"},
		{"policy mTLS without identity", func(c *config.Config) { c.PolicyAddr, c.PolicyName = "127.0.0.1:1", "policy.linkerd" }, "identity is disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := local()
			tc.mutate(&cfg)
			if _, err := New(cfg, Deps{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// The assembled proxy runs in a group: ready once its listeners are bound (identity
// disabled: no certificate to wait for), its components' warnings passed on (no policy
// service: the default policy), and it stops within its grace period.
func TestAddRunsTheComponents(t *testing.T) {
	p, err := New(local(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	var g run.Group
	p.Add(&g)
	testutil.Go(t, "the proxy's group", g.Run)
	testutil.EventuallyNoError(t, 10*time.Second, "the proxy ready", g.Ready)
	if p.InboundAddr() == nil || p.OutboundAddr() == nil {
		t.Fatalf("listeners %v, %v", p.InboundAddr(), p.OutboundAddr())
	}
	if w := strings.Join(g.Warnings(), "\n"); !strings.Contains(w, "inbound:") || !strings.Contains(w, "default policy") {
		t.Errorf("warnings %q, want the inbound side's (no policy service: the default policy)", w)
	}
}

// TestInboundClusterNetworks: LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS reaches the inbound
// proxy's cluster-* default policies; unset, they keep Linkerd's private ranges.
func TestInboundClusterNetworks(t *testing.T) {
	cfg := config.Default()
	if got := inboundConfig(cfg).ClusterNetworks; !slices.Equal(got, inbound.DefaultClusterNetworks) {
		t.Errorf("unset: %v, want %v", got, inbound.DefaultClusterNetworks)
	}
	cfg.ClusterNetworks = []netip.Prefix{netip.MustParsePrefix("10.8.0.0/16")}
	if got := inboundConfig(cfg).ClusterNetworks; !slices.Equal(got, cfg.ClusterNetworks) {
		t.Errorf("set: %v, want %v", got, cfg.ClusterNetworks)
	}
}

// TestLogFormat: LINKERD2_PROXY_LOG_FORMAT takes json and plain in any case; anything else
// is plain and reported (it was plain silently, so JSON meant plain logs).
func TestLogFormat(t *testing.T) {
	for _, c := range []struct {
		in, format string
		known      bool
	}{{"json", "json", true}, {"JSON", "json", true}, {"Json", "json", true}, {"plain", "console", true},
		{"PLAIN", "console", true}, {"", "console", true}, {"xml", "console", false}, {"json ", "console", false}} {
		if f, k := logFormat(c.in); f != c.format || k != c.known {
			t.Errorf("logFormat(%q) = %q, %v; want %q, %v", c.in, f, k, c.format, c.known)
		}
	}
}

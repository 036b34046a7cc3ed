package policy

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

// The sources gate readiness and report warnings in a run.Group.
var (
	_ run.Readier = (*DirSource)(nil)
	_ run.Warner  = (*DirSource)(nil)
	_ run.Warner  = (*KubeSource)(nil)
)

// dirServer is a policy controller serving a manifest directory on 127.0.0.1.
type dirServer struct {
	dir     string
	admin   string
	metrics *Metrics
	client  inbound.InboundServerPoliciesClient
}

func startDirServer(t *testing.T) *dirServer {
	t.Helper()
	s := &dirServer{dir: copyTestdata(t)}
	log := zaptest.NewLogger(t)
	reg := prometheus.NewRegistry()
	s.metrics = NewMetrics(reg)
	cfg := DefaultConfig()
	cfg.Source = "dir:" + s.dir
	mcfg := manifest.DefaultConfig(s.dir)
	mcfg.Debounce, mcfg.Rescan = 10*time.Millisecond, 100*time.Millisecond
	src := NewDirSource(mcfg, reg, log, s.metrics)
	p := listenController(t, cfg, src, reg, log)
	testutil.Go(t, "the policy controller", p.Run)
	grpcLis := p.Addr()
	s.admin = "http://" + p.AdminAddr().String()
	testutil.Eventually(t, wait, "/ready", func() bool { code, _ := httpGet(t, s.admin+"/ready"); return code == http.StatusOK })
	s.client = inbound.NewInboundServerPoliciesClient(testutil.DialGRPC(t, grpcLis.String()))
	return s
}

// write replaces a manifest file atomically.
func (s *dirServer) write(t *testing.T, name, content string) {
	t.Helper()
	manifesttest.WriteAtomic(t, filepath.Join(s.dir, name), content)
}

// watch opens WatchPort on web-0:8080 and returns its first message and a channel of the
// later ones (the stream ends with the test).
func (s *dirServer) watch(t *testing.T) (*inbound.Server, <-chan *inbound.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := s.client.WatchPort(ctx, &inbound.PortSpec{Workload: "shop:web-0", Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	first := recv(t, stream)
	msgs := make(chan *inbound.Server, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return first, msgs
}

// TestDirSourceKeepsLastGoodPolicy runs the controller on a manifest directory whose Server
// and AuthorizationPolicy allow one identity on web-0:8080, and breaks the file twice, with
// a YAML typo and with an invalid field in the Server. Each time the live WatchPort stream
// receives nothing (the port keeps the restrictive policy instead of falling back to the
// open cluster default), /ready stays 200 and shows the error, manifest_errors counts it;
// once fixed, the stream gets the fixed policy and the warning goes.
func TestDirSourceKeepsLastGoodPolicy(t *testing.T) {
	testutil.VerifyNone(t)
	s := startDirServer(t)
	first, msgs := s.watch(t)
	gateway := []string{"web-from-gateway=" + gatewayID}
	if ids := identities(first); !slices.Equal(ids, gateway) || first.GetLabels()["name"] != "web-http" {
		t.Fatalf("first = %v %v", first.GetLabels(), ids)
	}
	good := readTestdata(t, "policy.yaml")
	file := filepath.Join(s.dir, "policy.yaml")
	for i, tc := range []struct {
		name, broken, warning, invalidKind string
	}{
		{
			name:    "a YAML typo",
			broken:  strings.Replace(good, "proxyProtocol: HTTP/1", "proxyProtocol: [HTTP/1", 1),
			warning: file + ":11: yaml: did not find expected ',' or ']'",
		},
		{
			name:        "an invalid field in the Server",
			broken:      strings.Replace(good, "port: http", "port: 70000", 1),
			warning:     file + ":10: kind Server shop/web-http: spec.port: 70000 out of range 1-65535",
			invalidKind: string(api.KindServer),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			invalidBefore := promtest.ToFloat64(s.metrics.invalid.WithLabelValues(string(api.KindServer)))
			s.write(t, "policy.yaml", tc.broken)
			testutil.EventuallyNoError(t, wait, "/ready to show the error", func() error {
				code, body := httpGet(t, s.admin+"/ready")
				if code != http.StatusOK || !strings.Contains(body, "warnings:\n") || !strings.Contains(body, tc.warning) {
					return &readyError{code, body}
				}
				return nil
			})
			if _, body := httpGet(t, s.admin+"/metrics"); !strings.Contains(body, `manifest_errors{file="`+file+`"} 1`) {
				t.Errorf("/metrics lacks manifest_errors for %s:\n%s", file, grepLines(body, "manifest_errors"))
			}
			if tc.invalidKind != "" {
				if got := promtest.ToFloat64(s.metrics.invalid.WithLabelValues(tc.invalidKind)); got != invalidBefore+1 {
					t.Errorf("policy_invalid_resources_total{kind=%s} = %v, want %v", tc.invalidKind, got, invalidBefore+1)
				}
			}
			testutil.Never(t, time.Second, "the stream to receive a new (wider) policy", func() bool { return len(msgs) > 0 })
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			got, err := s.client.GetPort(ctx, &inbound.PortSpec{Workload: "shop:web-0", Port: 8080})
			if err != nil || !slices.Equal(identities(got), identities(first)) || got.GetLabels()["name"] != "web-http" {
				t.Errorf("GetPort while the file is broken = %v %v (%v)", got.GetLabels(), identities(got), err)
			}

			// Fixed, with another allowed identity: the stream sees it and the warning goes.
			sa := []string{"edge-gateway", "api-gateway"}[i%2]
			s.write(t, "policy.yaml", strings.Replace(good, "name: api-gateway", "name: "+sa, 1))
			fixed := testutil.Recv(t, msgs, wait, "the fixed policy")
			want := []string{"web-from-gateway=" + sa + ".shop.serviceaccount.identity.linkerd.cluster.local"}
			if ids := identities(fixed); !slices.Equal(ids, want) {
				t.Fatalf("fixed policy = %v, want %v", ids, want)
			}
			first = fixed
			code, body := httpGet(t, s.admin+"/ready")
			if code != http.StatusOK || strings.Contains(body, "warnings:") {
				t.Errorf("/ready after the fix = %d %q", code, body)
			}
			if _, body := httpGet(t, s.admin+"/metrics"); strings.Contains(body, `manifest_errors{file="`+file+`"}`) {
				t.Errorf("manifest_errors still has a series for the fixed file")
			}
		})
	}
}

type readyError struct {
	code int
	body string
}

func (e *readyError) Error() string { return "/ready: " + http.StatusText(e.code) + ": " + e.body }

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDecodeManifestsFirstDefinitionWins: an object defined twice in one stream is returned
// once, its first definition, as the directory source keeps it; the second is an error. (The
// fuzzer found that a Server given twice made compute.Inbound report it conflicting with
// itself.)
func TestDecodeManifestsFirstDefinitionWins(t *testing.T) {
	server := func(proto string) string {
		return "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: web-http, namespace: shop}\n" +
			"spec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: " + proto + "}\n"
	}
	rs, errs := DecodeManifests("f.yaml", []byte(server("HTTP/1")+"---\n"+server("HTTP/2")))
	if len(rs) != 1 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "already defined") {
		t.Fatalf("%d resources, errors %v; want 1 and one 'already defined'", len(rs), errs)
	}
	if got := rs[0].Value.(*compute.Server).Protocol; got != compute.ProtocolHTTP1 {
		t.Errorf("the Server kept has protocol %v, want the first definition's", got)
	}
}

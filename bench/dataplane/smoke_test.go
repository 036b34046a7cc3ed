package dataplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestSmoke runs the whole benchmark briefly at a low rate: the control plane, both proxies
// and both nginx start, every variant of both protocols answers every request, Meridian's
// requests reach the application with the client's identity, and the proxies' memory,
// CPU and allocations are measured, profiles included. It skips without nginx unless
// MERIDIAN_REQUIRE_NGINX is set (CI installs it).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the control plane, two proxies and two nginx")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		if os.Getenv("MERIDIAN_REQUIRE_NGINX") != "" {
			t.Fatalf("nginx is required (MERIDIAN_REQUIRE_NGINX is set): %v", err)
		}
		t.Skip("no nginx on PATH (apt-get install nginx)")
	}
	cfg := DefaultConfig()
	cfg.Binary = testutil.BuildMeridian(t)
	cfg.Rate, cfg.Rounds, cfg.Segment, cfg.Warmup, cfg.Connections = 200, 2, 500*time.Millisecond, 500*time.Millisecond, 4
	cfg.ProfileDir = filepath.Join(t.TempDir(), "prof") // created by Run
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Protocols) != 2 {
		t.Fatalf("%d protocols measured", len(res.Protocols))
	}
	for _, p := range res.Protocols {
		if p.ClientIDSeen != clientID {
			t.Errorf("%s: the application saw l5d-client-id %q, want %q", p.Protocol, p.ClientIDSeen, clientID)
		}
		if len(p.Variants) != 3 {
			t.Fatalf("%s: %d variants", p.Protocol, len(p.Variants))
		}
		for _, v := range p.Variants {
			if v.Requests != 200 || v.Errors != 0 || len(v.Rounds) != 2 || v.P50Ms <= 0 {
				t.Errorf("%s %s: %d requests, %d errors (%s), %d rounds, p50 %v ms", p.Protocol, v.Variant, v.Requests, v.Errors, v.FirstError, len(v.Rounds), v.P50Ms)
			}
		}
		m := p.variant(Meridian)
		for _, pr := range m.Processes {
			if pr.RSSMaxBytes == 0 || pr.RSSPeakBytes < pr.RSSMaxBytes/2 || pr.CPUMicrosPerRequest <= 0 || pr.AllocsPerRequest == nil {
				t.Errorf("%s %s: %+v", p.Protocol, pr.Name, pr)
			}
		}
		if n := p.variant(Nginx); len(n.Processes) != 2 || n.Processes[0].RSSMaxBytes == 0 {
			t.Errorf("%s nginx processes: %+v", p.Protocol, n.Processes)
		}
		for _, name := range []string{"proxy-client.cpu", "proxy-server.cpu", "proxy-client.allocs", "proxy-server.allocs"} {
			path := filepath.Join(cfg.ProfileDir, string(p.Protocol)+"-"+name+".pb.gz")
			if n, err := testutil.GunzipLen(path); err != nil || n == 0 {
				t.Errorf("%s: %d bytes of profile, err %v", path, n, err)
			}
		}
	}
	if len(res.Targets) == 0 {
		t.Error("no targets checked")
	}
}

package gossipkey

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/ring"
)

const within = 30 * time.Second // a bound on waiting, for -race on a loaded machine

func TestReloaderRefusesBadSets(t *testing.T) {
	A, B := key('A'), key('B')
	sd := newSecretDir(t, map[string]string{"gossip.key": b64(A)})
	target := &recordingTarget{}
	reg := prometheus.NewRegistry()
	r, err := NewReloader(Config{Files: Files{Dir: sd.dir}, Poll: 50 * time.Millisecond}, Keys{Primary: A}, Deps{Target: target, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "reloader", r.Run)

	// A bad accepted key: the whole set is refused, with a warning; nothing is installed.
	sd.update(map[string]string{"gossip.key": b64(A), "accepted-next.key": "not a key"})
	testutil.Eventually(t, within, "the bad set to be reported", func() bool { return len(r.Warnings()) == 1 })
	if w := r.Warnings()[0]; !strings.Contains(w, "accepted-next.key") || !strings.Contains(w, "keeping the keys in use") {
		t.Errorf("warning %q does not name the file and say the keys stay", w)
	}
	if target.got.Load() != nil {
		t.Fatal("a refused set was installed")
	}
	if got := promtest.ToFloat64(r.errors); got != 1 {
		t.Errorf("ring_gossip_key_reload_errors_total = %v, want 1 (counted once while it lasts)", got)
	}
	// A primary missing: refused too.
	sd.update(map[string]string{"accepted-next.key": b64(B)})
	testutil.Eventually(t, within, "the missing primary to be reported", func() bool {
		w := r.Warnings()
		return len(w) == 1 && strings.Contains(w[0], "no gossip.key")
	})
	// Fixed: installed, and the warning is gone.
	sd.update(map[string]string{"gossip.key": b64(A), "accepted-next.key": b64(B)})
	testutil.Eventually(t, within, "the good set to be installed", func() bool {
		return target.has(Keys{Primary: A, Accepted: [][]byte{B}}) && len(r.Warnings()) == 0
	})
	// The target refusing (say, plaintext gossip) is reported the same way.
	target.refuse.Store(true)
	sd.update(map[string]string{"gossip.key": b64(B)})
	testutil.Eventually(t, within, "the target's refusal to be reported", func() bool {
		w := r.Warnings()
		return len(w) == 1 && strings.Contains(w[0], "refused")
	})
}

// member is a running ring member whose keys come from a Secret-like directory.
type member struct {
	c   *ring.Cluster
	reg *prometheus.Registry
	sd  *secretDir
}

func startMember(t *testing.T, name string, log *zap.Logger, data map[string]string, seeds ...string) *member {
	t.Helper()
	sd := newSecretDir(t, data)
	files := Files{Dir: sd.dir}
	ks, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ring.DefaultConfig()
	cfg.NodeName, cfg.GossipAddr, cfg.Fast, cfg.Join = name, "127.0.0.1:0", true, seeds
	cfg.GRPCAddr = fmt.Sprintf("127.0.0.1:%d", 30000+len(name))
	cfg.GossipKey, cfg.AcceptedKeys = ks.Primary, ks.Accepted
	cfg.Logger = log.Named(name)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c, err := ring.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, name+" ring", c.Run)
	r, err := NewReloader(Config{Files: files, Poll: 100 * time.Millisecond}, ks, Deps{Target: c, Registerer: reg, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, name+" key reloader", r.Run)
	return &member{c: c, reg: reg, sd: sd}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestRotationThroughFiles rotates a ring of three live members from key A to key B by
// changing each member's Secret-like key directory, one member at a time, in the three
// steps of a rolling rotation. After every change is installed, for a full probe round, no
// member is lost and no message is refused; the ring never changes.
func TestRotationThroughFiles(t *testing.T) {
	A, B := key('A'), key('B')
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)
	start := map[string]string{"gossip.key": b64(A)}
	a := startMember(t, "a", log, start)
	b := startMember(t, "b", log, start, a.c.GossipAddr())
	c := startMember(t, "c", log, start, a.c.GossipAddr())
	ms := []*member{a, b, c}
	whole := func() bool {
		for _, m := range ms {
			if m.c.Ring().Len() != 3 || !m.c.Joined() {
				return false
			}
		}
		return true
	}
	testutil.Eventually(t, within, "a ring of three", whole)
	logs.TakeAll()
	changes := make([]float64, len(ms))
	for i, m := range ms {
		changes[i] = gauge(t, m.reg, "ring_changes_total")
	}
	for _, step := range []struct {
		name string
		data map[string]string
		want Keys
	}{
		{"accepting B", map[string]string{"gossip.key": b64(A), "accepted-next.key": b64(B)}, Keys{Primary: A, Accepted: [][]byte{B}}},
		{"sending with B", map[string]string{"gossip.key": b64(B), "accepted-prev.key": b64(A)}, Keys{Primary: B, Accepted: [][]byte{A}}},
		{"dropping A", map[string]string{"gossip.key": b64(B)}, Keys{Primary: B}},
	} {
		for i, m := range ms {
			m.sd.update(step.data)
			testutil.Eventually(t, within, fmt.Sprintf("member %d to install the keys of %q", i, step.name), func() bool {
				p, acc := m.c.GossipKeys()
				return (Keys{Primary: p, Accepted: acc}).Equal(step.want)
			})
			testutil.Never(t, 1200*time.Millisecond, fmt.Sprintf("%q on member %d disturbing the ring", step.name, i), func() bool {
				for _, e := range logs.All() {
					if strings.Contains(e.Message, "ecrypt") { // memberlist refusing a message
						t.Errorf("%q on member %d: %s", step.name, i, e.Message)
						return true
					}
				}
				for j, o := range ms {
					if gauge(t, o.reg, "ring_gossip_refused_total") != 0 {
						t.Errorf("%q on member %d: member %d refused messages", step.name, i, j)
						return true
					}
				}
				return !whole()
			})
		}
	}
	for i, m := range ms {
		if got := gauge(t, m.reg, "ring_changes_total"); got != changes[i] {
			t.Errorf("member %d: ring_changes_total %v -> %v during the rotation", i, changes[i], got)
		}
		if p, _ := m.c.GossipKeys(); !bytes.Equal(p, B) {
			t.Errorf("member %d ends with primary %s", i, ring.KeyFingerprint(p))
		}
	}
}

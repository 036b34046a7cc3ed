package gen

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/translator"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func testConfig() Config {
	c := DefaultConfig()
	c.Services, c.EndpointsPerService, c.Namespaces, c.MeshedShare = 7, 250, 3, 0.5
	return c
}

func TestDeterministic(t *testing.T) {
	cfg := testConfig()
	a, err := NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewCluster(cfg)
	ra, rb := rand.New(rand.NewPCG(cfg.Seed, 2)), rand.New(rand.NewPCG(cfg.Seed, 2))
	for n := 0; n < 500; n++ {
		ca, err := a.Apply(ra, nil)
		if err != nil {
			t.Fatal(err)
		}
		cb, _ := b.Apply(rb, nil)
		if ca != cb {
			t.Fatalf("change %d differs: %+v vs %+v", n, ca, cb)
		}
	}
	for i := range cfg.Services {
		if !reflect.DeepEqual(cfg.Service(i), cfg.Service(i)) {
			t.Fatal("service differs")
		}
		for k := range a.Slices(i) {
			if !reflect.DeepEqual(a.EndpointSlice(i, k), b.EndpointSlice(i, k)) {
				t.Fatalf("slice %d/%d differs", i, k)
			}
		}
	}
	// A different seed gives different hashes.
	other := cfg
	other.Seed++
	if cfg.TemplateHash("svc-1") == other.TemplateHash("svc-1") {
		t.Error("template hash does not depend on the seed")
	}
}

func TestSlicesAndCounts(t *testing.T) {
	cfg := testConfig()
	c, _ := NewCluster(cfg)
	if got := c.Slices(0); got != 3 {
		t.Fatalf("250 endpoints in %d slices, want 3", got)
	}
	seen := map[netip.AddrPort]bool{}
	for i := range cfg.Services {
		addrs := c.ReadyAddrs(nil, i)
		if len(addrs) != cfg.EndpointsPerService {
			t.Fatalf("service %d has %d addresses", i, len(addrs))
		}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("address %s used twice", a)
			}
			seen[a] = true
		}
		for k := range c.Slices(i) {
			es := c.EndpointSlice(i, k)
			if len(es.Endpoints) > MaxSliceEndpoints {
				t.Fatalf("slice has %d endpoints", len(es.Endpoints))
			}
			if es.Labels[discoveryv1.LabelServiceName] != ServiceName(i) || es.Namespace != cfg.Namespace(i) {
				t.Fatalf("slice %s/%s labelled %v", es.Namespace, es.Name, es.Labels)
			}
		}
	}
}

func TestChurnKeepsTruth(t *testing.T) {
	cfg := testConfig()
	c, _ := NewCluster(cfg)
	rng := rand.New(rand.NewPCG(1, 1))
	kinds := map[Kind]int{}
	for range 2000 {
		ch, err := c.Apply(rng, nil)
		if err != nil {
			t.Fatal(err)
		}
		kinds[ch.Kind]++
		sl := c.Endpoints(ch.Service, ch.Slice)
		var found *Endpoint
		for j := range sl {
			if sl[j].Serial == ch.New {
				found = &sl[j]
			}
		}
		if found == nil {
			t.Fatalf("change %+v: new serial not in slice", ch)
		}
		switch ch.Kind {
		case Replace, Ready:
			if !found.Ready {
				t.Fatalf("change %+v left the endpoint not ready", ch)
			}
		case NotReady:
			if found.Ready {
				t.Fatalf("change %+v left the endpoint ready", ch)
			}
		}
	}
	if kinds[Replace] == 0 || kinds[NotReady] == 0 || kinds[Ready] == 0 {
		t.Fatalf("kinds %v: want all three", kinds)
	}
	// busy steers the choice away.
	ch, _ := c.Apply(rng, func(uint32) bool { return false })
	if ch.Kind == 0 {
		t.Fatal("no change")
	}
	cl := c.Clone()
	if !reflect.DeepEqual(cl.svcs, c.svcs) {
		t.Fatal("clone differs")
	}
	c.Apply(rng, nil)
	if reflect.DeepEqual(cl.svcs, c.svcs) {
		t.Fatal("clone shares state")
	}
}

func TestPodFromName(t *testing.T) {
	cfg := testConfig()
	c, _ := NewCluster(cfg)
	meshed := 0
	for i := range cfg.Services {
		for k := range c.Slices(i) {
			for _, ep := range c.EndpointSlice(i, k).Endpoints {
				ref := ep.TargetRef
				p := Pod(cfg, ref.Namespace, ref.Name)
				if p == nil {
					t.Fatalf("no pod for %s", ref.Name)
				}
				if p.Status.PodIP != ep.Addresses[0] {
					t.Fatalf("pod %s has IP %s, endpoint %s", ref.Name, p.Status.PodIP, ep.Addresses[0])
				}
				if kind, name := translator.Owner(translator.SlimPod(p)); kind != "deployment" || name != ServiceName(i) {
					t.Fatalf("pod %s owner %s/%s", p.Name, kind, name)
				}
				if p.Labels["linkerd.io/control-plane-ns"] == cfg.ControlPlaneNamespace {
					meshed++
				}
			}
		}
	}
	total := cfg.Services * cfg.EndpointsPerService
	if share := float64(meshed) / float64(total); share < 0.4 || share > 0.6 {
		t.Errorf("meshed share %.2f, want about 0.5", share)
	}
	for _, bad := range []string{"", "x", "svc-1-bcdfghjklm-0", "svc-1-bcdfghjklm-01", "svc-1-short-5", "svc-1-bcdfghjklm-99999999", "-bcdfghjklm-5", "svc-1-" + cfg.TemplateHash("svc-2") + "-5"} {
		if p := Pod(cfg, "ns-0", bad); p != nil {
			t.Errorf("Pod(%q) = %s, want nil", bad, p.Name)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Services = 0 },
		func(c *Config) { c.Namespaces = 0 },
		func(c *Config) { c.MeshedShare = 2 },
		func(c *Config) { c.EndpointsPerService = -1 },
		func(c *Config) { c.ControlPlaneNamespace = "" },
		func(c *Config) { c.Services, c.EndpointsPerService = 100000, 1000 },
		func(c *Config) { c.Services, c.EndpointsPerService = 1<<32, 1<<32 }, // the product overflows to zero
		func(c *Config) { c.Services, c.EndpointsPerService = 1<<62, 2 },     // or below it
		func(c *Config) { c.MeshedShare = math.NaN() },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func FuzzPod(f *testing.F) {
	cfg := testConfig()
	f.Add(cfg.PodName(3, 12345))
	f.Add("svc-1-bcdfghjklm-7")
	f.Add("a-b-c")
	f.Add("--")
	f.Fuzz(func(t *testing.T, name string) {
		p := Pod(cfg, "ns", name)
		if p == nil {
			return
		}
		if p.Name != name || !strings.HasPrefix(name, p.Labels["app"]+"-") {
			t.Fatalf("pod %q from %q", p.Name, name)
		}
		if _, ok := AddrSerial(netip.MustParseAddr(p.Status.PodIP)); !ok {
			t.Fatalf("pod IP %s", p.Status.PodIP)
		}
	})
}

func BenchmarkPod(b *testing.B) {
	cfg := testConfig()
	name := cfg.PodName(3, 12345)
	b.ReportAllocs()
	for b.Loop() {
		if Pod(cfg, "ns-0", name) == nil {
			b.Fatal("nil")
		}
	}
}

// Scale changes add and remove endpoints; mixed with Apply's changes, ReadyAddrs follows
// them, and no slice shrinks below one endpoint.
func TestScaleKeepsTruth(t *testing.T) {
	cfg := testConfig()
	c, _ := NewCluster(cfg)
	rng := rand.New(rand.NewPCG(2, 2))
	ready := map[netip.AddrPort]bool{}
	for i := range cfg.Services {
		for _, a := range c.ReadyAddrs(nil, i) {
			ready[a] = true
		}
	}
	kinds := map[Kind]int{}
	unseen := 0
	for n := range 3000 {
		var ch Change
		var err error
		switch n % 3 {
		case 0:
			ch, err = c.Apply(rng, nil)
		default:
			ch, err = c.Scale(rng, nil, n%3 == 1)
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds[ch.Kind]++
		oldA, newA := netip.AddrPortFrom(SerialAddr(ch.Old), TargetPort), netip.AddrPortFrom(SerialAddr(ch.New), TargetPort)
		// Only the removal of an endpoint that was not ready is unseen: streams never held it.
		if want := ch.Kind == ScaleDown && !ready[oldA]; ch.Unseen != want {
			t.Fatalf("%+v: Unseen = %v, want %v", ch, ch.Unseen, want)
		}
		if ch.Unseen {
			unseen++
		}
		switch ch.Kind {
		case Replace:
			delete(ready, oldA)
			ready[newA] = true
		case Ready, ScaleUp:
			ready[newA] = true
		case NotReady, ScaleDown:
			if ch.Old != ch.New {
				t.Fatalf("%+v: a removal names two serials", ch)
			}
			delete(ready, oldA)
		}
		if ch.Kind.Removes() != (ch.Kind == NotReady || ch.Kind == ScaleDown) {
			t.Fatalf("%s.Removes() = %v", ch.Kind, ch.Kind.Removes())
		}
	}
	if kinds[ScaleUp] == 0 || kinds[ScaleDown] == 0 || unseen == 0 {
		t.Fatalf("kinds %v, %d unseen: want scale-ups and scale-downs, some of endpoints not ready", kinds, unseen)
	}
	got := map[netip.AddrPort]bool{}
	for i := range cfg.Services {
		for k := range c.Slices(i) {
			if len(c.Endpoints(i, k)) == 0 {
				t.Fatalf("service %d slice %d is empty", i, k)
			}
			if n := len(c.EndpointSlice(i, k).Endpoints); n != len(c.Endpoints(i, k)) {
				t.Fatalf("service %d slice %d: %d endpoints synthesized, %d held", i, k, n, len(c.Endpoints(i, k)))
			}
		}
		for _, a := range c.ReadyAddrs(nil, i) {
			got[a] = true
		}
	}
	if !reflect.DeepEqual(got, ready) {
		t.Fatalf("ready addresses: %d held, %d expected from the changes", len(got), len(ready))
	}
	if cl := c.Clone(); !reflect.DeepEqual(cl.svcs, c.svcs) {
		t.Fatal("clone of scaled slices differs")
	}
}

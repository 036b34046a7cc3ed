package shard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestNewReplicaRejects(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewReplica(DefaultConfig(), Deps{Source: newPushSource(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.NonOwner = "drop"
	for _, c := range []struct {
		name string
		cfg  Config
		deps Deps
		want string
	}{
		{"no source", DefaultConfig(), Deps{}, "no discovery source"},
		{"bad non-owner mode", bad, Deps{Source: newPushSource()}, `non-owner mode "drop"`},
		{"metrics registered twice", DefaultConfig(), Deps{Source: newPushSource(), Registerer: reg}, "register destination metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := NewReplica(c.cfg, c.deps); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestRingHandler(t *testing.T) {
	get := func(r *Replica) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.RingHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ring", nil))
		return w
	}
	alone, err := NewReplica(DefaultConfig(), Deps{Source: newPushSource()})
	if err != nil {
		t.Fatal(err)
	}
	if w := get(alone); w.Code != http.StatusNotFound {
		t.Fatalf("without a ring: %d %s", w.Code, w.Body)
	}
	r, ms := benchRing()
	rep, err := NewReplica(DefaultConfig(), Deps{Source: newPushSource(), Membership: staticMembership{r, ms[3]}})
	if err != nil {
		t.Fatal(err)
	}
	// Half the Services have a cluster IP; a quarter are deleted again, half of those with
	// one: a Service is counted from when it is shown until it is deleted, cluster IP or not.
	want, known := map[string]int{}, 0
	for i, k := range keysOf("ns-%d", "svc-%d") {
		svc := svcObj(k.Namespace, k.Name)
		if i%2 == 0 {
			svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
		rep.Index().OnService(svc, false)
		if i%8 < 2 {
			rep.Index().OnService(svc, true)
			continue
		}
		want[r.Owner(k.String()).Name]++
		known++
	}
	var out struct {
		Self     string
		Services int
		Members  []struct {
			Name     string
			Services int
		}
	}
	if err := json.NewDecoder(get(rep).Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Self != ms[3].Name || out.Services != known || len(out.Members) != len(ms) {
		t.Fatalf("ring status %+v", out)
	}
	for _, m := range out.Members {
		if m.Services != want[m.Name] {
			t.Fatalf("%s owns %d services, want %d", m.Name, m.Services, want[m.Name])
		}
	}
}

package source

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/translator"
)

func (r *recentDrops) holds(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.pods[key]
	return ok
}

func slimTestPod(name, v string) *translator.Pod {
	return translator.SlimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"v": v}}})
}

// TestRecentDrops checks the pods the watch dropped lately: the latest copy is taken once,
// not after recentFor, not after it was forgotten; the oldest go first beyond recentMax; and
// what was put again or let go does not let the current copy go early.
func TestRecentDrops(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r recentDrops
	r.put(slimTestPod("a", "1"), t0, r.generation())
	r.put(slimTestPod("a", "2"), t0.Add(time.Second), r.generation())
	if p := r.take("ns/a", t0.Add(2*time.Second)); p == nil || p.Label("v") != "2" {
		t.Fatalf("take = %v, want the copy put last", p)
	}
	if p := r.take("ns/a", t0.Add(2*time.Second)); p != nil {
		t.Fatal("a copy was taken twice")
	}

	r.put(slimTestPod("b", "1"), t0, r.generation())
	if p := r.take("ns/b", t0.Add(recentFor)); p != nil {
		t.Fatal("a copy recentFor old was taken")
	}
	r.put(slimTestPod("c", "1"), t0, r.generation())
	r.forget("ns/c")
	if p := r.take("ns/c", t0); p != nil {
		t.Fatal("a forgotten copy was taken")
	}
	// A watch started before a clear (a list, a watch that lists first) passes a drop on
	// after it: not kept.
	old := r.generation()
	r.clear()
	r.put(slimTestPod("f", "1"), t0, old)
	if p := r.take("ns/f", t0); p != nil {
		t.Fatal("a drop of a watch older than the last clear was kept")
	}

	// "d" put at t0 and again at t0+20s: pruning at t0+recentFor lets the first record go
	// (stale), not the copy of t0+20s.
	r.clear()
	r.put(slimTestPod("d", "1"), t0, r.generation())
	r.put(slimTestPod("d", "2"), t0.Add(20*time.Second), r.generation())
	r.prune(t0.Add(recentFor))
	if p := r.take("ns/d", t0.Add(recentFor)); p == nil || p.Label("v") != "2" {
		t.Fatalf("take after prune = %v, want the copy put at t0+20s", p)
	}
	r.put(slimTestPod("e", "1"), t0, r.generation())
	r.prune(t0.Add(recentFor))
	if len(r.pods) != 0 || len(r.order) != 0 {
		t.Fatalf("after pruning everything: %d pods, %d records left", len(r.pods), len(r.order))
	}

	// Beyond recentMax, the oldest go first; the records stay bounded.
	for i := range recentMax + 10 {
		r.put(slimTestPod(fmt.Sprint("p", i), "1"), t0.Add(time.Duration(i)*time.Millisecond), r.generation())
	}
	if len(r.pods) != recentMax {
		t.Fatalf("%d pods held, want recentMax (%d)", len(r.pods), recentMax)
	}
	now := t0.Add(time.Duration(recentMax+10) * time.Millisecond)
	if r.take("ns/p9", now) != nil || r.take("ns/p10", now) == nil {
		t.Fatal("not the oldest went first")
	}
	if len(r.order)-r.head > recentMax+1 {
		t.Fatalf("%d records for %d pods", len(r.order)-r.head, len(r.pods))
	}
}

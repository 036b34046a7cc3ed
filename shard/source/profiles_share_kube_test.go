package source

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestProfileMetadataShare: the metadata cache holds the profiles the handler wants, and
// only those (a replica of a ring, its share). When it starts wanting more (a ring change
// gave it their services), Replay adds them to the cache and delivers them, except one
// deleted after the relist's LIST was answered; when it stops wanting some, Release drops
// them from the cache, and their later changes are neither cached nor delivered.
func TestProfileMetadataShare(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	createProfiles(t, env, ns, "w", 60, nil)
	createProfiles(t, env, ns, "u", 60, nil)
	sps := env.Dynamic.Resource(profileResource).Namespace(ns)
	// The metadata client's LISTs of ServiceProfiles go through hook once it is armed.
	var armed atomic.Bool
	var hookErr error
	hookDone := make(chan struct{})
	var src *Kubernetes
	var rec *historyRecorder
	hook := func() {
		defer close(hookDone)
		ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
		defer cancel()
		if hookErr = sps.Delete(ctx, "u-0", metav1.DeleteOptions{}); hookErr != nil {
			return
		}
		// The deletion has passed the watch (and the informer) once it is delivered.
		tick := time.NewTicker(testutil.PollInterval)
		defer tick.Stop()
		for {
			if d, ok := rec.last(ns + "/u-0"); ok && d.deleted {
				return
			}
			select {
			case <-ctx.Done():
				hookErr = fmt.Errorf("the deletion of u-0 was not delivered: %w", ctx.Err())
				return
			case <-tick.C:
			}
		}
	}
	mdCfg := rest.CopyConfig(env.Config)
	mdCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			isList := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/serviceprofiles") && r.URL.Query().Get("watch") == ""
			if isList && err == nil && armed.CompareAndSwap(true, false) {
				hook()
			}
			return resp, err
		})
	})
	md, err := metadata.NewForConfig(mdCfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	src = NewKubernetesFrom(KubernetesClients{Typed: env.Client, Dynamic: dyn, Metadata: md}, KubernetesConfig{Namespace: ns},
		prometheus.NewRegistry(), zaptest.NewLogger(t))
	want := wantPrefix("w")
	rec = newHistoryRecorder(want)
	runProfileSource(t, src, rec)
	src.mu.Lock()
	f := src.profiles
	src.mu.Unlock()
	cached := func(prefix string) int {
		n := 0
		for _, key := range f.store.ListKeys() {
			if strings.HasPrefix(key, ns+"/"+prefix+"-") {
				n++
			}
		}
		return n
	}
	if w, u := cached("w"), cached("u"); w != 60 || u != 0 {
		t.Fatalf("the metadata cache holds %d w- and %d u- profiles, want 60 and 0", w, u)
	}
	rec.checkLatest(t, env, ns, want)

	// The handler wants the u- profiles too: Replay caches and delivers them, but u-0, deleted
	// after the relist's LIST was answered.
	want = wantPrefix("w", "u")
	rec.setWant(want)
	armed.Store(true)
	if err := src.Replay(apiCtx(t)); err != nil {
		t.Fatal(err)
	}
	testutil.Wait(t, apiTimeout, "the deletion during the relist", func() { <-hookDone })
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	syncIdle(t, src)
	if w, u := cached("w"), cached("u"); w != 60 || u != 59 {
		t.Fatalf("after Replay the metadata cache holds %d w- and %d u- profiles, want 60 and 59", w, u)
	}
	if _, ok, _ := f.store.GetByKey(ns + "/u-0"); ok {
		t.Fatal("the profile deleted during the relist is cached")
	}
	rec.checkLatest(t, env, ns, want)

	// The handler no longer wants the w- profiles: Release drops them from the cache, and a
	// change of one is not delivered.
	want = wantPrefix("u")
	rec.setWant(want)
	src.Release()
	if w, u := cached("w"), cached("u"); w != 0 || u != 59 {
		t.Fatalf("after Release the metadata cache holds %d w- and %d u- profiles, want 0 and 59", w, u)
	}
	before, _ := rec.last(ns + "/w-3")
	// A change of a wanted profile after it, to know the watch has passed the first.
	for _, name := range []string{"w-3", "u-5"} {
		if _, err := setRoute(apiCtx(t), sps, ns, name, "r2"); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, apiTimeout, "the update of u-5", func() bool { d, _ := rec.last(ns + "/u-5"); return d.route == "r2" })
	if after, _ := rec.last(ns + "/w-3"); after != before || cached("w") != 0 {
		t.Fatalf("a profile no longer wanted was delivered (%+v, before %+v) or cached (%d)", after, before, cached("w"))
	}
	// (checkLatest does not apply: the handler drops the profiles of services it lost itself,
	// and nothing is delivered for them.)
}

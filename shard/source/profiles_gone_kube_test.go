package source

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestProfileAbsenceChecked: a wanted profile the metadata cache lacks although the watch
// did not delete it (a tombstone of the informer's own relist filtered by an older ring, or
// the deletion that stood for an unwanted profile's change) is read and put back, not
// delivered as deleted; alone (a GET) and many at once (the LIST batch). A deletion by the
// watch is delivered as one, and an entry the cache holds of a profile the API server no
// longer has leaves the cache when it is read.
func TestProfileAbsenceChecked(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	createProfiles(t, env, ns, "w", 60, nil)
	src, _ := newProfileSource(t, env, ns, env.Config)
	want := wantPrefix("w")
	rec := newHistoryRecorder(want)
	runProfileSource(t, src, rec)
	syncIdle(t, src)
	src.mu.Lock()
	f := src.profiles
	src.mu.Unlock()
	key := func(name string) string { return ns + "/" + name }
	drop := func(name string) {
		t.Helper()
		obj, ok, _ := f.store.GetByKey(key(name))
		if !ok {
			t.Fatalf("%s is not cached", name)
		}
		if err := f.store.Delete(obj); err != nil {
			t.Fatal(err)
		}
	}
	checkKept := func(names ...string) {
		t.Helper()
		syncIdle(t, src)
		for _, name := range names {
			if d, _ := rec.last(key(name)); d.deleted {
				t.Fatalf("%s, which exists, was delivered as deleted", name)
			}
			if _, ok, _ := f.store.GetByKey(key(name)); !ok {
				t.Fatalf("%s, which exists, was not put back in the cache", name)
			}
		}
	}

	// One absence: the informer's handler queues the key of what it removed.
	drop("w-1")
	f.queue.add(key("w-1"))
	checkKept("w-1")

	// Many at once: read by the LIST batch, given back to the GETs, put back.
	var many []string
	for i := range listMin + 5 {
		name := fmt.Sprintf("w-%d", i)
		drop(name)
		many = append(many, name)
	}
	keys := make([]string, len(many))
	for i, name := range many {
		keys[i] = key(name)
	}
	f.queue.addAll(keys)
	checkKept(many...)

	// A deletion by the watch is delivered, and leaves nothing recorded.
	if err := env.Dynamic.Resource(profileResource).Namespace(ns).Delete(apiCtx(t), "w-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the deletion of w-2", func() bool { d, _ := rec.last(key("w-2")); return d.deleted })
	syncIdle(t, src)
	f.relistMu.Lock()
	recorded := len(f.gone)
	f.relistMu.Unlock()
	if recorded != 0 {
		t.Fatalf("%d deletions still recorded after they were delivered", recorded)
	}

	// A cached entry of a profile the API server does not have: delivered as deleted, and
	// dropped from the cache.
	ghost := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-ghost", ResourceVersion: "1"}}
	if err := f.store.Add(ghost); err != nil {
		t.Fatal(err)
	}
	f.queue.add(key("w-ghost"))
	testutil.Eventually(t, apiTimeout, "w-ghost's deletion", func() bool { d, ok := rec.last(key("w-ghost")); return ok && d.deleted })
	syncIdle(t, src)
	if _, ok, _ := f.store.GetByKey(key("w-ghost")); ok {
		t.Fatal("the entry of a profile the API server does not have stayed in the cache")
	}
	rec.checkLatest(t, env, ns, func(name string) bool { return want(name) && !strings.HasPrefix(name, "w-ghost") })
}

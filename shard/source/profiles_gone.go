package source

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// The metadata cache of ServiceProfiles holds the profiles the handler wants, and the
// fetcher reads a wanted key the cache lacks as a deleted profile. But the cache can lack a
// profile that exists: a list of the informer's own (after a watch error) filtered by what
// the handler wanted before a ring change, applied after relist added the profile, removes
// it again (a tombstone); and so does the deletion that stands for the change of a profile
// the handler did not want (filterEvent), applied after the handler started wanting it.
// So an absence counts as a deletion only when the watch deleted the profile: those
// deletions are recorded (gone) until the fetcher delivers them, and any other absence is
// checked with a GET, which puts a profile that exists back in the cache.

// recordGone records the watch's deletion of the wanted profile key, before the informer
// applies it.
func (f *profileFetcher) recordGone(key string) {
	f.relistMu.Lock()
	defer f.relistMu.Unlock()
	if f.gone == nil {
		f.gone = map[string]uint64{}
	}
	f.goneSeq++
	f.gone[key] = f.goneSeq
}

// forgetGone forgets the recorded deletion of key: the watch has it again (created anew).
func (f *profileFetcher) forgetGone(key string) {
	f.relistMu.Lock()
	defer f.relistMu.Unlock()
	delete(f.gone, key)
}

// takeGone reports whether the watch deleted key (since its last addition), and forgets it:
// the deletion is being delivered.
func (f *profileFetcher) takeGone(key string) bool {
	f.relistMu.Lock()
	defer f.relistMu.Unlock()
	_, ok := f.gone[key]
	delete(f.gone, key)
	return ok
}

// goneMark returns the sequence number of the last recorded deletion: a GET that starts
// after it sees any deletion recorded later as newer than what it read.
func (f *profileFetcher) goneMark() uint64 {
	f.relistMu.Lock()
	defer f.relistMu.Unlock()
	return f.goneSeq
}

// restore puts the profile u, read by a GET that started at mark, back in the cache when the
// cache lacks it and the handler still wants it; it reports false when the watch deleted the
// profile since (the deletion is then what to deliver).
func (f *profileFetcher) restore(key string, u *unstructured.Unstructured, mark uint64) bool {
	f.relistMu.Lock()
	defer f.relistMu.Unlock()
	if seq, ok := f.gone[key]; ok && seq > mark {
		delete(f.gone, key)
		return false
	}
	if !f.want(u.GetNamespace(), u.GetName()) {
		return true // lost meanwhile (Release swept it): delivered, and ignored, not cached
	}
	if _, held, _ := f.store.GetByKey(key); !held {
		_ = f.store.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}})
	}
	return true
}

// dropStale removes obj, the cache's entry for key, when the API server says the profile is
// gone and the cache still holds that entry (relist added it from a LIST that preceded the
// deletion, which the informer then had nothing to remove from).
func (f *profileFetcher) dropStale(key string, obj any) {
	if cur, ok, _ := f.store.GetByKey(key); ok && cur == obj {
		_ = f.store.Delete(cur)
	}
}

// pruneGone forgets the recorded deletions of profiles the handler no longer wants.
func (f *profileFetcher) pruneGone() {
	f.relistMu.Lock()
	defer f.relistMu.Unlock()
	for key := range f.gone {
		if ns, name, err := cache.SplitMetaNamespaceKey(key); err != nil || !f.want(ns, name) {
			delete(f.gone, key)
		}
	}
}

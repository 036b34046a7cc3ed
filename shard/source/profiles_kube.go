package source

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/translator"
)

// serviceProfileGVR is the storage version of Linkerd's ServiceProfile.
var serviceProfileGVR = schema.GroupVersionResource{Group: translator.ServiceProfileGroup, Version: "v1alpha2", Resource: "serviceprofiles"}

// profileFetcher reads the ServiceProfiles a replica wants, and only those. A metadata
// informer follows the name and version (a few dozen bytes each) of every ServiceProfile the
// handler wants (ProfileFilter: the profiles of the services the replica owns, in every
// namespace): its list and watch drop the others before the cache, as the share informers
// drop slices, so that a replica of a ring holds the metadata of its share only. When a
// wanted profile changes, a worker reads it whole with a GET and delivers translator's
// projection of it. The queue holds each profile's key at most once and hands a key to one
// worker at a time, so the GET that follows the last change of a profile is the last one
// delivered. A GET that fails for another reason than the profile's absence is retried with
// backoff (keyQueue: 5ms doubling to 5 minutes), until it succeeds or the profile goes.
//
// When many keys are queued at once (listMin: when the replica starts, on replay after a
// ring change, or when many profiles change together) a worker takes them all from the
// queue as one batch and reads them with a paged LIST instead (list), giving back to the
// GETs those the LIST cannot deliver as their latest state.
//
// The cache holds every wanted profile: a profile the handler starts wanting (a ring change
// gave the replica its service) was dropped by the watch when it last changed, so replay
// lists the metadata again first and adds what the cache lacks (relist); Release sweeps what
// the handler no longer wants. A wanted profile the cache lacks is read as deleted when the
// watch deleted it, and otherwise checked with a GET (profiles_gone.go).
type profileFetcher struct {
	k     *Kubernetes
	h     ProfileHandler
	want  func(namespace, name string) bool
	store cache.Store // the metadata informer's
	// synced reports whether the metadata informer has listed (its HasSynced).
	synced func() bool
	queue  *keyQueue
	wg     sync.WaitGroup
	// lists counts the fetcher's list requests (pages included, failed ones too):
	// destination_source_lists_total{resource="serviceprofiles"}.
	lists atomic.Int64

	// relistMu guards deleted, gone and goneSeq. deleted: while relist runs, the keys of the
	// deletions the watch passed on (recorded before the informer applies them), which
	// relist must not add back. gone: the wanted profiles the watch deleted, each with its
	// deletion's sequence number (goneSeq counts them), until the deletion is delivered
	// (profiles_gone.go).
	relistMu sync.Mutex
	deleted  map[string]struct{}
	gone     map[string]uint64
	goneSeq  uint64
}

// profileKinds returns the ServiceProfile metadata informer (as an informerKind whose
// handler feeds the fetcher), its start and its stop (which waits for it), and the fetcher;
// none when the clients or the CRD are missing (a warning says so), or when h wants no
// profiles.
func (k *Kubernetes) profileKinds(h Handler) (*informerKind, func(<-chan struct{}), func(), *profileFetcher) {
	ph, ok := h.(ProfileHandler)
	if !ok || k.clients.Metadata == nil || k.clients.Dynamic == nil {
		return nil, nil, nil, nil
	}
	if err := k.served(serviceProfileGVR); err != nil {
		k.warn(fmt.Sprintf("ServiceProfiles (%s) are not read, so profiles have no routes: %v", serviceProfileGVR.GroupResource(), err))
		return nil, nil, nil, nil
	}
	f := &profileFetcher{k: k, h: ph, want: func(string, string) bool { return true }, queue: newKeyQueue()}
	if pf, ok := h.(ProfileFilter); ok {
		f.want = pf.WantsProfile
	}
	inf := cache.NewSharedIndexInformer(f.listWatch(), &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	if err := inf.SetTransform(slimProfileMeta); err != nil {
		k.warn(fmt.Sprintf("ServiceProfiles are not read: %v", err))
		return nil, nil, nil, nil
	}
	f.store, f.synced = inf.GetStore(), inf.HasSynced
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(metav1.Object); ok && f.want(m.GetNamespace(), m.GetName()) {
			f.queue.add(m.GetNamespace() + "/" + m.GetName())
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		DeleteFunc: enqueue,
		UpdateFunc: func(o, n any) {
			if om, ok := o.(metav1.Object); ok {
				if nm, ok := n.(metav1.Object); ok && om.GetResourceVersion() == nm.GetResourceVersion() {
					return
				}
			}
			enqueue(n)
		},
	}
	var wg sync.WaitGroup
	start := func(stop <-chan struct{}) { wg.Go(func() { inf.Run(stop) }) }
	return &informerKind{name: "serviceprofiles", informer: inf, handler: handler}, start, wg.Wait, f
}

// metadataClient is the metadata client of ServiceProfiles in the source's scope.
func (f *profileFetcher) metadataClient() metadata.ResourceInterface {
	return f.k.clients.Metadata.Resource(serviceProfileGVR).Namespace(f.k.cfg.Namespace)
}

// listWatch is the metadata informer's list and watch: the metadata of the profiles the
// handler wants. An unwanted profile's addition is dropped; its modification becomes its
// deletion, so that one the cache holds from when it was wanted leaves it.
func (f *profileFetcher) listWatch() cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := f.metadataClient().List(ctx, opts)
			if err != nil {
				return nil, err
			}
			kept := l.Items[:0]
			for i := range l.Items {
				if f.want(l.Items[i].Namespace, l.Items[i].Name) {
					kept = append(kept, l.Items[i])
				}
			}
			clear(l.Items[len(kept):])
			l.Items = kept
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := f.metadataClient().Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return newFilteredWatch(w, f.filterEvent), nil
		},
	}
}

// filterEvent passes a watch event on when the handler wants its profile, or when it is no
// addition or modification; the addition of an unwanted profile is dropped, and its
// modification becomes its deletion. A deletion is recorded for relist, and that of a wanted
// profile for the fetcher (recordGone), before the informer applies it.
func (f *profileFetcher) filterEvent(e watch.Event) (watch.Event, bool) {
	m, ok := e.Object.(*metav1.PartialObjectMetadata)
	if !ok {
		return e, true
	}
	key := m.Namespace + "/" + m.Name
	wanted := f.want(m.Namespace, m.Name)
	if e.Type == watch.Deleted {
		f.relistMu.Lock()
		if f.deleted != nil {
			f.deleted[key] = struct{}{}
		}
		f.relistMu.Unlock()
		if wanted {
			f.recordGone(key)
		}
	}
	if (e.Type != watch.Added && e.Type != watch.Modified) || wanted {
		if e.Type != watch.Deleted {
			f.forgetGone(key)
		}
		return e, true
	}
	if e.Type == watch.Added {
		return e, false
	}
	return watch.Event{Type: watch.Deleted, Object: profileMeta(m)}, true
}

// relist lists the metadata of the ServiceProfiles in scope, page by page, and adds to the
// informer's cache those the handler wants that it lacks: the profiles of a service the
// replica started wanting (a ring change), whose events the watch dropped before. A profile
// the watch deletes while relist runs is not added back: either its deletion was recorded
// first (filterEvent), or the informer applies it after the addition.
func (f *profileFetcher) relist(ctx context.Context) error {
	f.relistMu.Lock()
	f.deleted = map[string]struct{}{}
	f.relistMu.Unlock()
	defer func() {
		f.relistMu.Lock()
		f.deleted = nil
		f.relistMu.Unlock()
	}()
	opts := metav1.ListOptions{Limit: listPage}
	for {
		page, err := func() (*metav1.PartialObjectMetadataList, error) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return f.metadataClient().List(ctx, opts)
		}()
		if err != nil {
			return fmt.Errorf("list %s metadata: %w", serviceProfileGVR.GroupResource(), err)
		}
		for i := range page.Items {
			m := &page.Items[i]
			key := m.Namespace + "/" + m.Name
			if !f.want(m.Namespace, m.Name) {
				continue
			}
			f.relistMu.Lock()
			_, gone := f.deleted[key]
			if _, held, _ := f.store.GetByKey(key); !held && !gone {
				_ = f.store.Add(profileMeta(m))
			}
			f.relistMu.Unlock()
		}
		if page.Continue == "" {
			return nil
		}
		opts.Continue = page.Continue
	}
}

// sweep drops from the informer's cache the profiles the handler no longer wants (their
// service went to another replica); the handler needs nothing of them.
func (f *profileFetcher) sweep() {
	f.pruneGone()
	for _, key := range f.store.ListKeys() {
		if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil && !f.want(ns, name) {
			if obj, ok, _ := f.store.GetByKey(key); ok {
				_ = f.store.Delete(obj)
			}
		}
	}
}

// slimProfileMeta keeps of a ServiceProfile's metadata its identity only.
func slimProfileMeta(obj any) (any, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		if m, ok := o.Obj.(*metav1.PartialObjectMetadata); ok {
			o.Obj = profileMeta(m)
		}
		return o, nil
	case *metav1.PartialObjectMetadata:
		return profileMeta(o), nil
	}
	return obj, nil
}

func profileMeta(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	if len(m.Labels) == 0 && len(m.Annotations) == 0 && len(m.ManagedFields) == 0 && len(m.OwnerReferences) == 0 &&
		len(m.Finalizers) == 0 && m.CreationTimestamp.IsZero() && m.Generation == 0 {
		return m
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}}
}

// profileWorkers is the number of GETs of ServiceProfiles in flight: a replica that starts,
// or gains a share, reads the profiles of its services with a LIST (listMin), and the changes
// that follow with one GET each.
const profileWorkers = 8

// listMin is the number of queued profiles from which a worker reads them all with one paged
// LIST (listPage profiles a page) rather than with a GET each. A LIST reads every profile in
// the source's scope (its namespace, or the cluster), wanted or not: ceil(T/listPage)
// requests for T profiles. GETs read only what is wanted, but one request each, and the
// client's rate (internal/kube: 100 requests a second, burst 200) makes them what a replica
// waits for: 5,000 GETs take 48 s. From 50 keys on, a LIST takes no more requests than the
// GETs would in any scope of up to 25,000 profiles (and 10 for 5,000); below, the GETs take
// half a second of the rate at most and transfer less (they read no unwanted profile). Changes that arrive one by one never reach it. Queues reach it
// when a replica starts (every profile it wants is queued once the informer has listed),
// on replay (Replay, or Gain after a ring change: every wanted profile is queued at once),
// and when many profiles change together.
const listMin = 50

// listPage is the page size of the fetcher's LIST.
const listPage = 500

// run waits until the metadata informer has listed, queues every profile the handler wants
// at once (so that the first worker reads them with one LIST, rather than the first few with
// GETs as the informer's events come in), and processes the queue on profileWorkers
// goroutines until ctx ends; then it waits for them.
func (f *profileFetcher) run(ctx context.Context) {
	if f.waitSynced(ctx) {
		f.queue.addAll(f.wanted())
		for range profileWorkers {
			f.wg.Go(func() {
				for f.next(ctx) {
				}
			})
		}
	}
	<-ctx.Done()
	f.queue.close()
	f.wg.Wait()
}

// waitSynced waits until the metadata informer has listed; false when ctx ended first.
func (f *profileFetcher) waitSynced(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !f.synced() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// wanted returns the keys of the profiles in the informer's cache that the handler wants.
func (f *profileFetcher) wanted() []string {
	var keys []string
	for _, key := range f.store.ListKeys() {
		if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil && f.want(ns, name) {
			keys = append(keys, key)
		}
	}
	return keys
}

func (f *profileFetcher) next(ctx context.Context) bool {
	keys, batch, ok := f.queue.next(listMin)
	if !ok {
		return false
	}
	if batch {
		f.list(ctx, keys)
		return true
	}
	key := keys[0]
	err := f.fetch(ctx, key)
	if err != nil && ctx.Err() == nil {
		f.k.log.Warn("cannot read a ServiceProfile; retrying", zap.String("profile", key), zap.Error(err))
	}
	f.queue.done(key, err != nil)
	return true
}

// fetch delivers the current state of the profile key: its deletion when the watch deleted
// it and the informer no longer has it, or when the API server says it is gone; else its
// projection, read whole. A profile the informer lacks although the watch did not delete it
// is read too, and put back in the cache when it exists (profiles_gone.go).
func (f *profileFetcher) fetch(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key the informer makes: nothing to fetch
	}
	obj, cached, _ := f.store.GetByKey(key)
	if !cached && (f.takeGone(key) || !f.want(ns, name)) {
		f.deliverGone(ns, name) // deleted, or no longer wanted: the handler holds nothing of it
		return nil
	}
	mark := f.goneMark()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u, err := f.k.clients.Dynamic.Resource(serviceProfileGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if cached {
			f.dropStale(key, obj)
		}
		f.takeGone(key)
		f.deliverGone(ns, name)
		return nil
	}
	if err != nil {
		return err
	}
	if !cached && !f.restore(key, u, mark) {
		f.deliverGone(ns, name)
		return nil
	}
	f.deliverRead(key, u.Object)
	return nil
}

// list reads the profiles of keys, a batch the queue handed out whole (each key is in
// progress: no worker reads it meanwhile), with a paged LIST, and ends each key in the
// queue:
//   - a listed profile whose resourceVersion is the one the informer holds is delivered,
//     and settled;
//   - a key the informer no longer holds because the watch deleted it is delivered as
//     deleted, as fetch does, and settled (a profile deleted while the LIST ran, whether
//     the LIST has it or not);
//   - every other key is given back, to be read alone with a GET by fetch: the informer
//     lacks it for another reason (fetch checks that it exists: profiles_gone.go), or it
//     holds another version than the one listed (newer: it changed after the LIST's
//     snapshot; older: the informer has not caught up, and the GET reads the newest), or the
//     LIST does not have it (created after the snapshot), or the LIST failed before reaching
//     it (fetch retries with backoff, so a failing LIST loses nothing).
//
// What list delivers is never older than what was delivered before: the LIST is a consistent
// read (no resourceVersion: the newest state, and its pages come from the first one's
// snapshot), sent after every earlier delivery of its keys had ended (the queue put each key
// in the batch after its processing). And it is the latest state the replica knows, the
// informer's; when the informer moves on while the key is in the batch, its event adds the
// key again, which settle keeps queued (the informer's version is no longer the delivered
// one), so the key is read again. An add for the very version delivered (the informer's
// events for its initial list, which run queued every key before they came in) is dropped.
func (f *profileFetcher) list(ctx context.Context, keys []string) {
	defer f.queue.endBatch()
	pending := make(map[string]bool, len(keys))
	for _, k := range keys {
		pending[k] = true
	}
	delivered := 0
	err := f.listPages(ctx, func(u *unstructured.Unstructured) {
		key := u.GetNamespace() + "/" + u.GetName()
		rv := u.GetResourceVersion()
		if !pending[key] || f.cachedVersion(key) != rv {
			return // not in the batch, or left to the end
		}
		delete(pending, key)
		delivered++
		f.deliverRead(key, u.Object)
		f.queue.settle(key, func() bool { return f.cachedVersion(key) == rv })
	})
	if err != nil && ctx.Err() == nil {
		f.k.log.Warn("cannot list ServiceProfiles; reading them one by one", zap.Int("profiles", len(pending)), zap.Error(err))
	}
	fetched := 0
	for _, key := range keys {
		if !pending[key] {
			continue
		}
		ns, name, serr := cache.SplitMetaNamespaceKey(key)
		if serr == nil && f.cachedVersion(key) == "" && f.takeGone(key) {
			f.deliverGone(ns, name)
			f.queue.settle(key, func() bool { return f.cachedVersion(key) == "" })
			continue
		}
		fetched++
		f.queue.giveBack(key)
	}
	f.k.log.Debug("listed ServiceProfiles", zap.Int("queued", len(keys)), zap.Int("delivered", delivered), zap.Int("fetched", fetched), zap.Error(err))
}

// listPages lists the ServiceProfiles in the source's scope page by page, handing each to
// each, until the last page or an error.
func (f *profileFetcher) listPages(ctx context.Context, each func(*unstructured.Unstructured)) error {
	client := f.k.clients.Dynamic.Resource(serviceProfileGVR).Namespace(f.k.cfg.Namespace)
	opts := metav1.ListOptions{Limit: listPage}
	for {
		f.lists.Add(1)
		page, err := func() (*unstructured.UnstructuredList, error) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return client.List(ctx, opts)
		}()
		if err != nil {
			return fmt.Errorf("list %s: %w", serviceProfileGVR.GroupResource(), err)
		}
		for i := range page.Items {
			each(&page.Items[i])
		}
		if page.GetContinue() == "" {
			return nil
		}
		opts.Continue = page.GetContinue()
	}
}

// cachedVersion returns the resourceVersion of the profile key in the informer's cache, or
// "" when the cache does not have it.
func (f *profileFetcher) cachedVersion(key string) string {
	obj, ok, err := f.store.GetByKey(key)
	if err != nil || !ok {
		return ""
	}
	if m, ok := obj.(metav1.Object); ok {
		return m.GetResourceVersion()
	}
	return ""
}

// deliverRead delivers the projection of a profile read whole (by fetch or list): one the
// sp-validator would refuse is delivered with its Problem, and a warning (the handler keeps
// the last good version in effect); content that is not a ServiceProfile is not delivered.
func (f *profileFetcher) deliverRead(key string, content map[string]any) {
	sp, err := translator.ServiceProfileFromUnstructured(content)
	switch {
	case sp == nil:
		f.k.log.Warn("object of the ServiceProfile informer ignored", zap.String("profile", key), zap.Error(err))
		return
	case err != nil:
		f.k.log.Warn("invalid ServiceProfile: it is not served; the last good version stays in effect", zap.String("profile", key), zap.Error(err))
	}
	f.deliver(sp, false)
}

func (f *profileFetcher) deliverGone(ns, name string) {
	f.deliver(&translator.ServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, true)
}

func (f *profileFetcher) deliver(sp *translator.ServiceProfile, deleted bool) {
	f.k.deliverMu.Lock()
	defer f.k.deliverMu.Unlock()
	f.h.OnServiceProfile(sp, deleted)
}

// idle reports whether no profile waits to be read.
func (f *profileFetcher) idle() bool { return f.queue.idle() }

// replay adds to the cache the wanted profiles it lacks (relist), queues every profile the
// handler wants, at once (so that many are read with a LIST), and waits until they are
// delivered (or ctx ends).
func (f *profileFetcher) replay(ctx context.Context) error {
	if err := f.relist(ctx); err != nil {
		return err
	}
	f.queue.addAll(f.wanted())
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !f.idle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

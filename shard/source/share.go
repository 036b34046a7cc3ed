package source

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// shareInformer is an informer on one resource read through a shareLW.
type shareInformer struct {
	lw       *shareLW
	informer cache.SharedIndexInformer
}

// gainPageSize is the page size of the lists Gain makes.
const gainPageSize = 500

// shareInformers returns the informers on Services and EndpointSlices that decode only what
// want admits (shareLW), with the source's transform.
func (k *Kubernetes) shareInformers(want func(namespace, service string) bool, sharder NamespaceSharder) (services, slices *shareInformer, err error) {
	rc := k.clients.Typed.CoreV1().RESTClient()
	mk := func(kind shareKind, obj runtime.Object) (*shareInformer, error) {
		lw := &shareLW{client: rc, kind: kind, echo: k.shardEcho}
		lw.want.Store(&want)
		if sharder != nil && kind.kind == "EndpointSlice" {
			lw.selector = func() string {
				if !k.serverShards() {
					return ""
				}
				return sharder.ShardSelector()
			}
		}
		// No namespace index: nothing reads one, and it would hold an entry per object.
		inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
		if err := inf.SetTransform(lw.slim); err != nil {
			return nil, err
		}
		lw.cache = inf.GetStore()
		return &shareInformer{lw: lw, informer: inf}, nil
	}
	if services, err = mk(serviceKind(k.cfg.Namespace), &corev1.Service{}); err != nil {
		return nil, nil, err
	}
	if slices, err = mk(endpointSliceKind(k.cfg.Namespace), nil); err != nil {
		return nil, nil, err
	}
	return services, slices, nil
}

// Gain implements ShareLoader: it lists the Services and EndpointSlices of the services the
// handler's filter admits now and before did not (decoding nothing else in full) and
// delivers them, then reads the ServiceProfiles the handler wants again. Objects the watch
// has delivered since the filter changed are newer than the list and are not delivered again,
// nor are those it has deleted meanwhile. Without a filter it replays the caches (Replay).
// When it keeps only the pods the handler wants (podShare), it then lists the pods and
// delivers those wanted now that it lacks: the pods of the gained slices, and those whose
// addresses the handler gained.
func (k *Kubernetes) Gain(ctx context.Context, g Gained) (err error) {
	before := g.Before
	k.mu.Lock()
	h, shares, profiles, ps := k.handler, k.shares, k.profiles, k.podShare
	k.mu.Unlock()
	if h == nil {
		return fmt.Errorf("kubernetes source: Gain while Run is not running")
	}
	if ps != nil {
		// The gained slices name many pods: the list below reads them, not a GET each.
		ps.beginDefer()
		defer ps.endDefer()
		defer func() {
			if err == nil {
				err = ps.gain(ctx)
			}
		}()
	}
	if len(shares) == 0 || before == nil {
		return k.Replay(ctx)
	}
	k.gainMu.Lock()
	k.gainDeleted = map[string]struct{}{}
	k.gainMu.Unlock()
	defer func() {
		k.gainMu.Lock()
		k.gainDeleted = nil
		k.gainMu.Unlock()
	}()
	for _, s := range shares {
		want := s.lw.wants
		gained := func(ns, svc string) bool { return want(ns, svc) && !before(ns, svc) }
		sel := ""
		if s.lw.selector != nil {
			// The watch asks for the new share from now on (it resumes where it was, so
			// nothing that changes meanwhile is missed); the list asks for the gained part.
			s.lw.restartWatch()
			if k.serverShards() {
				sel = g.ShardSelector
			}
		}
		if err := k.gainKind(ctx, h, s, gained, sel); err != nil {
			return err
		}
	}
	if profiles != nil {
		return profiles.replay(ctx)
	}
	return nil
}

// gainKind lists one kind's gained objects page by page and delivers them.
func (k *Kubernetes) gainKind(ctx context.Context, h Handler, s *shareInformer, gained func(ns, svc string) bool, selector string) error {
	opts := metav1.ListOptions{Limit: gainPageSize, ShardSelector: selector}
	for {
		items, parts, err := s.lw.list(ctx, opts, gained)
		if err != nil {
			return fmt.Errorf("kubernetes source: load gained services: %w", err)
		}
		for _, obj := range items {
			m, ok := obj.(metav1.Object)
			if !ok || isReduced(obj) {
				continue
			}
			k.deliverGained(h, s, m.GetNamespace()+"/"+m.GetName(), obj)
		}
		if parts.continueToken == "" {
			return nil
		}
		opts.Continue = parts.continueToken
	}
}

// deliverGained delivers obj, read by Gain's list, unless the watch has delivered a full
// version of it or deleted it since, and stores it in the informer's cache, as the watch
// would have: a re-list works out deletions from the cache, so a gained object missing from
// it that was deleted while the watch was down (a 410 after an outage) was never delivered
// as deleted, and its endpoints stayed served.
func (k *Kubernetes) deliverGained(h Handler, s *shareInformer, key string, obj any) {
	k.deliverMu.Lock()
	defer k.deliverMu.Unlock()
	store := s.informer.GetStore()
	if cur, ok, _ := store.GetByKey(key); ok && !isReduced(cur) {
		return
	}
	k.gainMu.Lock()
	_, gone := k.gainDeleted[key]
	k.gainMu.Unlock()
	if !gone {
		deliver(h, obj, false)
		_ = store.Add(obj)
	}
}

// noteDeleted records a deletion the watch delivered while Gain runs.
func (k *Kubernetes) noteDeleted(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	k.gainMu.Lock()
	if k.gainDeleted != nil {
		k.gainDeleted[m.GetNamespace()+"/"+m.GetName()] = struct{}{}
	}
	k.gainMu.Unlock()
}

// Release implements ShareLoader: the caches let go of the objects the handler's filter no
// longer admits (a ring change gave their services to another replica). An EndpointSlice
// leaves the cache; of a Service the cache keeps its cluster IPs (serviceIPs); the
// metadata of a ServiceProfile of a lost service leaves the profile fetcher's cache.
//
// It changes the informers' stores directly, which client-go leaves to the informer. An
// object read before the ring changed (a list page decoded under the old filter) that enters
// the cache after Release is reduced on the way in by the transform (shareLW.slim), which
// reads the filter as it is then; Run sweeps once more after the initial lists.
//
// The watch that sends a shard selector is restarted (it resumes where it was) so that it
// asks for the share as it is now, and while the API server's support for selectors is not
// known yet, one list of a single object finds out (ServerSharded).
func (k *Kubernetes) Release() {
	k.mu.Lock()
	shares := k.shares
	k.mu.Unlock()
	for _, s := range shares {
		if s.lw.selector != nil {
			k.probeShards(s.lw) // first: the selector restartWatch compares may depend on it
			s.lw.restartWatch()
		}
	}
	k.sweep(shares)
	if ps := k.podFiltering(); ps != nil {
		ps.sweep()
	}
	k.mu.Lock()
	profiles := k.profiles
	k.mu.Unlock()
	if profiles != nil {
		profiles.sweep()
	}
}

// sweep removes from the share informers' stores what the filter does not admit, and the
// placeholders of unwanted slices; a Service is replaced by its cluster IPs.
func (k *Kubernetes) sweep(shares []*shareInformer) {
	for _, s := range shares {
		store := s.informer.GetStore()
		for _, obj := range store.List() {
			if isDropped(obj) {
				_ = store.Delete(obj)
				continue
			}
			if isReduced(obj) {
				continue
			}
			if r := s.lw.reduce(obj); r != obj {
				if _, ok := r.(*serviceIPs); ok {
					_ = store.Update(r)
				} else {
					_ = store.Delete(obj)
				}
			}
		}
	}
}

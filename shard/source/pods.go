package source

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/translator"
)

// podWorkers is how many pods the source reads at once for WantPod.
const podWorkers = 4

// goneFor is how long a pod read as gone (NotFound) is not read again, unless the watch or a
// list shows it meanwhile. Slices can name pods that do not exist (a stale or hand-made
// slice); read on every ask (the index asks again for missing pods every 30 s), thousands of
// them would keep the client's request budget, and with it the reads of real new pods, busy
// for good.
const goneFor = 5 * time.Minute

// Results of a pod read (destination_source_pod_reads_total); podRecent is a read served
// from the pods the watch dropped lately (recentDrops), without a request.
const (
	podFound = iota
	podGone
	podFailed
	podRecent
)

// podShare keeps the pod informer's cache to the pods the handler's PodFilter wants: on a
// replica of a ring, the pods of its share of the services and those whose address it owns,
// rather than every pod of the cluster on every replica.
//
// The pod informer's list and watch (listWatch) pass on only the pods the filter wants as
// they arrive. An unwanted pod is dropped when it is added; its modification becomes the
// deletion of a placeholder, so that a pod the cache still holds from when it was wanted
// leaves it. A pod the filter starts wanting later was dropped when it last changed, so it is
// read again:
//   - one a slice starts naming, by WantPod: a GET, on podWorkers goroutines (the queue
//     retries failures with a backoff);
//   - those a ring change gives the replica (the pods of its gained slices, those of its
//     gained addresses), by Gain: one paged list of the pods (gain);
//   - while the source syncs and while Gain runs, WantPod only records the pod (deferred),
//     since the pod informer's first list (started once the slices are synced) or Gain's
//     list reads it anyway; those still missing after are read one by one;
//   - a pod a relist deleted (a tombstone: the list may have been filtered before a slice
//     named the pod) is read again if it is wanted.
//
// A read of a pod the watch dropped less than recentFor ago is served from the copy it
// dropped (recentDrops), without a request: the copy is the pod's latest, since every later
// event of the pod replaces or removes it. A list, or a watch that lists first (client-go's
// watch-list, whose initial events are not kept), clears them all: the reflector opens one
// when it starts and when it cannot resume a watch, and the events in between (a deletion
// among them) are not seen.
//
// A pod read is stored in the cache and delivered unless the cache holds it already (the
// watch delivered it since it became wanted, which is as new), or the watch deleted it while
// it was being read (deleted); a read that overwrote the informer's newer copy is mended when
// that copy is delivered (onStored). ForgetPod and Release drop from the cache what the filter no
// longer wants; the handler needs nothing of those.
type podShare struct {
	k      *Kubernetes
	filter PodFilter
	queue  *keyQueue
	wg     sync.WaitGroup

	mu sync.Mutex
	// deferring counts the reasons to record WantPod rather than read (the initial sync,
	// each Gain in progress); deferred holds what was recorded.
	deferring int
	deferred  map[string]struct{}
	// loading counts the reads in progress; while there are any, deleted holds the UIDs of
	// the pods the watch deleted, by key.
	loading int
	deleted map[string]types.UID

	reads  [4]atomic.Int64 // by result: podFound, podGone, podFailed, podRecent
	recent recentDrops
	// gone holds when each pod last read as gone was read (see goneFor), until the watch or a
	// list shows the pod exists; guarded by goneMu, and ngone counts it (a pod event looks at
	// it only when it is not empty).
	goneMu     sync.Mutex
	gone       map[string]time.Time
	gonePruned time.Time
	ngone      atomic.Int64
	// tombstone is set while the pod handler delivers a deletion a relist found (a
	// tombstone): the pod may exist still, and is read again rather than recorded as deleted.
	tombstone atomic.Bool
}

func newPodShare(k *Kubernetes, f PodFilter) *podShare {
	return &podShare{k: k, filter: f, queue: newKeyQueue(), deferring: 1, deferred: map[string]struct{}{}}
}

// run reads the pods WantPod queues on podWorkers goroutines until ctx ends, then waits for
// them. Meanwhile it lets the pods the watch dropped go once they are older than recentFor,
// also when no pod event comes to do it.
func (ps *podShare) run(ctx context.Context) {
	for range podWorkers {
		ps.wg.Go(func() {
			for ps.next(ctx) {
			}
		})
	}
	t := time.NewTicker(recentFor)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case now := <-t.C:
			ps.recent.prune(now)
		}
	}
	ps.queue.close()
	ps.wg.Wait()
}

func (ps *podShare) next(ctx context.Context) bool {
	keys, _, ok := ps.queue.next(0)
	if !ok {
		return false
	}
	err := ps.read(ctx, keys[0])
	if err != nil && ctx.Err() == nil {
		ps.k.log.Warn("cannot read a pod a slice names; retrying", zap.String("pod", keys[0]), zap.Error(err))
	}
	ps.queue.done(keys[0], err != nil)
	return true
}

// read reads the pod key (namespace/name) and keeps it, unless the cache has it already: from
// the copy the watch dropped lately, or else with a GET.
func (ps *podShare) read(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil || ps.cached(key) || !ps.filter.WantsPod(ns, name, nil) {
		return nil // no longer named: what would have been read is not wanted
	}
	// Loading from here: a deletion the watch delivers after the copy was taken is recorded
	// (onDelete), and keep does not store the copy after it. One delivered before was taken
	// from recent before it (filterEvent runs first).
	ps.beginLoad()
	defer ps.endLoad()
	if p := ps.recent.take(key, time.Now()); p != nil {
		ps.reads[podRecent].Add(1)
		ps.keepSlim(p)
		return nil
	}
	if ps.goneRecently(key) {
		return nil
	}
	p, err := ps.k.clients.Typed.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		ps.reads[podGone].Add(1)
		ps.markGone(key)
		return nil
	case err != nil:
		ps.reads[podFailed].Add(1)
		return err
	}
	ps.reads[podFound].Add(1)
	ps.keep(p)
	return nil
}

// keep stores the pod p, read by a GET or Gain's list, and delivers it, if the filter wants
// it and the cache neither holds it nor saw it deleted meanwhile. The filter is asked under
// the delivery lock, which sweep holds too: a read that was wanted when it started and
// ends after a ring change took the pod away (the index dropped the slices that named it,
// then Release swept) is not stored after the sweep.
func (ps *podShare) keep(p *corev1.Pod) { ps.keepSlim(translator.SlimPod(p)) }

// keepSlim is keep for the projection of a pod.
func (ps *podShare) keepSlim(p *translator.Pod) {
	key := p.Namespace() + "/" + p.Name
	k := ps.k
	k.mu.Lock()
	h, store := k.handler, k.pods
	k.mu.Unlock()
	if h == nil || store == nil {
		return
	}
	k.deliverMu.Lock()
	defer k.deliverMu.Unlock()
	if !ps.wantsCached(p) {
		return
	}
	if _, ok, _ := store.GetByKey(key); ok {
		return
	}
	ps.mu.Lock()
	uid, gone := ps.deleted[key]
	ps.mu.Unlock()
	if gone && uid == p.UID {
		return
	}
	if err := store.Add(p); err == nil {
		h.OnPod(p, false)
	}
}

// onPod returns the pod informer's delivery to h (called with the delivery lock held): h is
// given the pod, then the share mends the cache where a read raced the informer (onStored,
// onDelete).
//
// A pod the filter does not want when it is delivered leaves the cache, and h is told it is
// gone: the watch passed it while the filter wanted it, and the informer stored it after a
// ring change took it away, after Release's sweep (as for a pod whose change the filter drops,
// filterEvent).
func (ps *podShare) onPod(h Handler) func(*translator.Pod, bool) {
	return func(p *translator.Pod, deleted bool) {
		if !deleted && !ps.wantsCached(p) {
			store := ps.k.podStore()
			if cur, ok, _ := store.GetByKey(p.Namespace() + "/" + p.Name); ok && cur == any(p) {
				_ = store.Delete(cur)
			}
			h.OnPod(p, true)
			return
		}
		h.OnPod(p, deleted)
		if deleted {
			ps.onDelete(p)
		} else {
			ps.onStored(p)
		}
	}
}

// onStored is called, with the delivery lock held, after the handler was given p, which the
// informer had stored. keep checks the cache and adds to it under the delivery lock, but the
// informer writes its cache without it: when the informer stored p between keep's check and
// its add, the add replaced p with the older copy keep read, and the informer would not store
// p again before the pod's next change. So the cache gets p back when it holds another copy.
// If that copy is newer than p (the informer stored it since), its own delivery, queued after
// this one, puts it back in turn; a pod the informer deleted since is absent and stays so.
func (ps *podShare) onStored(p *translator.Pod) {
	store := ps.k.podStore()
	if cur, ok, _ := store.GetByKey(p.Namespace() + "/" + p.Name); ok && cur != any(p) {
		_ = store.Update(p)
	}
}

// onDelete is called, with the delivery lock held, after the handler was given the deletion
// of p: a read in progress must not store p again, and a read that stored it between the
// informer's removal and this call is undone (the informer tells its handlers after it
// updates its cache).
func (ps *podShare) onDelete(p *translator.Pod) {
	if ps.tombstone.Load() {
		return // the pod may exist: handler reads it again if it is wanted
	}
	key := p.Namespace() + "/" + p.Name
	ps.mu.Lock()
	if ps.loading > 0 {
		ps.deleted[key] = p.UID
	}
	ps.mu.Unlock()
	store := ps.k.podStore()
	if cur, ok, _ := store.GetByKey(key); ok {
		if c, ok := cur.(*translator.Pod); ok && c.UID == p.UID {
			_ = store.Delete(cur)
		}
	}
}

// handler wraps the pod informer's event handler (eh, delivering to hd):
//   - a pod a relist deleted (a tombstone) is read again when the filter still wants it;
//   - the placeholder of a pod the filter stopped wanting (filterEvent) is delivered to hd
//     as the pod's deletion, so that what hd held of a pod it had (its addresses) goes; and
//     when the filter wants the pod again by then (a slice named it since), it is read: the
//     placeholder may have removed what a read stored.
func (ps *podShare) handler(eh cache.ResourceEventHandlerFuncs, hd Handler) cache.ResourceEventHandlerFuncs {
	del := eh.DeleteFunc
	eh.DeleteFunc = func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && isDropped(p) {
			gone := translator.SlimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
			ps.k.deliverMu.Lock()
			hd.OnPod(gone, true)
			ps.k.deliverMu.Unlock()
			ps.wantAgain(p.Namespace, p.Name)
			return
		}
		d, tomb := obj.(cache.DeletedFinalStateUnknown)
		ps.tombstone.Store(tomb)
		del(obj)
		ps.tombstone.Store(false)
		if tomb {
			if p, ok := d.Obj.(*translator.Pod); ok && ps.wantsCached(p) {
				ps.WantPod(p.Namespace(), p.Name)
			}
		}
	}
	return eh
}

// wantAgain reads pod namespace/name when the filter wants it by name and the cache lacks it.
func (ps *podShare) wantAgain(namespace, name string) {
	if !ps.cached(namespace+"/"+name) && ps.filter.WantsPod(namespace, name, nil) {
		ps.WantPod(namespace, name)
	}
}

// goneRecently reports whether key was read as gone less than goneFor ago, and no event of
// the pod came since.
func (ps *podShare) goneRecently(key string) bool {
	ps.goneMu.Lock()
	defer ps.goneMu.Unlock()
	at, ok := ps.gone[key]
	return ok && time.Since(at) < goneFor
}

// exists forgets that the pod key was read as gone: the watch or a list has just shown it (a
// pod created after the read, dropped then as unwanted, and named by a slice only later).
func (ps *podShare) exists(key string) {
	if ps.ngone.Load() == 0 {
		return
	}
	ps.goneMu.Lock()
	defer ps.goneMu.Unlock()
	delete(ps.gone, key)
	ps.ngone.Store(int64(len(ps.gone)))
}

// markGone records that key was read as gone now, dropping the records older than goneFor.
func (ps *podShare) markGone(key string) {
	ps.goneMu.Lock()
	defer ps.goneMu.Unlock()
	defer func() { ps.ngone.Store(int64(len(ps.gone))) }()
	now := time.Now()
	if ps.gone == nil {
		ps.gone = map[string]time.Time{}
	}
	if now.Sub(ps.gonePruned) > time.Minute { // a sweep a minute, not one a read
		ps.gonePruned = now
		for k, at := range ps.gone {
			if now.Sub(at) >= goneFor {
				delete(ps.gone, k)
			}
		}
	}
	ps.gone[key] = now
}

func (ps *podShare) beginLoad() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.loading == 0 {
		ps.deleted = map[string]types.UID{}
	}
	ps.loading++
}

func (ps *podShare) endLoad() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.loading--; ps.loading == 0 {
		ps.deleted = nil
	}
}

// beginDefer makes WantPod record pods until the matching endDefer.
func (ps *podShare) beginDefer() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.deferring++
}

// endDefer ends one beginDefer (or the initial sync); after the last, it queues the pods
// recorded that the cache still lacks.
func (ps *podShare) endDefer() {
	ps.mu.Lock()
	if ps.deferring--; ps.deferring > 0 {
		ps.mu.Unlock()
		return
	}
	recorded := ps.deferred
	ps.deferred = map[string]struct{}{}
	ps.mu.Unlock()
	var missing []string
	for key := range recorded {
		if !ps.cached(key) {
			missing = append(missing, key)
		}
	}
	ps.queue.addAll(missing)
}

// idle reports whether no read is deferred, queued or in progress.
func (ps *podShare) idle() bool {
	ps.mu.Lock()
	deferring := ps.deferring
	ps.mu.Unlock()
	return deferring == 0 && ps.queue.idle()
}

// WantPod queues the pod namespace/name to be read (or records it while reads are deferred).
func (ps *podShare) WantPod(namespace, name string) {
	key := namespace + "/" + name
	ps.mu.Lock()
	if ps.deferring > 0 {
		ps.deferred[key] = struct{}{}
		ps.mu.Unlock()
		return
	}
	ps.mu.Unlock()
	ps.queue.add(key)
}

// ForgetPod drops the pod namespace/name from the cache unless the filter still wants it.
func (ps *podShare) ForgetPod(namespace, name string) {
	store := ps.k.podStore()
	if store == nil {
		return
	}
	if obj, ok, _ := store.GetByKey(namespace + "/" + name); ok {
		if p, ok := obj.(*translator.Pod); ok && !ps.wantsCached(p) {
			_ = store.Delete(obj)
			// A slice may have named it between the check and the deletion: its handler
			// saw the pod cached and asked for nothing.
			ps.wantAgain(namespace, name)
		}
	}
}

// sweep drops from the cache every pod the filter no longer wants (after a ring change),
// holding the delivery lock, so that no read (keep) stores a pod the filter stopped wanting
// after it.
func (ps *podShare) sweep() {
	store := ps.k.podStore()
	if store == nil {
		return
	}
	ps.k.deliverMu.Lock()
	defer ps.k.deliverMu.Unlock()
	for _, obj := range store.List() {
		if p, ok := obj.(*translator.Pod); ok && !ps.wantsCached(p) {
			_ = store.Delete(obj)
			ps.wantAgain(p.Namespace(), p.Name) // as in ForgetPod
		}
	}
}

// gain lists every pod, page by page, and keeps those the filter wants that the cache lacks:
// after a ring change, the pods of the gained slices and of the gained addresses.
func (ps *podShare) gain(ctx context.Context) error {
	ps.beginLoad()
	defer ps.endLoad()
	pods := ps.k.clients.Typed.CoreV1().Pods(ps.k.cfg.Namespace)
	opts := metav1.ListOptions{Limit: gainPageSize}
	for {
		l, err := pods.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("kubernetes source: load gained pods: %w", err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			if !ps.cached(p.Namespace+"/"+p.Name) && ps.wants(p) {
				ps.keep(p)
			}
		}
		if l.Continue == "" {
			return nil
		}
		opts.Continue = l.Continue
	}
}

func (ps *podShare) cached(key string) bool {
	store := ps.k.podStore()
	if store == nil {
		return false
	}
	_, ok, _ := store.GetByKey(key)
	return ok
}

// wants asks the filter about a pod as the API server sends it.
func (ps *podShare) wants(p *corev1.Pod) bool {
	return ps.filter.WantsPod(p.Namespace, p.Name, translator.NetworkIPs(p))
}

// wantsCached asks the filter about a cached pod.
func (ps *podShare) wantsCached(p *translator.Pod) bool {
	return ps.filter.WantsPod(p.Namespace(), p.Name, translator.PodIPs(p))
}

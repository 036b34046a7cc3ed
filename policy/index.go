package policy

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"go.uber.org/zap"
)

// Sink receives converted objects from a Source. Implementations must be safe for
// concurrent use and must not block for long: they record the change and wake watchers.
type Sink interface {
	// Apply adds or replaces an object.
	Apply(r api.Resource)
	// Delete removes an object; deleting an unknown object is a no-op.
	Delete(kind api.Kind, key compute.Key)
	// Reset replaces every object of the given kinds with rs (a full resynchronisation).
	Reset(kinds []api.Kind, rs []api.Resource)
}

var _ Sink = (*Index)(nil)

// nsState holds one namespace's Servers and authorizations, and a Resources view of them
// rebuilt on every change (readers get an immutable snapshot of the slices).
type nsState struct {
	servers  map[string]*compute.Server
	policies map[string]*compute.AuthorizationPolicy
	sazs     map[string]*compute.ServerAuthorization
	view     compute.Resources // slices rebuilt by rebuild; maps shared with Index
}

func (n *nsState) empty() bool {
	return len(n.servers)+len(n.policies)+len(n.sazs) == 0
}

// watcher is one WatchPort stream's registration: a one-slot wake-up channel (a pending
// wake-up absorbs further ones, so a burst of changes costs the stream one recomputation)
// and a channel closed when the pod is deleted.
type watcher struct {
	pod  compute.Key
	wake chan struct{}
	gone chan struct{}
}

// Index holds the policy inputs and the watchers. All methods are safe for concurrent use.
// Objects stored are immutable: Apply stores the given values and never modifies them.
type Index struct {
	cfg     *compute.Config
	log     *zap.Logger
	metrics *Metrics

	mu        sync.RWMutex
	pods      map[compute.Key]*compute.Pod
	podsInNS  map[string]map[string]struct{} // pod names by namespace
	ns        map[string]*nsState
	meshTLS   map[compute.Key]*compute.MeshTLSAuthentication
	networks  map[compute.Key]*compute.NetworkAuthentication
	watchers  map[string]map[*watcher]struct{} // by namespace
	conflicts map[compute.Key][]string         // per pod: "port: winner over losers"
}

// NewIndex returns an empty index computing with cfg (which it keeps; do not modify it).
// metrics may be nil.
func NewIndex(cfg *compute.Config, log *zap.Logger, metrics *Metrics) *Index {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Index{
		cfg: cfg, log: log, metrics: metrics,
		pods:      map[compute.Key]*compute.Pod{},
		podsInNS:  map[string]map[string]struct{}{},
		ns:        map[string]*nsState{},
		meshTLS:   map[compute.Key]*compute.MeshTLSAuthentication{},
		networks:  map[compute.Key]*compute.NetworkAuthentication{},
		watchers:  map[string]map[*watcher]struct{}{},
		conflicts: map[compute.Key][]string{},
	}
}

// ErrPodNotFound is returned for a pod the index does not hold.
var ErrPodNotFound = errors.New("pod not found")

// Lookup computes the policy of a pod port. It returns ErrPodNotFound for an unknown pod.
func (x *Index) Lookup(pod compute.Key, port uint32) (compute.Result, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	p := x.pods[pod]
	if p == nil {
		return compute.Result{}, ErrPodNotFound
	}
	return compute.Inbound(x.cfg, x.resources(pod.Namespace), p, port), nil
}

var emptyResources compute.Resources

// resources returns the namespace's view; x.mu must be held.
func (x *Index) resources(ns string) *compute.Resources {
	if n := x.ns[ns]; n != nil {
		return &n.view
	}
	r := emptyResources
	r.MeshTLS, r.Networks = x.meshTLS, x.networks
	return &r
}

// watch registers a watcher for pod; it returns ErrPodNotFound for an unknown pod.
func (x *Index) watch(pod compute.Key) (*watcher, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.pods[pod] == nil {
		return nil, ErrPodNotFound
	}
	w := &watcher{pod: pod, wake: make(chan struct{}, 1), gone: make(chan struct{})}
	ws := x.watchers[pod.Namespace]
	if ws == nil {
		ws = map[*watcher]struct{}{}
		x.watchers[pod.Namespace] = ws
	}
	ws[w] = struct{}{}
	x.metrics.watches.Inc()
	return w, nil
}

// unwatch removes a watcher. It is idempotent.
func (x *Index) unwatch(w *watcher) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ws := x.watchers[w.pod.Namespace]
	if _, ok := ws[w]; !ok {
		return
	}
	delete(ws, w)
	if len(ws) == 0 {
		delete(x.watchers, w.pod.Namespace)
	}
	x.metrics.watches.Dec()
}

func (x *Index) wake(w *watcher) {
	select {
	case w.wake <- struct{}{}:
	default:
		x.metrics.coalesced.Inc()
	}
}

// wakeNamespace wakes the watchers of ns (of one pod only, when pod is set); x.mu held.
func (x *Index) wakeNamespace(ns string, pod *compute.Key) {
	for w := range x.watchers[ns] {
		if pod == nil || w.pod == *pod {
			x.wake(w)
		}
	}
}

func (x *Index) wakeAll() {
	for ns := range x.watchers {
		x.wakeNamespace(ns, nil)
	}
}

// Apply adds or replaces an object and wakes the watchers it may affect.
func (x *Index) Apply(r api.Resource) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.apply(r)
}

func (x *Index) apply(r api.Resource) {
	switch v := r.Value.(type) {
	case *compute.Pod:
		if old := x.pods[r.Key]; old != nil && reflect.DeepEqual(old, v) {
			return
		}
		x.pods[r.Key] = v
		if x.podsInNS[r.Key.Namespace] == nil {
			x.podsInNS[r.Key.Namespace] = map[string]struct{}{}
		}
		x.podsInNS[r.Key.Namespace][r.Key.Name] = struct{}{}
		x.recountPodConflicts(r.Key)
		x.wakeNamespace(r.Key.Namespace, &r.Key)
	case *compute.Server:
		n := x.nsFor(r.Key.Namespace)
		if setIfChanged(n.servers, r.Key.Name, v) {
			x.namespaceChanged(r.Key.Namespace, true)
		}
	case *compute.AuthorizationPolicy:
		n := x.nsFor(r.Key.Namespace)
		if setIfChanged(n.policies, r.Key.Name, v) {
			x.namespaceChanged(r.Key.Namespace, false)
		}
	case *compute.ServerAuthorization:
		n := x.nsFor(r.Key.Namespace)
		if setIfChanged(n.sazs, r.Key.Name, v) {
			x.namespaceChanged(r.Key.Namespace, false)
		}
	case *compute.MeshTLSAuthentication:
		if setIfChanged(x.meshTLS, r.Key, v) {
			x.wakeAll()
		}
	case *compute.NetworkAuthentication:
		if setIfChanged(x.networks, r.Key, v) {
			x.wakeAll()
		}
	default:
		x.log.Error("index: unexpected resource value", zap.String("kind", string(r.Kind)), zap.Stringer("key", r.Key))
		return
	}
	x.updateCounts()
}

func setIfChanged[K comparable, V any](m map[K]*V, k K, v *V) bool {
	if old, ok := m[k]; ok && reflect.DeepEqual(old, v) {
		return false
	}
	m[k] = v
	return true
}

func (x *Index) nsFor(ns string) *nsState {
	n := x.ns[ns]
	if n == nil {
		n = &nsState{
			servers:  map[string]*compute.Server{},
			policies: map[string]*compute.AuthorizationPolicy{},
			sazs:     map[string]*compute.ServerAuthorization{},
		}
		x.ns[ns] = n
	}
	return n
}

// namespaceChanged rebuilds the namespace's view, recounts Server conflicts when Servers
// changed, and wakes the namespace's watchers; x.mu held.
func (x *Index) namespaceChanged(ns string, servers bool) {
	n := x.ns[ns]
	if n.empty() {
		delete(x.ns, ns)
	} else {
		n.view = compute.Resources{
			Servers:               sortedValues(n.servers),
			AuthorizationPolicies: sortedValues(n.policies),
			ServerAuthorizations:  sortedValues(n.sazs),
			MeshTLS:               x.meshTLS,
			Networks:              x.networks,
		}
	}
	if servers {
		for name := range x.podsInNS[ns] {
			x.recountPodConflicts(compute.Key{Namespace: ns, Name: name})
		}
	}
	x.wakeNamespace(ns, nil)
}

func sortedValues[V any](m map[string]*V) []*V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// Delete removes an object and wakes the watchers it may affect. Watchers of a deleted pod
// are told that it is gone (their streams end, as Linkerd's do).
func (x *Index) Delete(kind api.Kind, key compute.Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.delete(kind, key)
}

func (x *Index) delete(kind api.Kind, key compute.Key) {
	switch kind {
	case api.KindPod:
		if _, ok := x.pods[key]; !ok {
			return
		}
		delete(x.pods, key)
		delete(x.podsInNS[key.Namespace], key.Name)
		if len(x.podsInNS[key.Namespace]) == 0 {
			delete(x.podsInNS, key.Namespace)
		}
		x.setConflicts(key, nil)
		for w := range x.watchers[key.Namespace] {
			if w.pod == key {
				close(w.gone)
				delete(x.watchers[key.Namespace], w)
				x.metrics.watches.Dec()
			}
		}
	case api.KindServer, api.KindAuthorizationPolicy, api.KindServerAuthorization:
		n := x.ns[key.Namespace]
		if n == nil {
			return
		}
		var found bool
		switch kind {
		case api.KindServer:
			_, found = n.servers[key.Name]
			delete(n.servers, key.Name)
		case api.KindAuthorizationPolicy:
			_, found = n.policies[key.Name]
			delete(n.policies, key.Name)
		default:
			_, found = n.sazs[key.Name]
			delete(n.sazs, key.Name)
		}
		if found {
			x.namespaceChanged(key.Namespace, kind == api.KindServer)
		}
	case api.KindMeshTLSAuthentication:
		if _, ok := x.meshTLS[key]; ok {
			delete(x.meshTLS, key)
			x.wakeAll()
		}
	case api.KindNetworkAuthentication:
		if _, ok := x.networks[key]; ok {
			delete(x.networks, key)
			x.wakeAll()
		}
	}
	x.updateCounts()
}

// Reset replaces every object of kinds with rs: objects absent from rs are deleted, the
// others applied (unchanged ones wake nobody).
func (x *Index) Reset(kinds []api.Kind, rs []api.Resource) {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := map[api.Kind]map[compute.Key]bool{}
	for _, r := range rs {
		if keep[r.Kind] == nil {
			keep[r.Kind] = map[compute.Key]bool{}
		}
		keep[r.Kind][r.Key] = true
	}
	for _, kind := range kinds {
		for _, key := range x.keys(kind) {
			if !keep[kind][key] {
				x.delete(kind, key)
			}
		}
	}
	for _, r := range rs {
		x.apply(r)
	}
}

// keys lists the keys of one kind; x.mu held.
func (x *Index) keys(kind api.Kind) []compute.Key {
	var out []compute.Key
	switch kind {
	case api.KindPod:
		for k := range x.pods {
			out = append(out, k)
		}
	case api.KindMeshTLSAuthentication:
		for k := range x.meshTLS {
			out = append(out, k)
		}
	case api.KindNetworkAuthentication:
		for k := range x.networks {
			out = append(out, k)
		}
	default:
		for ns, n := range x.ns {
			var m []string
			switch kind {
			case api.KindServer:
				m = mapKeys(n.servers)
			case api.KindAuthorizationPolicy:
				m = mapKeys(n.policies)
			case api.KindServerAuthorization:
				m = mapKeys(n.sazs)
			}
			for _, name := range m {
				out = append(out, compute.Key{Namespace: ns, Name: name})
			}
		}
	}
	return out
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// recountPodConflicts finds the pod's ports selected by more than one Server; x.mu held.
func (x *Index) recountPodConflicts(key compute.Key) {
	pod := x.pods[key]
	n := x.ns[key.Namespace]
	if pod == nil || n == nil {
		x.setConflicts(key, nil)
		return
	}
	ports := map[uint32]bool{}
	for _, s := range n.view.Servers {
		if s.Port.Name == "" {
			ports[s.Port.Number] = true
		} else {
			for _, p := range pod.PortNames[s.Port.Name] {
				ports[p] = true
			}
		}
	}
	var found []string
	for _, port := range slices.Sorted(maps.Keys(ports)) {
		sel := compute.SelectingServers(&n.view, pod, port)
		if len(sel) < 2 {
			continue
		}
		names := make([]string, len(sel))
		for i, s := range sel {
			names[i] = s.Name
		}
		found = append(found, strconv.FormatUint(uint64(port), 10)+": "+names[0]+" over "+strings.Join(names[1:], ", "))
	}
	x.setConflicts(key, found)
}

// setConflicts records a pod's conflicts, logs new ones and updates the gauge; x.mu held.
func (x *Index) setConflicts(key compute.Key, found []string) {
	old := x.conflicts[key]
	if slices.Equal(old, found) {
		return
	}
	for _, c := range found {
		if !slices.Contains(old, c) {
			x.log.Warn("servers conflict on a pod port; the oldest (then first by name) wins",
				zap.String("namespace", key.Namespace), zap.String("pod", key.Name), zap.String("conflict", c))
		}
	}
	x.metrics.conflicts.WithLabelValues(key.Namespace).Add(float64(len(found) - len(old)))
	if len(found) == 0 {
		delete(x.conflicts, key)
	} else {
		x.conflicts[key] = found
	}
}

// updateCounts refreshes the object gauges; x.mu held.
func (x *Index) updateCounts() {
	var servers, policies, sazs int
	for _, n := range x.ns {
		servers += len(n.servers)
		policies += len(n.policies)
		sazs += len(n.sazs)
	}
	x.metrics.objects.WithLabelValues(string(api.KindPod)).Set(float64(len(x.pods)))
	x.metrics.objects.WithLabelValues(string(api.KindServer)).Set(float64(servers))
	x.metrics.objects.WithLabelValues(string(api.KindAuthorizationPolicy)).Set(float64(policies))
	x.metrics.objects.WithLabelValues(string(api.KindServerAuthorization)).Set(float64(sazs))
	x.metrics.objects.WithLabelValues(string(api.KindMeshTLSAuthentication)).Set(float64(len(x.meshTLS)))
	x.metrics.objects.WithLabelValues(string(api.KindNetworkAuthentication)).Set(float64(len(x.networks)))
}

package shard

import (
	"maps"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/translator"
)

// ipIndex maps the addresses GetProfile may be asked for to what holds them: the cluster IPs
// of every Service to its key, and the pod-network IPs (translator.PodIPs) of the pods that
// may own them to the pod. Cluster IPs are indexed whole on every replica (a few dozen bytes
// per Service), so that a cluster IP is resolved where the lookup arrives and goes to its
// service's owner. Pod IPs are many more, one or two per pod: each is indexed only by the
// replica that owns the address in the ring (ipKey), which answers GetProfile for it and for
// any other address it owns that no Service has (the pod and its namespace's Servers are on
// every replica). The other replicas relay such lookups to it.
//
// Watchers of an address (a GetProfile stream for it) are woken whenever what it resolves to
// changes, and whenever the pod holding it changes. Safe for concurrent use.
type ipIndex struct {
	mu       sync.RWMutex
	services map[netip.Addr][]ServiceKey // several: conflicting cluster IPs
	svcIPs   map[ServiceKey][]netip.Addr // every Service shown and not deleted; nil: no cluster IP
	pods     map[netip.Addr][]podKey     // several: conflicting pod IPs
	podIPs   map[podKey][]netip.Addr

	watchers notifier[netip.Addr]
}

func newIPIndex() *ipIndex {
	return &ipIndex{services: map[netip.Addr][]ServiceKey{}, svcIPs: map[ServiceKey][]netip.Addr{},
		pods: map[netip.Addr][]podKey{}, podIPs: map[podKey][]netip.Addr{}}
}

// setService records the cluster IPs of svc (none when deleted).
func (ix *ipIndex) setService(k ServiceKey, svc *corev1.Service, deleted bool) {
	var ips []netip.Addr
	if !deleted {
		ips = translator.ClusterIPs(svc)
	}
	ix.mu.Lock()
	old, changed := reindex(ix.services, ix.svcIPs, k, ips)
	if deleted {
		delete(ix.svcIPs, k) // reindex keeps the key of one that had no cluster IP
	} else if len(ips) == 0 {
		ix.svcIPs[k] = nil // known, without a cluster IP (headless)
	}
	ix.mu.Unlock()
	if changed {
		ix.wake(old, ips)
	}
}

// knownServices returns the key of every Service given to setService and not deleted since.
func (ix *ipIndex) knownServices() []ServiceKey {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return slices.Collect(maps.Keys(ix.svcIPs))
}

// setPod records the addresses of pod that owns admits (none when deleted) and wakes the
// watchers of its addresses, old and new: what a pod-IP profile shows depends on the whole
// pod.
//
// An address of the pod that the index holds stays, admitted or not, until dropUnowned
// releases it: a ring change sets the new filter (owns) first, then loads what it gained (a
// replay of the source's objects, this pod's among them), and only then swaps the view the
// streams follow. Until the swap the address's streams are still served here, and dropping
// it at the filter would send them the address as no pod's.
func (ix *ipIndex) setPod(pod *translator.Pod, deleted bool, owns func(netip.Addr) bool) {
	k := podKey{pod.Namespace(), pod.Name}
	var ips []netip.Addr
	if !deleted {
		ips = translator.PodIPs(pod) // the pod's own slice, kept as it is when every address is kept
	}
	ix.mu.Lock()
	if len(ips) > 0 {
		held := ix.podIPs[k]
		if unkept := func(a netip.Addr) bool { return !owns(a) && !slices.Contains(held, a) }; slices.ContainsFunc(ips, unkept) {
			ips = slices.DeleteFunc(slices.Clone(ips), unkept)
		}
	}
	if len(ips) == 0 {
		ips = nil
	}
	old, _ := reindex(ix.pods, ix.podIPs, k, ips)
	ix.mu.Unlock()
	ix.wake(old, ips)
}

// reindex gives k the addresses ips (none: k is forgotten) in byKey and in byAddr, its
// inverse. It returns the addresses k had, and whether they differ.
func reindex[K comparable](byAddr map[netip.Addr][]K, byKey map[K][]netip.Addr, k K, ips []netip.Addr) ([]netip.Addr, bool) {
	old := byKey[k]
	if slices.Equal(old, ips) {
		return old, false
	}
	for _, a := range old {
		unindex(byAddr, a, k)
	}
	for _, a := range ips {
		byAddr[a] = append(byAddr[a], k)
	}
	if len(ips) == 0 {
		delete(byKey, k)
	} else {
		byKey[k] = ips
	}
	return old, true
}

// unindex removes k from the keys of a in byAddr, and a when no key is left.
func unindex[K comparable](byAddr map[netip.Addr][]K, a netip.Addr, k K) {
	if byAddr[a] = without(byAddr[a], k); len(byAddr[a]) == 0 {
		delete(byAddr, a)
	}
}

// dropUnowned forgets the pod addresses owns no longer admits (a ring change gave them to
// another replica), copying the maps when that leaves them much smaller (a Go map keeps the
// room of its largest size). It wakes their watchers, whose streams then move.
func (ix *ipIndex) dropUnowned(owns func(netip.Addr) bool) {
	ix.mu.Lock()
	var dropped []netip.Addr
	for k, ips := range ix.podIPs {
		kept := slices.DeleteFunc(slices.Clone(ips), func(a netip.Addr) bool { return !owns(a) })
		if len(kept) == len(ips) {
			continue
		}
		for _, a := range ips {
			if !slices.Contains(kept, a) {
				dropped = append(dropped, a)
				unindex(ix.pods, a, k)
			}
		}
		if len(kept) == 0 {
			delete(ix.podIPs, k)
		} else {
			ix.podIPs[k] = kept
		}
	}
	if len(dropped) > 0 {
		// Copies at their size, not their peak's (maps.Clone keeps the room too).
		pods := make(map[netip.Addr][]podKey, len(ix.pods))
		maps.Copy(pods, ix.pods)
		podIPs := make(map[podKey][]netip.Addr, len(ix.podIPs))
		maps.Copy(podIPs, ix.podIPs)
		ix.pods, ix.podIPs = pods, podIPs
	}
	ix.mu.Unlock()
	ix.wake(dropped, nil)
}

func (ix *ipIndex) wake(a, b []netip.Addr) {
	for _, ip := range a {
		ix.watchers.notify(ip)
	}
	for _, ip := range b {
		if !slices.Contains(a, ip) {
			ix.watchers.notify(ip)
		}
	}
}

// ipTarget is what an address resolves to.
type ipTarget struct {
	// services and pods hold what has the address; more than one of a kind is a conflict.
	services []ServiceKey
	pods     []podKey
}

// holdsPod reports whether the index holds an address of the pod k.
func (ix *ipIndex) holdsPod(k podKey) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.podIPs[k]) > 0
}

// lookup returns what a resolves to. The slices must not be modified.
func (ix *ipIndex) lookup(a netip.Addr) ipTarget {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ipTarget{services: ix.services[a], pods: ix.pods[a]}
}

// watch returns the channel closed on the next change to a's resolution or to the pod
// holding it, and the function that stops watching.
func (ix *ipIndex) watch(a netip.Addr) (<-chan struct{}, func()) { return ix.watchers.watch(a) }

func without[T comparable](s []T, v T) []T {
	if i := slices.Index(s, v); i >= 0 {
		return slices.Delete(slices.Clone(s), i, i+1)
	}
	return s
}

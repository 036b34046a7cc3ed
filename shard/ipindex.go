package shard

import (
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/translator"
)

// ipIndex maps the addresses GetProfile may be asked for to what holds them: the cluster IPs
// of every Service to its key, and the pod-network IPs of every pod that may own them
// (translator.PodIPs) to the pod. Every replica keeps it whole, from the Services and Pods
// the source delivers to all of them (a few dozen bytes per Service and per pod), so that an
// IP lookup is resolved wherever it arrives: a cluster IP then goes to its service's owner,
// a pod IP is answered there (the pod and its namespace's Servers are on every replica).
//
// Watchers of an address (a GetProfile stream for it) are woken whenever what it resolves to
// changes, and whenever the pod holding it changes. Safe for concurrent use.
type ipIndex struct {
	mu       sync.RWMutex
	services map[netip.Addr][]ServiceKey // several: conflicting cluster IPs
	svcIPs   map[ServiceKey][]netip.Addr
	pods     map[netip.Addr][]podKey // several: conflicting pod IPs
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
	old := ix.svcIPs[k]
	changed := !slices.Equal(old, ips)
	if changed {
		for _, a := range old {
			ix.services[a] = without(ix.services[a], k)
			if len(ix.services[a]) == 0 {
				delete(ix.services, a)
			}
		}
		for _, a := range ips {
			ix.services[a] = append(ix.services[a], k)
		}
		if len(ips) == 0 {
			delete(ix.svcIPs, k)
		} else {
			ix.svcIPs[k] = ips
		}
	}
	ix.mu.Unlock()
	if changed {
		ix.wake(old, ips)
	}
}

// setPod records the addresses of pod (none when deleted) and wakes the watchers of its
// addresses, old and new: what a pod-IP profile shows depends on the whole pod.
func (ix *ipIndex) setPod(pod *corev1.Pod, deleted bool) {
	k := podKey{pod.Namespace, pod.Name}
	var ips []netip.Addr
	if !deleted {
		ips = translator.PodIPs(pod)
	}
	ix.mu.Lock()
	old := ix.podIPs[k]
	if !slices.Equal(old, ips) {
		for _, a := range old {
			ix.pods[a] = without(ix.pods[a], k)
			if len(ix.pods[a]) == 0 {
				delete(ix.pods, a)
			}
		}
		for _, a := range ips {
			ix.pods[a] = append(ix.pods[a], k)
		}
		if len(ips) == 0 {
			delete(ix.podIPs, k)
		} else {
			ix.podIPs[k] = ips
		}
	}
	ix.mu.Unlock()
	ix.wake(old, ips)
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

package translator

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/meridian-mesh/meridian/snapshot"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// benchService builds a Service with n meshed endpoints, each pod owned by a Deployment's
// ReplicaSet, in slices of 100 endpoints (the EndpointSlice controller's default), across
// three zones.
func benchService(n int) (*corev1.Service, []*discoveryv1.EndpointSlice, podIndex) {
	svc := service("shop", "web", sport("http", 80), sport("db", 3306))
	pods := podIndex{}
	var sl []*discoveryv1.EndpointSlice
	for i := 0; i < n; i++ {
		if i%100 == 0 {
			sl = append(sl, eslice("shop", fmt.Sprintf("web-%05d", i/100), "web", v4,
				[]discoveryv1.EndpointPort{eport("http", 8080), eport("db", 3306)}))
		}
		name := fmt.Sprintf("web-7c9d8f6b5-%05d", i)
		ep := withZone(endpoint(name, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)), fmt.Sprintf("zone-%d", i%3))
		s := sl[len(sl)-1]
		s.Endpoints = append(s.Endpoints, ep)
		p := pod("shop", name, meshed("linkerd"), owned("ReplicaSet", "web-7c9d8f6b5"), label(LabelPodTemplateHash, "7c9d8f6b5"), sa("web"))
		pods[p.Namespace+"/"+p.Name] = p
	}
	return svc, sl, pods
}

func BenchmarkAddressSet(b *testing.B) {
	cfg := DefaultConfig()
	for _, n := range []int{100, 1000} {
		for _, port := range []uint32{80, 3306} {
			b.Run(fmt.Sprintf("endpoints=%d/port=%d", n, port), func(b *testing.B) {
				svc, sl, pods := benchService(n)
				lookup := pods.projected()
				ssl := slimSlices(sl)
				b.ReportAllocs()
				for b.Loop() {
					if s := AddressSet(cfg, svc, port, ssl, lookup); s.Len() != n {
						b.Fatalf("got %d endpoints", s.Len())
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/endpoint")
			})
		}
	}
}

func BenchmarkParseAuthority(b *testing.B) {
	cfg := DefaultConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAuthority(cfg, "web-0.web.shop.svc.cluster.local:8080"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSlimPod(b *testing.B) {
	p := fatPod(pod("ns", "a", meshed("linkerd"), owned("ReplicaSet", "web-abc"), label(LabelPodTemplateHash, "abc"), annotate(AnnotationOpaquePorts, "http")))
	b.ReportAllocs()
	for b.Loop() {
		SlimPod(p)
	}
}

// BenchmarkProjectPod is the informers' transform on a pod: a fresh one is copied, a
// projected one is kept (the idempotent path).
func BenchmarkProjectPod(b *testing.B) {
	p := fatPod(pod("ns", "a", meshed("linkerd"), owned("ReplicaSet", "web-abc"), label(LabelPodTemplateHash, "abc"), annotate(AnnotationOpaquePorts, "http")))
	for _, tc := range []struct {
		name string
		p    any
	}{{"fresh", p}, {"projected", Project(p)}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Project(tc.p)
			}
		})
	}
}

// BenchmarkPodMemory reports the live heap of the projections of many pods (bytes/pod), as
// every replica caches them, the decoded pods excluded: the pods of 100 Deployments, as the
// API server gives them (fatPod), each with its own name, UID, resourceVersion and address.
func BenchmarkPodMemory(b *testing.B) {
	const pods = 10000
	in := make([]*corev1.Pod, pods)
	for i := range in {
		dep := fmt.Sprintf("web-%02d", i%100)
		p := fatPod(pod("shop", fmt.Sprintf("%s-7c9d8f6b5-%05d", dep, i), meshed("linkerd"), owned("ReplicaSet", dep+"-7c9d8f6b5"),
			label(LabelPodTemplateHash, "7c9d8f6b5"), label("app", dep), sa(dep)))
		p.UID = types.UID(fmt.Sprintf("0b6f0c1e-6b2e-4c1c-9a3b-%012d", i))
		p.ResourceVersion = fmt.Sprint(100000 + i)
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%50)
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		in[i] = p
	}
	reportLiveBytesPer(b, pods, pods, "pod", func(i int) any { return Project(in[i]) })
	runtime.KeepAlive(in)
}

// BenchmarkSlimEndpointSlice projects a slice of 100 endpoints.
func BenchmarkSlimEndpointSlice(b *testing.B) {
	_, sl, _ := benchService(100)
	es := sl[0]
	fatMeta(&es.ObjectMeta)
	for i := range es.Endpoints {
		es.Endpoints[i].NodeName = ptr("node-1")
		es.Endpoints[i].TargetRef.UID = "0b6f0c1e-6b2e-4c1c-9a3b-3c1f7d3d7a10"
	}
	b.ReportAllocs()
	for b.Loop() {
		SlimEndpointSlice(es)
	}
}

// BenchmarkSliceMemory reports the live heap of the projections of many 100-endpoint slices
// (bytes/endpoint), as a replica caches them, the decoded slices excluded: with a Pod
// targetRef per endpoint, and without (the 5,000 x 100 cluster).
func BenchmarkSliceMemory(b *testing.B) {
	const slices, width = 500, 100
	for _, withPods := range []bool{true, false} {
		b.Run(map[bool]string{true: "pods", false: "no-pods"}[withPods], func(b *testing.B) {
			in := make([]*discoveryv1.EndpointSlice, slices)
			for i := range in {
				_, sl, _ := benchService(width)
				in[i] = sl[0]
				if !withPods {
					for j := range in[i].Endpoints {
						in[i].Endpoints[j].TargetRef = nil
					}
				}
			}
			reportLiveBytes(b, slices, slices*width, func(i int) any { return SlimEndpointSlice(in[i]) })
			runtime.KeepAlive(in)
		})
	}
}

// BenchmarkView is the cost of one client view of a 1000-endpoint set: the view of a client
// without locality (the set itself), and of one in a zone (relabelled endpoints), from
// scratch and taking a previous view's endpoints over.
func BenchmarkView(b *testing.B) {
	cfg := DefaultConfig()
	svc, slices, pods := benchService(1000)
	for i, es := range slices {
		for j := range es.Endpoints {
			es.Endpoints[j].Zone = ptr([]string{"west-1a", "west-1b"}[(i+j)%2])
		}
	}
	set := addressSet(cfg, svc, 80, slices, pods.lookup)
	zone := Client{Node: "n", Zone: "west-1a"}
	first := View(cfg, set, zone, nil)
	for _, c := range []struct {
		name   string
		client Client
		prev   *Prev
	}{{"no locality", Client{}, nil}, {"zone", zone, nil}, {"zone, reusing", zone, &Prev{Set: set, View: first}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = View(cfg, set, c.client, c.prev)
			}
		})
	}
}

// BenchmarkSetMemory reports the live heap of the address sets of many 100-endpoint services
// (bytes/endpoint), their inputs excluded: services whose endpoints are meshed pods owned
// by a ReplicaSet (the same 100 pod names in every service, or distinct pods per service as
// in most clusters: what anything interned per pod would cost shows in the latter), and
// services without pods (the 5,000 x 100 cluster).
func BenchmarkSetMemory(b *testing.B) {
	const services, width = 500, 100
	cfg := DefaultConfig()
	for _, c := range []struct {
		name               string
		withPods, distinct bool
		afterEmpty         bool // computed with AddressSetReusing from the Service's empty set
		// podsAfter: computed first with no pod known, then again each time 10 more pods
		// are, reusing the earlier set (a source that reads pods after the slices naming them)
		podsAfter bool
	}{{"pods", true, false, false, false}, {"distinct-pods", true, true, false, false}, {"no-pods", false, false, false, false},
		{"no-pods-after-empty", false, false, true, false}, {"pods-after-slices", true, false, false, true}} {
		b.Run(c.name, func(b *testing.B) {
			type input struct {
				svc    *corev1.Service
				slices []*EndpointSlice
				pods   PodLookup
			}
			in := make([]input, services)
			for i := range in {
				svc, sl, pods := benchService(width)
				svc.Name = fmt.Sprintf("web-%d", i)
				if c.distinct {
					pods = renamePods(sl, pods, fmt.Sprintf("s%d-", i))
				}
				for _, es := range sl {
					es.Labels[LabelServiceName] = svc.Name
					if !c.withPods {
						for j := range es.Endpoints {
							es.Endpoints[j].TargetRef = nil
						}
					}
				}
				in[i] = input{svc, slimSlices(sl), pods.projected()}
			}
			reportLiveBytes(b, services, services*width, func(i int) any {
				x := in[i]
				if c.podsAfter {
					return podsAfterSlices(cfg, x.svc, x.slices, x.pods)
				}
				if c.afterEmpty {
					// A Service indexed before its slices arrive: its first set is empty,
					// and the next is computed reusing it, as the index does.
					empty := AddressSet(cfg, x.svc, 80, nil, x.pods)
					return AddressSetReusing(cfg, Inputs{Service: x.svc, Slices: x.slices, Pods: x.pods}, 80, Reuse{Prev: empty})
				}
				return AddressSet(cfg, x.svc, 80, x.slices, x.pods)
			})
			runtime.KeepAlive(in)
		})
	}
}

// podsAfterSlices computes svc's set with none of the pods its slices name known, then again,
// reusing the earlier set, each time 10 more are, as the index does when pods arrive after
// their slices.
func podsAfterSlices(cfg Config, svc *corev1.Service, sl []*EndpointSlice, pods PodLookup) *snapshot.AddressSet {
	var names []string
	for _, es := range sl {
		for i := range es.Endpoints {
			names = append(names, es.Endpoints[i].PodNamespace(es)+"/"+es.Endpoints[i].Pod)
		}
	}
	known := map[string]bool{}
	lookup := func(ns, name string) *Pod {
		if known[ns+"/"+name] {
			return pods(ns, name)
		}
		return nil
	}
	set := AddressSet(cfg, svc, 80, sl, lookup)
	for k := 0; k < len(names); k += 10 {
		for _, n := range names[k:min(k+10, len(names))] {
			known[n] = true
		}
		set = AddressSetReusing(cfg, Inputs{Service: svc, Slices: sl, Pods: lookup}, 80, Reuse{Prev: set})
	}
	return set
}

// renamePods prefixes the names of the pods of slices sl (and of their references) with
// prefix, and returns their index.
func renamePods(sl []*discoveryv1.EndpointSlice, pods podIndex, prefix string) podIndex {
	out := podIndex{}
	for _, es := range sl {
		for j := range es.Endpoints {
			ref := es.Endpoints[j].TargetRef
			p := pods[es.Namespace+"/"+ref.Name].DeepCopy()
			ref.Name = prefix + ref.Name
			p.Name = ref.Name
			out[p.Namespace+"/"+p.Name] = p
		}
	}
	return out
}

// reportLiveBytes reports, as bytes/endpoint, the live heap that keeping build(0) ..
// build(n-1) adds, over endpoints endpoints: each iteration drops the previous results, then
// measures the heap after a GC before and after making them all.
func reportLiveBytes(b *testing.B, n, endpoints int, build func(i int) any) {
	reportLiveBytesPer(b, n, endpoints, "endpoint", build)
}

// reportLiveBytesPer is reportLiveBytes over units of what (bytes/what).
func reportLiveBytesPer(b *testing.B, n, units int, what string, build func(i int) any) {
	out := make([]any, n)
	var perEndpoint float64
	for b.Loop() {
		clear(out)
		before := heapAfterGC()
		for i := range out {
			out[i] = build(i)
		}
		perEndpoint = (float64(heapAfterGC()) - float64(before)) / float64(units)
	}
	runtime.KeepAlive(out)
	b.ReportMetric(perEndpoint, "bytes/"+what)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

package source

import (
	"os"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/cache"
)

// typicalPod returns the pod of testdata/typical-pod.yaml: a meshed Deployment pod with three
// containers, as the API server returns it.
func typicalPod(tb testing.TB) *corev1.Pod {
	tb.Helper()
	f, err := os.Open("testdata/typical-pod.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var p corev1.Pod
	if err := utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&p); err != nil {
		tb.Fatalf("testdata/typical-pod.yaml: %v", err)
	}
	return &p
}

// BenchmarkCachedPodHeap reports the live heap one typical pod costs in the pod informer's
// cache (heap-B/pod): the pod is decoded from its protobuf encoding, as client-go decodes a
// watch event, and passed through the informers' transform, as client-go does before it
// caches the object. "decoded" is the cost without a transform. The cache's own per-key
// overhead (its map entry) comes on top of both and is the same.
func BenchmarkCachedPodHeap(b *testing.B) {
	raw, err := typicalPod(b).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		transform cache.TransformFunc
	}{{"decoded", nil}, {"transformed", slimObject}} {
		b.Run(tc.name, func(b *testing.B) {
			perPod := liveHeapPer(b, 2000, func() any {
				p := &corev1.Pod{}
				if err := p.Unmarshal(raw); err != nil {
					b.Fatal(err)
				}
				var obj any = p
				if tc.transform != nil {
					if obj, err = tc.transform(obj); err != nil {
						b.Fatal(err)
					}
				}
				return obj
			})
			b.ReportMetric(perPod, "heap-B/pod")
			b.ReportMetric(float64(len(raw)), "protobuf-B/pod")
		})
	}
}

// liveHeapPer returns the live heap each of n objects that mk makes holds, measured on every
// iteration of b.Loop (the last one's).
func liveHeapPer(b *testing.B, n int, mk func() any) float64 {
	kept := make([]any, n)
	var per float64
	for b.Loop() {
		clear(kept)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range kept {
			kept[i] = mk()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	}
	runtime.KeepAlive(kept)
	return per
}

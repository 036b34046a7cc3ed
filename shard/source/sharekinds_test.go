package source

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestServiceIPs: what the Services cache keeps of an unwanted Service is keyed as the Service
// is, and handlers are given back the same reduced Service, single-stack, dual-stack, headless
// or without a cluster IP (ExternalName).
func TestServiceIPs(t *testing.T) {
	m := objMeta{name: "web", namespace: "shop", resourceVersion: "41"}
	for _, tc := range []struct {
		name string
		ip   string
		ips  []string
	}{
		{"single", "10.0.0.9", []string{"10.0.0.9"}},
		{"dual", "10.0.0.9", []string{"10.0.0.9", "fd00::9"}},
		{"headless", "None", []string{"None"}},
		{"external", "", nil},
		{"ip without list", "10.0.0.9", nil}, // an object written before ClusterIPs existed
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := clusterIPsOf(m, tc.ip, tc.ips)
			c := compactReduced(want)
			if !isReduced(c) || isDropped(c) {
				t.Fatalf("compactReduced gave %#v, not a reduced object", c)
			}
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(c)
			if err != nil || key != "shop/web" {
				t.Fatalf("key %q, %v; want shop/web", key, err)
			}
			got, ok := expandReduced(c).(*corev1.Service)
			if !ok || !IsClusterIPsOnly(got) || got.Name != "web" || got.Namespace != "shop" || got.ResourceVersion != "41" {
				t.Fatalf("expanded to %#v", expandReduced(c))
			}
			wantIPs := tc.ips
			if wantIPs == nil && tc.ip != "" {
				wantIPs = []string{tc.ip} // what the API server defaults ClusterIPs to
			}
			if got.Spec.ClusterIP != tc.ip || !slices.Equal(got.Spec.ClusterIPs, wantIPs) {
				t.Fatalf("expanded to cluster IPs %q %q, want %q %q", got.Spec.ClusterIP, got.Spec.ClusterIPs, tc.ip, wantIPs)
			}
			if compactReduced(c) != c || expandReduced(got) != got {
				t.Fatal("compactReduced and expandReduced are not idempotent")
			}
		})
	}
	full := &corev1.Service{}
	if compactReduced(full) != any(full) {
		t.Fatal("compactReduced changed a whole Service")
	}
}

// BenchmarkUnwantedServiceHeap reports the live heap (heap-B/service) that one Service the
// replica does not own costs in the Services cache, as the reduced corev1.Service kept before
// and as the serviceIPs kept now, without the cache's map entry, which is the same for both.
func BenchmarkUnwantedServiceHeap(b *testing.B) {
	for _, tc := range []struct {
		name string
		keep func(objMeta, string, []string) any
	}{
		{"reduced-Service", func(m objMeta, ip string, ips []string) any { return clusterIPsOf(m, ip, ips) }},
		{"serviceIPs", func(m objMeta, ip string, ips []string) any { return compactIPs(m, ip, ips) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			per := liveHeapPer(b, 2000, func() any {
				// As peekSpecIPs and peekMeta give them: strings of their own.
				ip := string([]byte("10.96.12.34"))
				m := objMeta{name: string([]byte("service-00042")), namespace: string([]byte("tenant-17")), resourceVersion: string([]byte("1234567"))}
				return tc.keep(m, ip, []string{string([]byte(ip))})
			})
			b.ReportMetric(per, "heap-B/service")
		})
	}
}

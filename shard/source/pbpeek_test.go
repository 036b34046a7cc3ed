package source

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/meridian-mesh/meridian/translator"
)

// bigSlice is an EndpointSlice of service svc with n endpoints, with the fields the
// EndpointSlice controller writes.
func bigSlice(ns, svc string, n int) *discoveryv1.EndpointSlice {
	ready := true
	node, zone := "node-1", "zone-a"
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: svc + "-abcde", Namespace: ns, ResourceVersion: "12345", UID: "0b2c7c1e-6f0e-4c9a-9f3e-1d2a3b4c5d6e",
			GenerateName: svc + "-",
			Labels: map[string]string{
				"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
				discoveryv1.LabelServiceName:             svc,
				"app":                                    svc,
			},
			Annotations:       map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-01T12:00:00Z"},
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0)),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "discovery.k8s.io/v1", Time: &metav1.Time{Time: time.Unix(1_700_000_000, 0)}, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:labels":{}},"f:ports":{}}`)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i := range n {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: ptr.To(false)},
			NodeName:   &node, Zone: &zone,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-7d9f8b6c5d-%05d", svc, i), UID: "6f0e4c9a-9f3e-1d2a-3b4c-5d6e0b2c7c1e"},
		})
	}
	return es
}

// encodeProto returns obj in the API server's protobuf form (magic and envelope).
func encodeProto(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPeekMeta(t *testing.T) {
	es := bigSlice("ns1", "web", 3)
	env, err := parseEnvelope(encodeProto(t, es))
	if err != nil {
		t.Fatal(err)
	}
	if env.kind != "EndpointSlice" || env.apiVersion != "discovery.k8s.io/v1" {
		t.Fatalf("envelope %s %s", env.apiVersion, env.kind)
	}
	m, err := peekMeta(env.raw)
	if err != nil {
		t.Fatal(err)
	}
	want := objMeta{name: "web-abcde", namespace: "ns1", resourceVersion: "12345", service: "web"}
	if m != want {
		t.Fatalf("peekMeta = %+v, want %+v", m, want)
	}
}

func TestParseListAndSpecIPs(t *testing.T) {
	l := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "77", Continue: "c1"}}
	l.Items = []corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"}, Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "n"}},
	}
	env, err := parseEnvelope(encodeProto(t, l))
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseList(env.raw)
	if err != nil {
		t.Fatal(err)
	}
	if p.resourceVersion != "77" || p.continueToken != "c1" || p.sharded || len(p.items) != 2 {
		t.Fatalf("parseList = %+v", p)
	}
	ip, ips, err := peekSpecIPs(p.items[0])
	if err != nil || ip != "10.0.0.1" || len(ips) != 2 || ips[1] != "fd00::1" {
		t.Fatalf("peekSpecIPs = %q %q %v", ip, ips, err)
	}
	l.ShardInfo = &metav1.ShardInfo{Selector: "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"}
	env, _ = parseEnvelope(encodeProto(t, l))
	if p, err = parseList(env.raw); err != nil || !p.sharded || p.shardSelector != l.ShardInfo.Selector {
		t.Fatalf("parseList with shardInfo = %+v, %v", p, err)
	}
}

func TestKindsDecode(t *testing.T) {
	es := bigSlice("ns1", "web", 2)
	env, _ := parseEnvelope(encodeProto(t, es))
	lw := &shareLW{kind: endpointSliceKind("")}
	got, err := lw.decode(env.raw, func(string, string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if g, w := got.(*translator.EndpointSlice), translator.SlimEndpointSlice(es); g.Name != w.Name || len(g.Endpoints) != 2 ||
		!reflect.DeepEqual(g.Endpoints, w.Endpoints) || !reflect.DeepEqual(g.Ports, w.Ports) { // (times decode in the local zone)
		t.Fatalf("decoded %+v", g)
	}
	if got, err := lw.decode(env.raw, func(string, string) bool { return false }); got != nil || err != nil {
		t.Fatalf("unwanted slice decoded to %v, %v", got, err)
	}
	svc := &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns1", ResourceVersion: "9"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", ClusterIPs: []string{"10.0.0.9"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	env, _ = parseEnvelope(encodeProto(t, svc))
	lw = &shareLW{kind: serviceKind("")}
	o, err := lw.decode(env.raw, func(string, string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	r := o.(*corev1.Service)
	if !IsClusterIPsOnly(r) || r.Name != "web" || r.ResourceVersion != "9" || r.Spec.ClusterIP != "10.0.0.9" || len(r.Spec.Ports) != 0 {
		t.Fatalf("unwanted Service reduced to %+v", r)
	}
	if s, _ := slimObject(r); s != r {
		t.Fatal("the transform changed a reduced Service")
	}
}

func TestPeekMalformed(t *testing.T) {
	raw := encodeProto(t, bigSlice("ns1", "web", 1))
	for n := range len(raw) {
		// Every prefix either parses or fails with an error; none panics.
		if env, err := parseEnvelope(raw[:n]); err == nil {
			_, _ = peekMeta(env.raw)
		}
	}
	if _, err := parseEnvelope([]byte("{}")); err == nil {
		t.Fatal("JSON taken for protobuf")
	}
}

func FuzzPeek(f *testing.F) {
	f.Add(encodeProto(f, bigSlice("ns1", "web", 2)))
	f.Add(encodeProto(f, &corev1.ServiceList{Items: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}))
	f.Add([]byte("k8s\x00\x12\x05\x0a\x03\x0a\x01a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := parseEnvelope(data)
		if err != nil {
			return
		}
		_, _ = peekMeta(env.raw)
		_, _, _ = peekSpecIPs(env.raw)
		_, _, _ = parseWatchEvent(env.raw)
		if l, err := parseList(env.raw); err == nil {
			for _, it := range l.items {
				_, _ = peekMeta(it)
			}
		}
	})
}

// The decode cost of one 100-endpoint EndpointSlice: what a replica pays for a slice it does
// not own (MetadataOnly), against decoding it whole from protobuf and projecting it (what it
// pays for one it owns) and from JSON (what the informer paid for every slice before).
func BenchmarkSliceDecode(b *testing.B) {
	es := bigSlice("ns1", "web", 100)
	pb := encodeProto(b, es)
	env, _ := parseEnvelope(pb)
	js, _ := json.Marshal(es)
	b.Run("MetadataOnly", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			e, err := parseEnvelope(pb)
			if err != nil {
				b.Fatal(err)
			}
			if m, err := peekMeta(e.raw); err != nil || m.service != "web" {
				b.Fatal(m, err)
			}
		}
	})
	b.Run("FullProtobuf", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(pb)))
		for b.Loop() {
			o := &discoveryv1.EndpointSlice{}
			if err := o.Unmarshal(env.raw); err != nil {
				b.Fatal(err)
			}
			_ = translator.SlimEndpointSlice(o)
		}
	})
	b.Run("FullJSON", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(js)))
		dec := scheme.Codecs.UniversalDeserializer()
		for b.Loop() {
			o, _, err := dec.Decode(js, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = translator.SlimEndpointSlice(o.(*discoveryv1.EndpointSlice))
		}
	})
}

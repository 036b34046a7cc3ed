package feed

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

func optString(r *testutil.FuzzBytes, vals ...string) *string {
	if r.Pick(3) == 0 {
		return nil
	}
	s := vals[r.Pick(len(vals))]
	return &s
}

func optBool(r *testutil.FuzzBytes) *bool {
	switch r.Pick(3) {
	case 0:
		return nil
	case 1:
		b := true
		return &b
	}
	b := false
	return &b
}

// fuzzSlice builds an EndpointSlice using every field of the type, from fuzz bytes.
func fuzzSlice(data []byte) *discoveryv1.EndpointSlice {
	r := testutil.NewFuzzBytes(data)
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: []string{"a", "", "svc-1-0"}[r.Pick(3)], Namespace: []string{"ns", ""}[r.Pick(2)],
			UID: "u-1", ResourceVersion: "42", Generation: int64(r.Pick(5)),
			Labels:          map[string]string{discoveryv1.LabelServiceName: "svc", discoveryv1.LabelManagedBy: "x"},
			Annotations:     map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "svc", UID: "u-2"}},
			Finalizers:      []string{"f"},
		},
		AddressType: []discoveryv1.AddressType{"IPv4", "IPv6", "FQDN", ""}[r.Pick(4)],
	}
	if r.Pick(4) == 0 {
		es.Labels = nil
	}
	for range r.Pick(3) {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: optString(r, "http", ""), Protocol: (*corev1.Protocol)(optString(r, "TCP", "UDP")), Port: func() *int32 {
			if r.Pick(3) == 0 {
				return nil
			}
			p := int32(r.Pick(70000)) - 1
			return &p
		}(), AppProtocol: optString(r, "h2")})
	}
	for range r.Pick(8) {
		ep := discoveryv1.Endpoint{
			Conditions: discoveryv1.EndpointConditions{Ready: optBool(r), Serving: optBool(r), Terminating: optBool(r)},
			Hostname:   optString(r, "h0", ""),
			NodeName:   optString(r, "node-1"),
			Zone:       optString(r, "zone-a", "zone-b", ""),
		}
		for range r.Pick(3) {
			ep.Addresses = append(ep.Addresses, []string{"10.0.0.1", "fd00::1", "", "x"}[r.Pick(4)])
		}
		if r.Pick(3) != 0 {
			ep.TargetRef = &corev1.ObjectReference{Kind: []string{"Pod", "Node", ""}[r.Pick(3)], Namespace: []string{"ns", ""}[r.Pick(2)], Name: fmt.Sprintf("p%d", r.Pick(4)), UID: "u", APIVersion: "v1", ResourceVersion: "1", FieldPath: "f"}
		}
		if r.Pick(4) == 0 {
			ep.DeprecatedTopology = map[string]string{"k": "v"}
		}
		if r.Pick(4) == 0 {
			ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "n"}}}
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	// managedFields, of which the projection keeps the newest entry's manager, operation and
	// time (chosen last, so that the seeds written before keep their meaning).
	times := []*metav1.Time{nil, {Time: time.Unix(1764579600, 0)}, {Time: time.Unix(1764579660, 0)}}
	for i := range r.Pick(4) {
		es.ManagedFields = append(es.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: fmt.Sprintf("m%d", i), Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "discovery.k8s.io/v1",
			Time: times[r.Pick(len(times))], FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:endpoints":{}}`),
		})
	}
	return es
}

// checkSlimDecode checks decodeSlimEndpointSlice against the generated decoder followed by
// translator.SlimEndpointSlice: whatever the one accepts, the other accepts with the same
// result.
func checkSlimDecode(t *testing.T, b []byte, in *interner) {
	t.Helper()
	var full discoveryv1.EndpointSlice
	fullErr := full.Unmarshal(b)
	got, err := decodeSlimEndpointSlice(b, in, nil)
	switch {
	case fullErr == nil && err != nil:
		t.Fatalf("%x: the generated decoder accepts it, decodeSlimEndpointSlice: %v", b, err)
	case fullErr != nil && err == nil:
		t.Fatalf("%x: the generated decoder fails (%v), decodeSlimEndpointSlice accepts it", b, fullErr)
	case err != nil:
		if got != nil {
			t.Fatal("an object with an error")
		}
		return
	}
	if want := translator.SlimEndpointSlice(&full); !reflect.DeepEqual(got, want) {
		t.Fatalf("%x:\n got %+v\nwant %+v", b, got, want)
	}
}

func FuzzSlimEndpointSlice(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte("a longer seed choosing more endpoints, ports and fields of each"), false)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00, 0x12, 0x00}, true)
	f.Add(append(bytes.Repeat([]byte{1}, 60), 3, 1, 2, 0), false) // managedFields with times
	in := newInterner()
	f.Fuzz(func(t *testing.T, data []byte, raw bool) {
		if raw {
			checkSlimDecode(t, data, in)
			return
		}
		b, err := fuzzSlice(data).Marshal()
		if err != nil {
			t.Skip(err)
		}
		checkSlimDecode(t, b, in)
		// Every proper prefix is an error or a valid message, never a panic or a difference.
		for i := range len(b) {
			checkSlimDecode(t, b[:i], nil)
		}
	})
}

func TestSlimEndpointSliceGenerated(t *testing.T) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	for i := range 3 {
		es := c.EndpointSlice(i, 0)
		b, err := es.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		checkSlimDecode(t, b, newInterner())
	}
	// Ready is what decides: a not-ready endpoint is left out.
	es := fuzzSlice(bytes.Repeat([]byte{1, 2}, 40))
	b, _ := es.Marshal()
	checkSlimDecode(t, b, nil)
	// Of managedFields, the newest entry's time is kept, as by translator's projection.
	es = c.EndpointSlice(0, 0)
	older, newer := metav1.NewTime(time.Unix(1764579600, 0)), metav1.NewTime(time.Unix(1764579660, 0))
	es.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "a", Operation: metav1.ManagedFieldsOperationUpdate, Time: &older, FieldsV1: metav1.NewFieldsV1(`{}`)},
		{Manager: "b", Operation: metav1.ManagedFieldsOperationUpdate, Time: &newer, FieldsV1: metav1.NewFieldsV1(`{}`)},
	}
	b, _ = es.Marshal()
	checkSlimDecode(t, b, nil)
	got, err := decodeSlimEndpointSlice(b, nil, nil)
	if err != nil || len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != "b" || !got.ManagedFields[0].Time.Equal(&newer) || got.ManagedFields[0].FieldsV1 != nil {
		t.Fatalf("managedFields decoded as %+v (%v), want the newest entry's time only", got.ManagedFields, err)
	}
}

func BenchmarkSlimDecodeSlice(b *testing.B) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	buf, _ := c.EndpointSlice(0, 0).Marshal()
	in := newInterner()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSlimEndpointSlice(buf, in, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSlimEndpointSliceUnwanted(t *testing.T) {
	c, _ := gen.NewCluster(smallConfig())
	b, _ := c.EndpointSlice(1, 0).Marshal()
	var asked []string
	want := func(ns, svc string) bool { asked = append(asked, ns+"/"+svc); return false }
	es, err := decodeSlimEndpointSlice(b, nil, want)
	if es != nil || err != nil {
		t.Fatalf("unwanted slice: %v, %v", es, err)
	}
	if w := []string{"ns-1/" + gen.ServiceName(1)}; !slices.Equal(asked, w) {
		t.Fatalf("asked about %q, want %q", asked, w)
	}
	// A broken message is an error even when its service is not wanted.
	if _, err := decodeSlimEndpointSlice(b[:len(b)-1], nil, want); err == nil {
		t.Fatal("truncated unwanted slice: no error")
	}
	// A wanted one is decoded.
	es, err = decodeSlimEndpointSlice(b, nil, func(string, string) bool { return true })
	if err != nil || es == nil || len(es.Endpoints) != 100 {
		t.Fatalf("wanted slice: %v, %v", es, err)
	}
}

// BenchmarkGeneratedDecodeSlice is what decodeSlimEndpointSlice replaces: the generated
// decoder, then translator.SlimEndpointSlice. Compare with BenchmarkSlimDecodeSlice.
func BenchmarkGeneratedDecodeSlice(b *testing.B) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	buf, _ := c.EndpointSlice(0, 0).Marshal()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var es discoveryv1.EndpointSlice
		if err := es.Unmarshal(buf); err != nil {
			b.Fatal(err)
		}
		_ = translator.SlimEndpointSlice(&es)
	}
}

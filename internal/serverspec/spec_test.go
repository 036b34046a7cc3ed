package serverspec

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestCheck gives Check a valid Server and one change of it per rule: each invalid one is
// refused with an error that names the field and quotes at most a short prefix. An unknown
// accessPolicy is no reason of Check's (policy/api warns of it: TestUnknownAccessPolicyDenies).
func TestCheck(t *testing.T) {
	valid := func() *Spec {
		port := intstr.FromString("http")
		return &Spec{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Port: &port, ProxyProtocol: "opaque", AccessPolicy: "deny"}
	}
	for _, v := range []string{"", "v1beta3"} {
		if err := Check(v, valid()); err != nil {
			t.Errorf("valid %q: %v", v, err)
		}
	}
	long := strings.Repeat("x", 10_000)
	for _, tc := range []struct {
		name, version, field string
		change               func(*Spec)
	}{
		{"no spec", "", "spec", nil},
		{"an unserved version", "v1beta4", "apiVersion", func(*Spec) {}},
		{"external workloads in v1beta1", "v1beta1", "spec.externalWorkloadSelector", func(s *Spec) {
			s.PodSelector, s.ExternalWorkloadSelector, s.AccessPolicy = nil, &metav1.LabelSelector{}, ""
		}},
		{"an access policy in v1beta2", "v1beta2", "spec.accessPolicy", func(*Spec) {}},
		{"no selector", "", "exactly one of podSelector and externalWorkloadSelector", func(s *Spec) { s.PodSelector = nil }},
		{"both selectors", "", "exactly one of podSelector and externalWorkloadSelector", func(s *Spec) { s.ExternalWorkloadSelector = &metav1.LabelSelector{} }},
		{"an unknown operator", "", "spec.podSelector.matchExpressions[0].operator", func(s *Spec) {
			s.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOperator(long)}}
		}},
		{"an unknown operator of external workloads", "v1beta2", "spec.externalWorkloadSelector.matchExpressions[0].operator", func(s *Spec) {
			s.PodSelector, s.AccessPolicy = nil, ""
			s.ExternalWorkloadSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Gt"}}}
		}},
		{"no port", "", "spec.port", func(s *Spec) { s.Port = nil }},
		{"port 0", "", "spec.port", func(s *Spec) { p := intstr.FromInt32(0); s.Port = &p }},
		{"port 65536", "", "spec.port", func(s *Spec) { p := intstr.FromInt32(65536); s.Port = &p }},
		{"a long port name", "", "spec.port", func(s *Spec) { p := intstr.FromString(long); s.Port = &p }},
		{"a protocol in another case", "", "spec.proxyProtocol", func(s *Spec) { s.ProxyProtocol = "Opaque" }},
		{"a long protocol", "", "spec.proxyProtocol", func(s *Spec) { s.ProxyProtocol = long }},
	} {
		var s *Spec
		if tc.change != nil {
			s = valid()
			tc.change(s)
		}
		err := Check(tc.version, s)
		if err == nil || !strings.Contains(err.Error(), tc.field) || len(err.Error()) > 512 {
			t.Errorf("%s: %.300v; want an error naming %s", tc.name, err, tc.field)
		}
	}
	for _, v := range []string{long, "Deny", "allow"} {
		s := valid()
		s.AccessPolicy = v
		if err := Check("", s); err != nil {
			t.Errorf("access policy %.20s: Check says %v", v, err)
		}
	}
	// The values of each enum are accepted.
	for _, p := range Protocols {
		s := valid()
		s.ProxyProtocol = p
		if err := Check("", s); err != nil {
			t.Errorf("protocol %s: %v", p, err)
		}
	}
	for _, a := range AccessPolicies {
		s := valid()
		s.AccessPolicy = a
		if err := Check("", s); err != nil {
			t.Errorf("access policy %s: %v", a, err)
		}
	}
}

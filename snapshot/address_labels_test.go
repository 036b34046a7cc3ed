package snapshot

import (
	"slices"
	"testing"
)

// TestMetricLabels: an endpoint's metric labels are its Labels with the pod label (its Pod)
// slotted in by key, and none when it has neither.
func TestMetricLabels(t *testing.T) {
	for _, tc := range []struct {
		pod    string
		labels []Label
		want   []Label
	}{
		{"", nil, nil},
		{"web-1", nil, []Label{{LabelPod, "web-1"}}},
		{"", []Label{{"a", "1"}}, []Label{{"a", "1"}}},
		{"web-1", []Label{{"a", "1"}, {"zone", "z"}}, []Label{{"a", "1"}, {LabelPod, "web-1"}, {"zone", "z"}}},
		{"web-1", []Label{{"a", "1"}, {"b", "2"}}, []Label{{"a", "1"}, {"b", "2"}, {LabelPod, "web-1"}}},
		{"web-1", []Label{{"serviceaccount", "sa"}}, []Label{{LabelPod, "web-1"}, {"serviceaccount", "sa"}}},
	} {
		e := &Endpoint{Pod: tc.pod, Labels: tc.labels}
		if got := slices.Collect(e.MetricLabels()); !slices.Equal(got, tc.want) {
			t.Errorf("pod %q labels %v: got %v, want %v", tc.pod, tc.labels, got, tc.want)
		}
		if e.Label(LabelPod) != tc.pod {
			t.Errorf("Label(pod) = %q, want %q", e.Label(LabelPod), tc.pod)
		}
		for l := range e.MetricLabels() { // stopping early: yielding again would panic
			_ = l
			break
		}
	}
}

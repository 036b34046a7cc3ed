package workload

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want Workload
		err  string
	}{
		{in: `{"ns":"shop","pod":"web-0"}`, want: Workload{Namespace: "shop", Pod: "web-0"}},
		{in: `{"ns":"shop", "pod":"web-0", "extra": 1}`, want: Workload{Namespace: "shop", Pod: "web-0"}},
		{in: `{"ns":"shop","external_workload":"vm-1"}`, want: Workload{Namespace: "shop", External: "vm-1"}},
		{in: "shop:web-0", want: Workload{Namespace: "shop", Pod: "web-0"}},
		{in: "shop:web.v2-0", want: Workload{Namespace: "shop", Pod: "web.v2-0"}},
		{in: "", err: "want"},
		{in: "web-0", err: "want"},
		{in: ":web-0", err: "namespace"},
		{in: "shop:", err: "name"},
		{in: "shop:a:b", err: "name"},
		{in: `{"ns":"shop"}`, err: "exactly one"},
		{in: `{"pod":"web-0"}`, err: "missing \"ns\""},
		{in: `{"ns":"shop","pod":"a","external_workload":"b"}`, err: "exactly one"},
		{in: `{"ns":1,"pod":"a"}`, err: "invalid workload"},
		{in: `{"ns":"shop","pod":"a"}{}`, err: "trailing"},
		{in: `{"ns":"Shop","pod":"a"}`, err: "namespace"},
		{in: `{"ns":"shop","pod":"` + strings.Repeat("a", 300) + `"}`, err: "name"},
	}
	for _, tc := range cases {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"ns":"shop","pod":"web-0"}`, "shop:web-0", `{"ns":"a","external_workload":"b"}`, "", ":", "{", `{"ns":null,"pod":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := Parse(s)
		if err != nil {
			return
		}
		if w.Namespace == "" || (w.Pod == "") == (w.External == "") {
			t.Fatalf("Parse(%q) accepted %+v", s, w)
		}
	})
}

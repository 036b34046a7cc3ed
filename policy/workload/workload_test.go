package workload

import (
	"strings"
	"testing"
	"unicode/utf8"
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
	for _, s := range []string{`{"ns":"shop","pod":"web-0"}`, "shop:web-0", `{"ns":"a","external_workload":"b"}`, "", ":", "{", `{"ns":null,"pod":null}`,
		"shop:wéb", "w\xffb:x", strings.Repeat("\x00", 2048), `{"ns":"shop","pod":"` + strings.Repeat("a", 1000) + `"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := Parse(s)
		if err != nil {
			// The message quotes a bounded prefix of the input, in valid UTF-8.
			if msg := err.Error(); len(msg) > 2048 || !utf8.ValidString(msg) {
				t.Fatalf("a %d-byte error (valid UTF-8: %v) for a %d-byte workload", len(msg), utf8.ValidString(msg), len(s))
			}
			return
		}
		if w.Namespace == "" || (w.Pod == "") == (w.External == "") {
			t.Fatalf("Parse(%q) accepted %+v", s, w)
		}
	})
}

package compute

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParsePortSet(t *testing.T) {
	cases := []struct {
		in   string
		want []uint32
		err  bool
	}{
		{in: "", want: nil},
		{in: "25,587, 3306", want: []uint32{25, 587, 3306}},
		{in: "4444-4446", want: []uint32{4444, 4445, 4446}},
		{in: "1-1", want: []uint32{1}},
		{in: "0", err: true},
		{in: "65536", err: true},
		{in: "10-5", err: true},
		{in: "a", err: true},
		{in: "5-", err: true},
		{in: "8080-8082,80,8081-8090,81,79,8091", want: []uint32{79, 80, 81, 8080, 8081, 8082, 8083, 8084, 8085, 8086, 8087, 8088, 8089, 8090, 8091}},
	}
	for _, tc := range cases {
		got, err := ParsePortSet(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParsePortSet(%q) err = %v", tc.in, err)
			continue
		}
		if tc.err {
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParsePortSet(%q) = %v, want %v", tc.in, got, tc.want)
		}
		for _, p := range tc.want {
			if !got.Has(p) {
				t.Errorf("ParsePortSet(%q) lacks %d", tc.in, p)
			}
		}
	}
}

// TestMergeRanges: a port list's ranges are merged before the set is filled, so that a list
// of thousands of "1-65535" (a pod's annotation) fills 65,535 ports once, not once per range.
func TestMergeRanges(t *testing.T) {
	many := make([][2]uint32, 10000)
	for i := range many {
		many[i] = [2]uint32{1, 65535}
	}
	for _, c := range []struct {
		in, want [][2]uint32
	}{
		{many, [][2]uint32{{1, 65535}}},
		{[][2]uint32{{10, 20}, {1, 5}, {6, 8}, {15, 30}, {40, 40}}, [][2]uint32{{1, 8}, {10, 30}, {40, 40}}},
		{nil, nil},
	} {
		if got := mergeRanges(c.in); !slices.Equal(got, c.want) {
			t.Errorf("mergeRanges: %v, want %v", got, c.want)
		}
	}
	// The error for a long list quotes a prefix of it.
	_, err := ParsePortSet(strings.Repeat("1-65535,", 1000) + "x")
	if err == nil || len(err.Error()) > 256 {
		t.Fatalf("error %d bytes long: %.100v", len(fmt.Sprint(err)), err)
	}
	// So do those for one long port and a long default policy.
	_, err = ParsePortSet("80," + strings.Repeat("9", 10_000))
	if err == nil || len(err.Error()) > 256 {
		t.Fatalf("long port: error %d bytes long: %.100v", len(fmt.Sprint(err)), err)
	}
	_, err = ParseDefaultPolicy(strings.Repeat("x", 10_000))
	if err == nil || len(err.Error()) > 256 {
		t.Fatalf("long policy: error %d bytes long: %.100v", len(fmt.Sprint(err)), err)
	}
}

// BenchmarkParsePortSetRepeated parses an annotation-sized list of 32,000 full ranges.
func BenchmarkParsePortSetRepeated(b *testing.B) {
	s := strings.Repeat("1-65535,", 32000)
	for b.Loop() {
		if _, err := ParsePortSet(s); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParsePortSet(f *testing.F) {
	for _, s := range []string{"25,587,3306,4444,5432,6379,9300,11211", "4444-4450", " 1 , 2 ", "0", "65535", "1-65535", "a-b", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParsePortSet(s)
		if err != nil {
			return
		}
		for p := range set {
			if p == 0 || p > 65535 {
				t.Fatalf("ParsePortSet(%q) holds port %d", s, p)
			}
		}
	})
}

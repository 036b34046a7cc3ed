package destclient

import (
	"cmp"
	"slices"
	"testing"
)

type kv struct {
	k int
	v string
}

func byK(a, b kv) int { return cmp.Compare(a.k, b.k) }

func TestMergeSorted(t *testing.T) {
	for _, c := range []struct {
		name           string
		cur, add, want []kv
	}{
		{"both empty", nil, nil, []kv{}},
		{"into nothing", nil, []kv{{1, "a"}}, []kv{{1, "a"}}},
		{"nothing added", []kv{{1, "a"}}, nil, []kv{{1, "a"}}},
		{"interleaved", []kv{{1, "a"}, {4, "d"}}, []kv{{2, "b"}, {3, "c"}, {5, "e"}}, []kv{{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}, {5, "e"}}},
		{"add replaces", []kv{{1, "old"}, {2, "b"}, {3, "old"}}, []kv{{1, "new"}, {3, "new"}}, []kv{{1, "new"}, {2, "b"}, {3, "new"}}},
	} {
		cur, add := slices.Clone(c.cur), slices.Clone(c.add)
		got := MergeSorted(cur, add, byK)
		if !slices.Equal(got, c.want) || cap(got) != len(got) {
			t.Errorf("%s: %v (cap %d), want %v", c.name, got, cap(got), c.want)
		}
		if !slices.Equal(cur, c.cur) || !slices.Equal(add, c.add) {
			t.Errorf("%s: an input was modified", c.name)
		}
	}
}

func TestDedupeLast(t *testing.T) {
	s := []kv{{1, "a"}, {1, "b"}, {2, "c"}, {3, "d"}, {3, "e"}, {3, "f"}}
	got := DedupeLast(s, byK)
	if want := []kv{{1, "b"}, {2, "c"}, {3, "f"}}; !slices.Equal(got, want) {
		t.Errorf("DedupeLast = %v, want %v", got, want)
	}
	if tail := s[len(got):]; !slices.Equal(tail, make([]kv, len(tail))) {
		t.Errorf("the elements past the result are not zeroed: %v", tail)
	}
	if got := DedupeLast([]kv{{1, "a"}}, byK); !slices.Equal(got, []kv{{1, "a"}}) {
		t.Errorf("DedupeLast of one = %v", got)
	}
}

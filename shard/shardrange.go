package shard

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/meridian-mesh/meridian/ring"
)

// maxShardRanges bounds the ranges of a shard selector: the API server parses the selector
// as a CEL expression on every list and watch. A share of more runs of partitions is widened
// by closing the narrowest gaps between them; the replica filters what the wider ranges
// bring as it filters everything.
const maxShardRanges = 64

// partitionStart returns the first hash of partition p of a ring of n partitions (the
// smallest h with PartitionOfHash(h) == p: ceil(p*2^64/n)); p == n gives 2^64, reported as
// top.
func partitionStart(p, n int) (h uint64, top bool) {
	if p >= n {
		return 0, true
	}
	q, _ := bits.Div64(uint64(p), uint64(n-1), uint64(n))
	return q, false
}

// partitionRuns returns the runs [a, b) of consecutive partitions of r for which in is true.
func partitionRuns(r *ring.Ring, in func(p int) bool) [][2]int {
	var runs [][2]int
	for p := 0; p < r.Partitions(); p++ {
		if !in(p) {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][1] == p {
			runs[n-1][1] = p + 1
		} else {
			runs = append(runs, [2]int{p, p + 1})
		}
	}
	return runs
}

// coarsen merges the runs separated by the narrowest gaps until at most max remain.
func coarsen(runs [][2]int, max int) [][2]int {
	for len(runs) > max {
		best := 0
		for i := 1; i+1 < len(runs); i++ {
			if runs[i+1][0]-runs[i][1] < runs[best+1][0]-runs[best][1] {
				best = i
			}
		}
		runs[best][1] = runs[best+1][1]
		runs = append(runs[:best+1], runs[best+2:]...)
	}
	return runs
}

// shardSelector returns the API server's shard selector of the namespaces whose
// NamespaceHash falls in the partitions of r for which in is true: shardRange terms over
// object.metadata.namespace, ORed, at most maxShardRanges of them (a superset when the
// partitions make more runs). It returns "" when in holds for every partition (no selector
// is needed), and a range of the one hash 0 when it holds for none.
func shardSelector(r *ring.Ring, in func(p int) bool) string {
	n := r.Partitions()
	runs := coarsen(partitionRuns(r, in), maxShardRanges)
	switch {
	case len(runs) == 1 && runs[0] == [2]int{0, n}:
		return ""
	case len(runs) == 0:
		return shardTerm(0, 1, false)
	}
	terms := make([]string, len(runs))
	for i, run := range runs {
		lo, _ := partitionStart(run[0], n)
		hi, top := partitionStart(run[1], n)
		terms[i] = shardTerm(lo, hi, top)
	}
	return strings.Join(terms, " || ")
}

// shardTerm is the shardRange of [lo, hi), or [lo, 2^64) when top.
func shardTerm(lo, hi uint64, top bool) string {
	end := fmt.Sprintf("0x%016x", hi)
	if top {
		end = "0x10000000000000000"
	}
	return fmt.Sprintf("shardRange(object.metadata.namespace, '0x%016x', '%s')", lo, end)
}

// ownedSelector is the selector of the namespaces member self owns in r.
func ownedSelector(r *ring.Ring, self string) string {
	return shardSelector(r, func(p int) bool { return r.PartitionOwner(p).Name == self })
}

// gainedSelector is the selector of the namespaces member self owns in cur and did not in
// prev.
func gainedSelector(prev, cur *ring.Ring, self string) string {
	return shardSelector(cur, func(p int) bool {
		return cur.PartitionOwner(p).Name == self && prev.PartitionOwner(p).Name != self
	})
}

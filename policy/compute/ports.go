package compute

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParsePortSet parses a Linkerd port list such as "25,587,3306,4444-4450" (as in
// config.linkerd.io/opaque-ports). Ports are 1-65535; ranges are inclusive, low-high.
// Overlapping and repeated ranges are merged before the set is filled, so that a list costs
// at most one insertion per port whatever its length: a pod's annotation of thousands of
// "1-65535" used to stall the controller's pod events for a minute.
func ParsePortSet(s string) (PortSet, error) {
	var ranges [][2]uint32
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := parsePort(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("port list %q: %w", prefix(s), err)
		}
		to := from
		if isRange {
			if to, err = parsePort(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("port list %q: %w", prefix(s), err)
			}
			if to < from {
				return nil, fmt.Errorf("port list %q: range %s is reversed", prefix(s), prefix(part))
			}
		}
		ranges = append(ranges, [2]uint32{from, to})
	}
	set := PortSet{}
	for _, r := range mergeRanges(ranges) {
		for p := r[0]; p <= r[1]; p++ {
			set[p] = struct{}{}
		}
	}
	return set, nil
}

// prefix is s for an error message: its first 64 bytes at most (this package imports no
// Meridian package, internal/quote included).
func prefix(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

// mergeRanges sorts inclusive ranges and merges those that overlap or touch.
func mergeRanges(rs [][2]uint32) [][2]uint32 {
	slices.SortFunc(rs, func(a, b [2]uint32) int { return cmp.Compare(a[0], b[0]) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

func parsePort(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("invalid port %q: want 1-65535", prefix(s))
	}
	return uint32(n), nil
}

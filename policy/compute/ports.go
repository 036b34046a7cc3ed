package compute

import (
	"fmt"
	"strconv"
	"strings"
)

// ParsePortSet parses a Linkerd port list such as "25,587,3306,4444-4450" (as in
// config.linkerd.io/opaque-ports). Ports are 1-65535; ranges are inclusive, low-high.
func ParsePortSet(s string) (PortSet, error) {
	set := PortSet{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := parsePort(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("port list %q: %w", s, err)
		}
		to := from
		if isRange {
			if to, err = parsePort(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("port list %q: %w", s, err)
			}
			if to < from {
				return nil, fmt.Errorf("port list %q: range %s is reversed", s, part)
			}
		}
		if to-from > 65535 {
			return nil, fmt.Errorf("port list %q: range %s too large", s, part)
		}
		for p := from; p <= to; p++ {
			set[p] = struct{}{}
		}
	}
	return set, nil
}

func parsePort(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("invalid port %q: want 1-65535", s)
	}
	return uint32(n), nil
}

package snapshot

import (
	"net/netip"
	"slices"
)

// Delta takes a client from one address set to another: Add holds endpoints that are new or
// changed, Remove the addresses that are gone. Both are sorted by address.
type Delta struct {
	Add    []*Endpoint
	Remove []netip.AddrPort
	// To is the set the delta leads to; the stream uses it to tell an empty result
	// (NoEndpoints) and whether the service exists. It must not be altered.
	To *AddressSet
	// Version is the version of the snapshot the delta leads to.
	Version uint64
	// Initial marks the first delta of a subscription: the full current state.
	Initial bool
}

// Empty reports whether the delta changes nothing a client holds.
func (d Delta) Empty() bool { return len(d.Add) == 0 && len(d.Remove) == 0 }

// Diff returns the delta from old to new; either may be nil (no endpoints).
func Diff(old, new *AddressSet) Delta {
	d := Delta{To: new}
	if new != nil {
		for a, e := range new.Endpoints {
			if o := old.lookup(a); o == nil || !o.Equal(e) {
				d.Add = append(d.Add, e)
			}
		}
	}
	if old != nil {
		for a := range old.Endpoints {
			if new.lookup(a) == nil {
				d.Remove = append(d.Remove, a)
			}
		}
	}
	slices.SortFunc(d.Add, func(a, b *Endpoint) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(d.Remove, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return d
}

func (s *AddressSet) lookup(a netip.AddrPort) *Endpoint {
	if s == nil {
		return nil
	}
	return s.Endpoints[a]
}

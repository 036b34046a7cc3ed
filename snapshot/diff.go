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

// Diff returns the delta from old to new; either may be nil (no endpoints). Both sets are
// sorted, so it is one merge of the two, in order.
func Diff(old, new *AddressSet) Delta {
	d := Delta{To: new}
	var o, n []*Endpoint
	if old != nil {
		o = old.Endpoints
	}
	if new != nil {
		n = new.Endpoints
	}
	switch {
	case len(o) == 0:
		// Every endpoint is new (a stream's first delta): the set's own sorted slice, clipped
		// so that an append could not write into the set.
		d.Add = slices.Clip(n)
		return d
	case len(n) == 0:
		d.Remove = make([]netip.AddrPort, len(o))
		for i, e := range o {
			d.Remove[i] = e.Addr
		}
		return d
	}
	// The set's labels are every endpoint's: when they change, every endpoint is sent again
	// with them (a client takes an Add of an address it holds as its new metadata).
	relabeled := old != nil && new != nil && !slices.Equal(old.Labels, new.Labels)
	for len(o) > 0 || len(n) > 0 {
		switch {
		case len(n) == 0 || (len(o) > 0 && o[0].Addr.Compare(n[0].Addr) < 0):
			d.Remove = append(d.Remove, o[0].Addr)
			o = o[1:]
		case len(o) == 0 || n[0].Addr.Compare(o[0].Addr) < 0:
			d.Add = append(d.Add, n[0])
			n = n[1:]
		default: // the same address
			if relabeled || !o[0].Equal(n[0]) {
				d.Add = append(d.Add, n[0])
			}
			o, n = o[1:], n[1:]
		}
	}
	return d
}

package destclient

import (
	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// Started reports whether the view has received anything.
func (v *View) Started() bool { return v.Updates > 0 }

// Reconcile takes the first update of a new stream for the same target — the full state the
// new server holds: one Add, or NoEndpoints — and returns the updates that take a client
// holding v to that state, applying them to v. A client that moves between replicas thus sees
// deltas, never a reset: nothing for addresses it already holds unchanged.
func (v *View) Reconcile(full *pb.Update) ([]*pb.Update, error) {
	h := v.held()
	out, err := h.Reconcile(full)
	if err != nil {
		return nil, err
	}
	for _, u := range out {
		if err := v.Apply(u); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// held is the compact form of v.
func (v *View) held() *Held {
	h := &Held{started: v.Started()}
	add := make([]heldEntry, 0, len(v.Addrs))
	for ap, a := range v.Addrs {
		add = append(add, entryOf(wire.KeyOf(ap), fingerprint(a)))
	}
	h.addrs.putAll(add)
	if v.NoEndpoints != nil {
		h.empty, h.exists = true, v.NoEndpoints.GetExists()
	} else {
		h.exists = true
	}
	return h
}

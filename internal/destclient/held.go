package destclient

import (
	"errors"
	"net/netip"
	"slices"
	"sync"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// Held is what a client of one Get stream holds, compactly: each address with a fingerprint
// of its metadata (weight, labels, identity, hints), and whether the last word was
// NoEndpoints. It is what a replica relaying a stream keeps, so that when the stream moves to
// another owner it can send the client the difference only, at a few dozen bytes per address
// instead of the decoded messages. Not safe for concurrent use.
type Held struct {
	addrs   heldSet
	started bool
	empty   bool // the last state was NoEndpoints
	exists  bool
}

// NewHeld returns the state of a client that has received nothing.
func NewHeld() *Held { return &Held{} }

// fingerprint identifies an address's metadata; equal messages give equal fingerprints, and
// the same as wire.Fingerprint of an encoding of the message (ApplyRaw).
func fingerprint(a *pb.WeightedAddr) uint64 {
	b, err := proto.Marshal(a)
	if err != nil {
		return 0
	}
	return wire.Fingerprint(b)
}

// Len returns the number of addresses held.
func (h *Held) Len() int { return h.addrs.len() }

// Started reports whether anything was received.
func (h *Held) Started() bool { return h.started }

// Apply records one update the client received. A Remove of an address not held, or a
// malformed address, is an error.
func (h *Held) Apply(u *pb.Update) error {
	h.started = true
	switch x := u.GetUpdate().(type) {
	case *pb.Update_Add:
		h.empty = false
		h.exists = true
		add := make([]heldEntry, 0, len(x.Add.GetAddrs()))
		for _, a := range x.Add.GetAddrs() {
			ap, err := wire.ToAddrPort(a.GetAddr())
			if err != nil {
				h.addrs.putAll(add)
				return err
			}
			add = append(add, entryOf(wire.KeyOf(ap), fingerprint(a)))
		}
		h.addrs.putAll(add)
	case *pb.Update_Remove:
		keys := make([]wire.AddrKey, 0, len(x.Remove.GetAddrs()))
		for _, a := range x.Remove.GetAddrs() {
			ap, err := wire.ToAddrPort(a)
			if err != nil {
				return err
			}
			keys = append(keys, wire.KeyOf(ap))
		}
		return h.addrs.removeAll(keys)
	case *pb.Update_NoEndpoints:
		h.empty, h.exists = true, x.NoEndpoints.GetExists()
		h.addrs.clear()
	default:
		return errors.New("update of unknown kind")
	}
	return nil
}

// addScratch holds the arrays ApplyRaw gathers an Add's addresses in before putAll takes
// them: a relaying replica applies every first Add it relays, and growing a fresh array
// for each, address by address, was about 7 KiB of garbage per 100-address stream, the
// relay's largest share of a storm's garbage (BenchmarkStorm, relayed).
var addScratch = sync.Pool{New: func() any { return new([]heldEntry) }}

// maxScratch is the largest array (in entries) addScratch keeps.
const maxScratch = 4096

// ApplyRaw is Apply of an encoded update, read without decoding it (wire.ScanUpdate); it
// returns the update's kind. An update that is not canonically encoded is refused with
// wire.ErrNonCanonical before anything is recorded: decode it and Apply it.
func (h *Held) ApplyRaw(b []byte) (wire.UpdateKind, error) {
	scratch := addScratch.Get().(*[]heldEntry)
	add := (*scratch)[:0]
	kept := false // the set took add's array (putAll)
	defer func() {
		if !kept && cap(add) <= maxScratch {
			*scratch = add[:0]
			addScratch.Put(scratch)
		}
	}()
	var remove []wire.AddrKey
	kind, exists, err := wire.ScanUpdate(b, func(k wire.AddrKey, wa []byte) error {
		if wa != nil { // an Add's address
			add = append(add, entryOf(k, wire.Fingerprint(wa)))
		} else {
			remove = append(remove, k)
		}
		return nil
	})
	if err != nil {
		return kind, err
	}
	h.started = true
	switch kind {
	case wire.UpdateAdd:
		h.empty, h.exists = false, true
		kept = h.addrs.putAll(add)
	case wire.UpdateRemove:
		return kind, h.addrs.removeAll(remove)
	case wire.UpdateNoEndpoints:
		h.empty, h.exists = true, exists
		h.addrs.clear()
	case wire.UpdateNone:
		return kind, errors.New("update of unknown kind")
	}
	return kind, nil
}

// Reconcile takes the first update of a new stream for the same target (the full state: one
// Add, or NoEndpoints) and returns the updates that take the client from what it holds to that
// state — nothing for addresses it already holds unchanged — and records them.
func (h *Held) Reconcile(full *pb.Update) ([]*pb.Update, error) {
	var out []*pb.Update
	switch x := full.GetUpdate().(type) {
	case *pb.Update_NoEndpoints:
		exists := x.NoEndpoints.GetExists()
		if !h.started || h.addrs.len() > 0 || !h.empty || h.exists != exists {
			out = append(out, full)
		}
	case *pb.Update_Add:
		next := make(map[wire.AddrKey]struct{}, len(x.Add.GetAddrs()))
		var added []*pb.WeightedAddr
		for _, a := range x.Add.GetAddrs() {
			ap, err := wire.ToAddrPort(a.GetAddr())
			if err != nil {
				return nil, err
			}
			k := wire.KeyOf(ap)
			next[k] = struct{}{}
			if fp, ok := h.addrs.get(k); !ok || fp != fingerprint(a) {
				added = append(added, a)
			}
		}
		var gone []netip.AddrPort
		h.addrs.each(func(k wire.AddrKey) {
			if _, ok := next[k]; !ok {
				gone = append(gone, k.AddrPort())
			}
		})
		if len(gone) > 0 {
			slices.SortFunc(gone, func(a, b netip.AddrPort) int { return a.Compare(b) })
			rm := make([]*pbnet.TcpAddress, len(gone))
			for i, ap := range gone {
				rm[i] = wire.TCPAddr(ap)
			}
			out = append(out, &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: rm}}})
		}
		if len(added) > 0 || h.empty || !h.started {
			out = append(out, &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: added, MetricLabels: x.Add.GetMetricLabels()}}})
		}
	case *pb.Update_Remove:
		return nil, errors.New("a stream's first update must be its full state (Add or NoEndpoints), got Remove")
	default:
		return nil, errors.New("update of unknown kind")
	}
	for _, u := range out {
		if err := h.Apply(u); err != nil {
			return nil, err
		}
	}
	return out, nil
}

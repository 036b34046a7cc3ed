// Package snapshot holds the endpoint state a destination replica serves: one immutable,
// versioned Snapshot per service port, published by atomic pointer swap so that readers take
// it without a lock or an allocation, and the subscriptions that carry deltas from one
// snapshot to the next to the gRPC streams.
//
// An AddressSet holds its endpoints as a slice sorted by address (Lookup by binary search,
// Diff as one merge); an Endpoint keeps what few endpoints have (hostname, zone hints,
// authority override) behind one shared pointer, Rare. A replica holds one Endpoint per
// address it serves, so their size is most of its heap.
//
// A key names a service port as one kind of client sees it (Key.View: streams whose clients
// see the same endpoints share a key). Writers build the next AddressSet copy-on-write (never
// mutating a published one) and call Store.Publish, or PublishShared with a DiffCache when
// they publish one set to several keys, which then compare and diff it once. Each Subscription has a bounded queue of deltas; when the queue is full the
// queued deltas are discarded and the subscription is marked to resynchronise, so that its
// next delta is the diff between the last snapshot it delivered and the newest one: nothing is
// dropped, nothing is closed, and a subscriber that never reads costs bounded memory.
//
// Diff lives here rather than in translator because resynchronisation needs it and this
// package must not import translator.
//
// It imports the standard library and puzpuzpuz/xsync only; it must not import
// `github.com/meridian-mesh/meridian/...`, `google.golang.org/grpc/...` or `k8s.io/...`.
//
// Allowed imports: `std`, `github.com/puzpuzpuz/xsync/v3`.
package snapshot

// Package translator turns Kubernetes objects into what the Destination API serves: a
// Service, its EndpointSlices and the Pods behind them become the snapshot.AddressSet of one
// service port (AddressSet), with Linkerd's identity, protocol-hint, opaque-port and
// metric-label rules. It also parses what clients send (ParseAuthority for the Get/GetProfile
// path, ParseContextToken for the context token) and the port-list annotations
// (ParsePortList, IsOpaque, IsOpaqueService, IsSkippedInbound), and trims objects to what it
// reads (SlimPod, SlimEndpointSlice, SlimService) so that a replica keeps little per object.
//
// Everything here is a pure function of its arguments: no I/O, no goroutines, no clocks, no
// global state. Inputs are never modified; outputs share no memory with inputs except strings.
// That keeps it deterministic, fuzzable and safe to call from informer callbacks.
//
// It owns the translation rules and nothing else: the diff of two address sets lives in
// snapshot (snapshot.Diff), storage and streaming in snapshot and shard.
//
// It imports the standard library, snapshot, and the Kubernetes API types (k8s.io/api,
// k8s.io/apimachinery). It must not import client-go (no clients, informers or listers), gRPC,
// or any server package: `k8s.io/client-go/...`, `google.golang.org/grpc/...`, `shard/...`,
// `policy/...`, `identity/...`, `injector/...`, `ring`, `bench/...`, `cmd/...`.
package translator

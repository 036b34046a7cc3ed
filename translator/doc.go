// Package translator turns Kubernetes objects into what the Destination API serves: a
// Service, its EndpointSlices, the Pods behind them and the Servers of its namespace become
// the snapshot.AddressSet of one service port (AddressSet, AddressSetReusing), with Linkerd's
// identity, protocol-hint, opaque-port (annotations, defaults and Servers: ServerOpaque),
// multicluster mirror (mirror.go) and metric-label rules; View derives what one client sees of
// such a set from its locality (Client: node and zone): the internalTrafficPolicy Local and
// zone-hint filters, the IPv4/IPv6 choice, zone_locality and zone weights. For GetProfile by IP
// it gives a pod's endpoint (PodEndpoint) and the addresses Services and pods are found by
// (ClusterIPs, PodIPs). It also parses what clients send (ParseAuthority and
// ParseIPAuthority for the Get/GetProfile path, ParseContextToken for the context token) and
// the port-list annotations (ParsePortList, IsOpaque, IsOpaqueService, IsSkippedInbound).
//
// It owns the projection: the one definition of what the destination keeps of a Service, an
// EndpointSlice and a Pod, which is what this package reads plus identity and the newest
// managedFields time (see slim.go for the field list of each kind). A Service's projection
// is an object of its API type; Project and ProjectService apply it without copying what is
// projected already (IsSlimService); SlimService always copies. An EndpointSlice's projection
// is a type of its own, EndpointSlice (slice.go): an endpoint in 40 bytes, its address parsed,
// made by SlimEndpointSlice, and it is what AddressSet reads. So is a Pod's, Pod (pod.go): 192
// bytes, made by SlimPod, sharing what pods repeat (label maps, StringMap; names of namespaces,
// nodes, service accounts, owners and ports) through weak intern tables (intern.go), so that
// a cluster's pods cost each replica a few hundred bytes apiece. The Kubernetes source's informer transform, the index (for what every
// source delivers) and the bench feed's decoder all use it. The projections of a Node (ProjectNode:
// its name and zone) and of a policy.linkerd.io Server (ProjectServer: a Server type of its
// own, from the ServerObject decoded) are defined here too; whether a Server is valid is
// internal/serverspec's Check, the policy controller's check too.
//
// Everything here is a pure function of its arguments: no I/O, no goroutines, no clocks, no
// global state but the intern tables, which are invisible to callers (an interned value equals
// the one given, and goes when nothing holds it). Inputs are never modified; outputs share no memory with inputs except strings
// (and the Project functions, which return an input that is a projection already as it is).
// That keeps it deterministic, fuzzable and safe to call from informer callbacks.
//
// It owns the translation rules and the projection, and nothing else: the diff of two address sets lives in
// snapshot (snapshot.Diff), storage and streaming in snapshot and shard.
//
// It imports the standard library, snapshot, internal/quote (for the input its errors show),
// internal/serverspec (the Server's spec and its check) and the Kubernetes API types (k8s.io/api, k8s.io/apimachinery). It must not import client-go (no clients, informers or listers), gRPC,
// or any server package: `k8s.io/client-go/...`, `google.golang.org/grpc/...`, `shard/...`,
// `policy/...`, `identity/...`, `injector/...`, `ring`, `bench/...`, `cmd/...`.
//
// Allowed imports: `std`, `snapshot`, `internal/quote`, `internal/serverspec`, `k8s.io/api/...`, `k8s.io/apimachinery/...`.
package translator

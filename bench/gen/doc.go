// Package gen generates the bench harness's synthetic cluster deterministically from a
// Config: Services (port 80 -> 8080, named "http"), their EndpointSlices (at most
// MaxSliceEndpoints endpoints each, labelled kubernetes.io/service-name) and the Pods behind
// them. Pods are never stored: Pod synthesizes one from its name alone (the name encodes the
// pod's serial number, from which its IP follows), so neither the driver nor a replica has to
// keep a million of them.
//
// Cluster is the one mutable copy of the truth, kept compactly (a serial number and a ready
// bit per endpoint); Apply makes one churn change at a time and returns the slice it touched.
//
// Addresses are data only: pods get 10.0.0.0/8 addresses (serial number as the low 24 bits),
// Services fd00:96::/64 cluster IPs; nothing ever connects to them.
//
// It imports the Kubernetes API types, xxhash and the standard library; it must not import
// `shard/...`, `bench/feed`, `google.golang.org/grpc/...` or anything that does I/O.
package gen

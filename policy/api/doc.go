// Package api holds Linkerd's policy.linkerd.io resources as Go types (Server v1beta1-v1beta3,
// AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication v1alpha1,
// ServerAuthorization v1beta1) and converts them, and Pods, into the validated model of
// package compute.
//
// A Server's validity is internal/serverspec's Check; the destination applies the same check
// but for accessPolicy's value (CheckSelection), so a Server it refuses is refused here too. Conversion is where malformed objects stop: everything the CRD schemas in the chart's crds/
// reject is rejected here too (so a manifest directory, which no API server validates, gets
// the same treatment), with an error naming the field. It is pure: no I/O, no clients.
//
// It may import compute, internal/quote, internal/serverspec and Kubernetes API types; it must not import client-go clients, the
// gRPC servers, or the policy controller: `k8s.io/client-go/...`, `internal/grpcserver`,
// `policy`.
package api

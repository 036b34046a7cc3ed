// Package api holds Linkerd's policy.linkerd.io resources as Go types (Server v1beta1-v1beta3,
// AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication v1alpha1,
// ServerAuthorization v1beta1) and converts them, and Pods, into the validated model of
// package compute.
//
// A Server's validity is internal/serverspec's Check, which the destination applies too, so a
// Server it refuses is refused here too. Conversion is where malformed objects stop:
// everything the CRD schemas in the chart's crds/ reject is rejected here too (so a manifest
// directory, which no API server validates, gets the same treatment), with an error naming
// the field. Two kinds of value are not refused but reported (Resource.Warnings), and the
// object is converted without them, never wider than it meant:
//   - a Server's accessPolicy none of Linkerd's: the Server denies by default, as Linkerd's
//     policy controller indexes it;
//   - a Pod's policy annotations that do not parse: its opaque-ports list is ignored, as in
//     Linkerd; its default-inbound-policy and require-identity ports fail closed, where
//     Linkerd's controller falls back to wider defaults: deny (the injector gives its proxy
//     the same) and every port requiring identity.
//
// It is pure: no I/O, no clients.
//
// It may import compute, internal/quote, internal/serverspec and Kubernetes API types; it must not import client-go clients, the
// gRPC servers, or the policy controller: `k8s.io/client-go/...`, `internal/grpcserver`,
// `policy`.
package api

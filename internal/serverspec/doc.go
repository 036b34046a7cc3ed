// Package serverspec holds Linkerd's policy.linkerd.io Server as written (its spec, v1beta1
// to v1beta3) and the one judgement of which Servers are valid: Check, which the policy
// controller (policy/api) applies, and CheckSelection, the same but for accessPolicy's value,
// which the destination (translator.ProjectServer) applies. So a Server the destination
// refuses is refused by the policy controller too, and the other way round but for a bad
// accessPolicy (which decides no port's opacity; Linkerd's destination ignores it). It checks
// what the CRD's schema checks (for manifest directories, which no API server validates),
// with errors that quote at most a short prefix of a bad value.
//
// It owns the Server's spec type and its validity; what each component makes of a valid
// Server (the destination's projection, the policy controller's model) stays with it.
//
// It is pure (no I/O, no state). It imports the standard library, internal/quote and the
// Kubernetes API machinery types; it must not import client-go or any server package:
// `k8s.io/client-go/...`, `shard/...`, `policy/...`, `translator/...`, `identity/...`,
// `injector/...`, `proxy/...`, `bench/...`, `cmd/...`.
//
// Allowed imports: `std`, `internal/quote`, `k8s.io/apimachinery/...`.
package serverspec

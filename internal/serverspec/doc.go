// Package serverspec holds Linkerd's policy.linkerd.io Server as written (its spec, v1beta1
// to v1beta3) and the one judgement of which Servers are valid: Check, which the destination
// (translator.ProjectServer) and the policy controller (policy/api) both apply, so a Server
// one refuses is refused by the other too. It checks what the CRD's schema checks (for
// manifest directories, which no API server validates), with errors that quote at most a
// short prefix of a bad value. An accessPolicy none of Linkerd's leaves the Server valid, as
// it does in Linkerd: the policy controller warns and denies by default, the destination
// ignores the field.
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

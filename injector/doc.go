// Package injector adds the Meridian (Linkerd-compatible) proxy to pods.
//
// It owns three layers, from pure to effectful:
//
//   - The decision and the transform (decide.go, values.go, mutation.go, patch.go): pure
//     functions from a namespace's metadata and a pod (or pod template) to a Decision (inject
//     or skip, with Linkerd's skip reason), the effective proxy Values after the
//     config.linkerd.io/* overrides (namespace annotations flow down to pods, and those the
//     pod lacks are copied onto it, NamespaceCopied; an invalid override is ignored with a
//     Warning, never a skip: fallback.go; but default-inbound-policy fails closed, deny), a
//     Mutation
//     (the containers, volumes, labels and annotations to add) and an RFC 6902 JSON patch
//     that performs it. No I/O, no goroutines.
//   - The admission webhook (webhook.go, namespaces.go, metrics.go, certs.go, server.go): an
//     http.Handler that reads an admission.k8s.io/v1 AdmissionReview and answers with the
//     patch, a NamespaceLookup seam (client-go GET or a static map), the
//     proxy_inject_admission_* counters, and an HTTPS server whose keypair is reloaded from
//     files when they change.
//   - The ServiceProfile validating webhook (validate.go), Linkerd's sp-validator, on the same
//     server at ServiceProfilePath: it refuses a linkerd.io ServiceProfile that
//     translator.ValidateServiceProfile refuses (Handler routes the two).
//   - The manifest transform behind `meridian inject` (manifest.go): multi-document YAML in,
//     annotated or fully injected YAML out.
//
// The capture init container's iptables rules live in the subpackage proxyinit.
//
// This package must not import any other Meridian server package (`shard/...`, `policy/...`,
// `identity/...`, `proxy/...`, `bench/...`) nor `cmd/...`; it may import internal/*.
package injector

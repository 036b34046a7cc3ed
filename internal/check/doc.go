// Package check is `meridian check`: it inspects an installed control plane through the API
// server, as `linkerd check` does, and says for each check what is wrong and what to do.
//
// The checks run in order: the API server is reachable; the control-plane namespace exists;
// the chart's CRDs are installed, established, and the same as this release's (their
// versions' schemas: helm upgrade does not update crds/); every control-plane workload has all its
// pods ready; every destination replica sees the same ring, made of the StatefulSet's pods,
// and every service has exactly one owner (each replica's admin /ring and its
// destination_owned_services gauge, fetched through the API server's pod proxy, or from the
// pod IP when the API server refuses to proxy to it); the trust anchors and the issuer chain
// and neither expires within the minimum validity (60 days); the webhook's serving certificate
// is signed by the caBundle of its MutatingWebhookConfiguration and valid as long; and the CLI
// runs the control plane's version. A check that cannot run because an earlier one failed is
// reported as skipped.
//
// It owns the checks and their report (text with ✓/× lines, or JSON). It reads the chart's
// names (Services, Secrets, the CRDs of the embedded chart) but renders nothing. It
// must not import the servers: `shard/...`, `policy/...`, `identity/...`, `injector/...`,
// `proxy/...`, `bench/...` or `cmd/...`.
package check

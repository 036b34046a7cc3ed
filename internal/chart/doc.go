// Package chart renders the Helm chart embedded in the binary (deploy/charts, package charts)
// through Helm's Go library (helm.sh/helm/v3), as `helm template` would: the chart's
// values.yaml, then values-ha.yaml when asked for, then generated and user values files and
// --set assignments, checked against values.schema.json, rendered offline (`lookup` finds
// nothing) or against the API server the caller gives (`lookup` reads it, as helm install
// does), and sorted in Helm's install order with the CRDs first.
//
// It owns the merge order of values and the shape of the output of `meridian install`. It
// talks to a cluster only through Helm's lookup, and generates no key material (cmd/meridian passes the identity
// values it generated). It must not import the servers: `shard/...`, `policy/...`,
// `identity/...`, `injector/...`, `proxy/...`, `bench/...` or `cmd/...`.
package chart

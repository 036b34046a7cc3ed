// Package source delivers the Kubernetes objects a destination replica serves (Services,
// EndpointSlices, Pods) to a Handler, from one of two implementations: Kubernetes, with
// client-go shared informers, and Dir, which reads Kubernetes YAML from a local directory and
// follows its changes (the demo and tests use it). The bench harness adds a synthetic one.
//
// A source keeps no endpoint state of its own beyond what its informers need; translation and
// snapshots belong to the translator and snapshot packages. It must not import shard.
package source

// Package source delivers the Kubernetes objects a destination replica serves (Services,
// EndpointSlices, Pods, and to handlers that implement NodeHandler and ServerHandler, Nodes
// and policy.linkerd.io Servers) to a Handler, from one of two implementations:
//
//   - Kubernetes: client-go shared informers (no periodic resync; Nodes through a metadata
//     informer, Servers through a dynamic one when their CRD is served) with a transform that
//     replaces each object by translator's projection before it is cached, and the informer lag
//     histograms services_informer_lag_seconds, endpointslices_informer_lag_seconds,
//     pods_informer_lag_seconds and servers_informer_lag_seconds. The API server is found by
//     internal/kube (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config). For a handler
//     that is a ServiceFilter, Services and EndpointSlices are read as protobuf by the
//     source's own list/watch, which decodes in full only what the filter admits (ShareLoader
//     loads a gained share and releases a lost one; for a NamespaceSharder it also sends the
//     API server's shard selector, ShardedListAndWatch, while the server echoes it). For one
//     that is also a PodFilter, the source keeps only the pods it wants and is its PodLoader
//     (pods.go; its filtered list/watch in podwatch.go): a pod the handler starts needing is
//     read again, from the copy the watch dropped lately (recent.go) or with a GET.
//   - Dir: Kubernetes YAML or JSON read from a local directory through internal/manifest
//     (multi-document files and Lists; file notifications plus a periodic rescan),
//     delivering only differences. Malformed files are reported as file:line: reason
//     (Dir.Errors and Warnings, manifest_errors, a warn log once) and leave what they last
//     held in place. The demo (`make run`, on deploy/examples) and tests use it.
//
// The bench harness adds a synthetic one. Handlers are called without blocking the source's
// goroutines for long: see Handler.
//
// It owns the kind decoders of Dir (strict decoding, validation and defaulting of Services,
// EndpointSlices, Pods, Nodes and Servers; reading and following the files is internal/manifest's), and
// the informers' lifecycle for Kubernetes. A source keeps no endpoint state of its own beyond what its
// informers (or, for Dir, the last good version of each file) need; translation and
// snapshots belong to the translator and snapshot packages. It imports translator only for
// the projection of objects (translator.Project), and internal/serverspec for the Server's
// group and versions. It must not import `shard` or
// `bench/...`, nor anything under `cmd/...`.
package source

// Package kubeenv runs a real kube-apiserver and its etcd as child processes on 127.0.0.1:
// the binaries `make kube-bin` builds (hack/kube-bin.sh, into .cache/kube/<KubeVersion>/bin;
// KUBEBUILDER_ASSETS overrides the directory). It is production code, for the bench harness
// (`meridian bench --source kubernetes`), and the one way tests start an API server too
// (internal/kubetest wraps it), so that both run it with the same flags.
//
// Start generates the certificates (a serving CA and certificate, a client CA and an admin
// client certificate in system:masters, the ServiceAccount signing key), starts etcd and then
// the API server, waits for /readyz, installs the CustomResourceDefinitions it is given and
// waits until they are served; Env.Config is an admin client configuration and
// WriteKubeconfig writes it for other processes. The API server runs with the ServiceAccount
// admission plugin off and no controller-manager (nothing creates default ServiceAccounts,
// garbage-collects or finishes deleting namespaces) and with --feature-gates from the Config.
//
// An Env owns its two processes and its directory (certificates, etcd's data, the logs
// etcd.log and kube-apiserver.log, which a failed start quotes): Stop ends them (SIGTERM,
// SIGKILL after the stop timeout) and removes it. internal/child runs them: in process
// groups of their own, and killed by the kernel when this process dies (Linux: Pdeathsig),
// so no API server outlives the program that started it.
//
// It imports client-go, apimachinery, the apiextensions client, the standard library and
// internal/child (which runs the two processes), and nothing else of Meridian's; it must not
// import the mesh's components: `shard/...`, `ring/...`, `translator/...`, `identity/...`,
// `policy/...`, `injector/...`, `proxy/...`, `bench/...`, `cmd/...`.
//
// Allowed imports: `std`, `k8s.io/...`, `sigs.k8s.io/yaml`, `internal/child`.
package kubeenv

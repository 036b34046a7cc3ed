// Package e2e is test-only: the end-to-end tests of the assembled data plane (issue 13's
// "Done when"). Its tests start the whole mesh over real sockets: the identity service with
// local tokens, a ring of destination replicas in redirect mode (transport-header mode) on a
// directory of Kubernetes YAML, the policy controller on the same directory, applications
// on loopback pod addresses (127.x.y.z) and a proxy (package proxy) in front of each, and
// drive traffic through a client proxy: as an explicit HTTP proxy and with CONNECT on one
// machine, and transparently behind `meridian proxy-init`'s iptables rules in network
// namespaces the test creates (Linux, root, ip and iptables), with `meridian proxy`
// processes.
//
// It holds no code but its tests; nothing imports it, and it must not import `cmd/...`
// (its tests run the command as a built binary).
package e2e

// Package proxyinit sets up a meshed pod's traffic capture: the iptables nat rules that
// send inbound TCP to the proxy's inbound port (4143) and outbound TCP to its outbound port
// (4140), as Linkerd's proxy-init does, with the same chain names (PROXY_INIT_REDIRECT,
// PROXY_INIT_OUTPUT) so existing tooling recognises them.
//
// Rules is pure: Config in, iptables-restore input out. Apply is the thin effectful layer
// that runs iptables-save/iptables-restore through a Runner (exec by default; tests wrap it
// in `ip netns exec`). `meridian proxy-init` is the capture init container's entry point.
//
// Order matters and is fixed: in PROXY_INIT_OUTPUT the proxy's own traffic (its UID, and
// GID when set) and loopback RETURN before anything can redirect, then the skipped ports and
// subnets RETURN, then everything else is redirected; a bypass placed after the redirect
// would loop the proxy's traffic back into itself.
//
// This package imports only the standard library; it must not import the injector or any
// Kubernetes package: `injector`, `k8s.io/...`, `sigs.k8s.io/...`.
//
// Allowed imports: `std`.
package proxyinit

// Package proxy assembles Meridian's data plane, `meridian proxy`, from its parts: the
// identity client (a certificate from the identity service, renewed at 70% of its life), the
// mTLS configurations (internal/tlsid), the Destination client (proxy/discovery), the inbound
// proxy (proxy/inbound, with inbound policy) and the outbound proxy (proxy/outbound), all run
// in one run.Group whose readiness waits for the first certificate, as linkerd2-proxy's
// /ready does.
//
// Its configuration is proxy/config (the LINKERD2_PROXY_* environment). A control-plane
// service whose *_SVC_NAME is set is reached over mTLS verifying that identity; one without
// it in plaintext (the local mesh and tests). On one machine (the inbound listener on a
// loopback address, the pod's) the application is reached at that address and the outbound
// side connects to its peers from it, so that their inbound policy sees the pod rather than
// 127.0.0.1, which Linkerd's inbound policy always allows.
//
// New opens nothing; Add puts the components in a group: identity, discovery, inbound,
// outbound, and the control-plane connections, which are closed once the components using
// them have stopped. Serve runs them as the process does: in an internal/serve process with
// its admin server. Command is the whole process (environment, flags, log, Serve), shared
// by `meridian proxy` and `meridian-proxy` (cmd/meridian-proxy, the proxy built alone). The
// end-to-end tests of the assembly are in proxy/e2e.
//
// It owns the control-plane connections and the components it builds. It imports
// identity/client, the proxy/* packages, internal/run, internal/serve, internal/logging and the generated
// API; it must not import `shard/...`, `policy/...`, `identity`, `injector/...`,
// `bench/...` or `cmd/...`.
package proxy

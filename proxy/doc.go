// Package proxy assembles Meridian's data plane, `meridian proxy`, from its parts: the
// identity client (a certificate from the identity service, renewed at 70% of its life), the
// mTLS configurations (proxy/tlsid), the Destination client (proxy/discovery), the inbound
// proxy (proxy/inbound, with inbound policy) and the outbound proxy (proxy/outbound), all run
// in one run.Group whose readiness waits for the first certificate, as linkerd2-proxy's
// /ready does.
//
// Its configuration is proxy/config (the LINKERD2_PROXY_* environment). A control-plane
// service whose *_SVC_NAME is set is reached over mTLS verifying that identity; one without
// it in plaintext (the local mesh and tests).
//
// It owns the control-plane connections and the components it builds. It imports
// identity/client, the proxy/* packages, internal/run and the generated API; it must not
// import `shard/...`, `policy/...`, `identity`, `injector/...`, `bench/...` or `cmd/...`.
package proxy

// Package cptls is the control plane's mTLS, one copy for every Meridian server (destination,
// policy, identity): where a server's own certificate comes from, and the gRPC credentials
// made of it.
//
// A destination replica or the policy controller gets its certificate from the identity
// service with the renewing client a proxy uses (identity/client): its ServiceAccount token
// (a projected token, audience identity.l5d.io, read before every Certify), the identity
// Linkerd gives its ServiceAccount (linkerd-destination.NS.serviceaccount.identity.NS.TD),
// and a TLS connection to the identity service that verifies the identity service's own name
// against the trust anchors (New). The identity service issues its own certificate from its
// issuer (identity.ServingCert) and hands it in (NewSelfIssued). Either way an Identity gives
// the credentials to serve with (ServerCredentials: a client certificate required, for the
// destination and policy APIs that only proxies and replicas call, or verified when given,
// for identity, whose callers have none yet), the credentials to call a peer whose identity
// is known (ClientCredentials: a replica relaying to another checks that it is a destination
// replica), readiness (the server is ready once it holds its certificate) and, with
// Config.Plaintext (the local mesh and tests only), plaintext everywhere and a warning that
// says so in the log and in /ready.
//
// It owns the Identity's connection to the identity service and the renewal goroutine (Run).
// It imports identity/client, internal/tlsid, grpc and zap; it must not import the identity
// server or any other component: `identity`, `shard/...`, `policy/...`, `injector/...`,
// `proxy/...`, `bench/...`, `cmd/...`.
package cptls

// Package identity is Meridian's mesh certificate authority: the server side of Linkerd's
// io.linkerd.proxy.identity.Identity/Certify (linkerd2-proxy-api v0.20.0).
//
// A proxy sends the identity it wants (a DNS-like name), its ServiceAccount token and a DER
// CSR. The Service checks, in Linkerd's order and with Linkerd's status codes except for
// the token's (Unauthenticated, which the hardening issue asked for, where Linkerd answers
// InvalidArgument and FailedPrecondition):
//
//	issuer not loaded                                   -> Unavailable
//	missing identity, token or CSR; unparsable CSR;
//	CSR signature does not verify                       -> InvalidArgument
//	CSR not exactly one DNS SAN equal to the identity,
//	CN neither empty nor the identity, other SANs,
//	key not ECDSA P-256                                 -> FailedPrecondition
//	token review reports an error about the token,
//	token not authenticated                             -> Unauthenticated
//	reviewed user not system:serviceaccount:NS:SA       -> FailedPrecondition
//	SA.NS.serviceaccount.identity.CPNS.TRUSTDOMAIN
//	differs from the requested identity                 -> FailedPrecondition
//	the reviewer itself cannot be reached               -> Unavailable
//
// and then signs an ECDSA leaf with the issuer key (server and client auth, NotBefore now
// minus the clock-skew allowance, NotAfter now plus the lifetime, never past the issuer
// chain), returning the leaf, the issuer chain and valid_until.
//
// What it owns: the current Issuer (an immutable value swapped atomically on reload), the
// issuer reload loop (files watched with fsnotify, or the Kubernetes Secret and ConfigMap
// watched through the API, both also polled), the token reviewers (Kubernetes TokenReview, and LocalReviewer for the
// local mesh with tokens minted by MintLocalToken), the identity_* metrics, and the
// generation of a new trust anchor and issuer (GenerateInstall, behind `meridian identity
// init`). The trust anchor's private key is never needed to serve.
//
// It also issues its own serving certificate (ServingCert): a leaf for the identity service's
// identity signed by the current issuer without a Certify call, re-issued at 70% of its life
// and whenever the issuer changes (IssuerUpdates), with which cmd/meridian serves Certify over
// TLS (internal/cptls).
//
// The renewing client used by proxies lives in identity/client.
//
// It imports the generated Linkerd API, grpc, client-go, zap, Prometheus, internal/metrics,
// internal/filewatch and internal/tlsid (PEM certificates); it must not import `cmd/...`,
// `shard/...`, `proxy/...`, `policy/...`, `injector/...` or `bench/...`.
package identity

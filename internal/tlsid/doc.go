// Package tlsid is the mesh's mTLS, shared by the proxy and the control plane: the
// tls.Configs with which one originates TLS to a meshed peer (TLS 1.3 only, presenting its
// own certificate, accepting only a peer whose certificate chains to the trust anchors and
// names the identity discovery gave for it) and terminates TLS from one (asking for a client
// certificate and verifying it when given, or, for the control plane's destination and
// policy APIs, requiring one), the identity a verified peer proved, and the parsing of a
// trust anchor bundle (and the stricter check of one that goes into meshed pods' specs,
// TrustAnchorBundle).
//
// Identities are Linkerd's DNS-like names
// (web.shop.serviceaccount.identity.linkerd.cluster.local); a certificate proves one when a
// DNS SAN equals it. The own certificate comes from Certs, which the renewing identity
// client (identity/client) and the identity service's self-issued certificate implement; a
// renewed certificate is used by the next handshake.
//
// It owns no goroutines and no I/O. It imports the standard library and internal/quote (a
// certificate's parse error can quote a whole SAN: it is cut short); it must not import any
// other Meridian package: `identity/...`, `proxy/...`, `shard/...`, `policy/...`,
// `injector/...`, `cmd/...`.
//
// Allowed imports: `std`, `internal/quote`.
package tlsid

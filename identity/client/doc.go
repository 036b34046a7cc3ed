// Package client is the proxy side of Meridian's identity: it keeps a workload certificate
// for one identity, obtained from io.linkerd.proxy.identity.Identity/Certify and renewed
// before it expires.
//
// It generates its ECDSA P-256 key and CSR in the process (the key never leaves it and is
// reused for every renewal), calls Certify with the current ServiceAccount token, checks
// the answer (the leaf carries our key and exactly our identity as its one DNS name, is no
// CA and, when trust anchors are given, chains to them), and holds the certificate in memory behind GetCertificate and
// GetClientCertificate for tls.Config. It renews at 70% of the remaining validity, clamped
// between a minimum and a maximum refresh interval, and retries failures with capped
// exponential backoff and jitter.
//
// It owns the key, the current certificate and the renewal goroutine (Run). It imports the
// generated Linkerd identity API, grpc, zap and internal/quote; it must not import the identity server
// package or any other Meridian server package (`identity`, `shard/...`, `policy/...`,
// `injector/...`, `bench/...`, `cmd/...`), so the proxy can use it alone.
package client

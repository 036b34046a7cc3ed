// Package proxytest is test-only: what the data plane's tests share (proxy/inbound,
// proxy/outbound, proxy/discovery, proxy/e2e). It holds the tlsid configuration of a workload
// from a test PKI (TLS), applications on loopback (ServeHTTP and Serve: net/http servers
// stopped and waited for when the test ends; Scripted: an HTTP/1.1 server answering raw bytes
// and recording what it read; RawServer: a benchmark upstream that allocates nothing per
// request), the client side of raw HTTP/1.1 (Exchange, ReadRawResponse, BenchRaw, Dial, Body),
// BenchGet (BenchRaw's measure for a net/http client), one check both proxies' lean HTTP/1.1
// paths pass (ResponseFramings and CheckResponseFramings: the framings of responses), the
// responses they refuse to relay (ResponseFailures, and CompleteResponse to see a client's
// connection cut, ChunkedCut to see it cut before a body's last chunk), GetAsync (a GET whose
// result arrives on a channel), Gathered (a sum of Prometheus series by labels), RecordFound
// (what a proxy's rawio.Ordinary found), and Meridian's policy controller in process
// (NewPolicyIndex, ApplyPolicy, ServePolicy).
//
// It owns nothing beyond a test: every server stops and is waited for when its test ends.
// It imports internal/testutil, internal/tlsid, proxy/transportheader, the policy
// controller (policy, policy/compute), the proxy API, grpc, zap, the Prometheus client and
// the standard library; it must not import `proxy`, `proxy/inbound/...`,
// `proxy/outbound/...`, `proxy/discovery/...`, `shard/...`, `identity/...`, `bench/...` or
// `cmd/...` (the packages whose tests use it, and of the control plane all but the policy
// controller).
package proxytest

// Package dataplane is the data-plane benchmark (`meridian bench proxy`): it measures the
// latency that a pair of Meridian proxies adds to HTTP/1.1 and gRPC (HTTP/2) traffic at a
// constant request rate, against direct client-to-application traffic and against a pair
// of nginx reverse proxies on the same loopback path, all in one run, and reports the
// proxies' memory and allocations per request.
//
// # What runs
//
// Everything listens on one loopback /24 picked at random (127.X.Y.0): a real control plane
// (`meridian identity` with local tokens from `identity init`, one `meridian destination`
// replica reading a directory of YAML with --outbound-transport-mode transport-header), a
// client and a server `meridian proxy` process configured by LINKERD2_PROXY_* variables as
// the injector would, two nginx processes (Debian's, plain HTTP: proxy_pass with keep-alive
// upstreams, grpc_pass on http2 listeners), and, in this process, the application (an
// HTTP/1.1 server answering a fixed response, and a gRPC health service) and the load
// generator. The paths compared:
//
//	direct:   generator -> app
//	nginx:    generator -> nginx -> nginx -> app                        (plaintext)
//	meridian: generator -> client proxy (outbound, explicit HTTP proxy or :authority)
//	          -> mTLS + transport header -> server proxy (inbound) -> app
//
// # How it measures
//
// The generator is open-loop: requests are due at a constant rate (Config.Rate) whatever the
// answers do, and each latency is counted from the time the request was due, not from when
// it was sent, so a stall is charged to every request it delays (no coordinated omission, as
// in wrk2). Latencies go into HdrHistograms. The variants run interleaved: Config.Rounds
// rounds, each running every variant for Config.Segment in a rotating order, after one
// warm-up segment per variant that is not counted; so drift of a shared, noisy machine falls
// on all variants alike. The figures that matter are ratios measured in the same run: the
// latency a proxy pair adds (its percentile minus direct's), Meridian's over nginx's.
//
// During Meridian's segments it samples each proxy's RSS (/proc/PID/status VmRSS, and VmHWM
// at the end) and reads go_memstats_mallocs_total from each proxy's /metrics before and
// after, so allocations per proxied request are the deltas over the requests served, less
// what the proxy allocates when idle (measured before the load). With Config.ProfileDir it
// saves CPU and allocation profiles of both proxies taken under load.
//
// It owns every process it starts (stopped on return, killed by the kernel if the harness
// dies: Pdeathsig) and every goroutine; all are bounded and waited for. It writes a table
// and a JSON file (Result).
//
// It may import anything but cmd: it must not import `cmd/...`. Nothing imports it but
// cmd/meridian.
package dataplane

// Package metrics holds the proxy's Prometheus metrics under linkerd2-proxy's names and
// labels, so that dashboards built for Linkerd work: request_total, response_total and
// response_latency_ms (HTTP), tcp_open_total, tcp_open_connections, tcp_read_bytes_total,
// tcp_write_bytes_total and tcp_close_total (TCP), and the inbound authorization counters
// inbound_http_authz_{allow,deny}_total and inbound_tcp_authz_{allow,deny}_total.
//
// Every family has one fixed label set (Prometheus requires it): direction, authority, tls,
// client_id, server_id, the dst_* labels discovery gives an endpoint (dst_namespace,
// dst_service, dst_pod, dst_serviceaccount, dst_deployment, dst_statefulset, dst_daemonset,
// dst_pod_template_hash, dst_control_plane_ns, dst_zone), and srv_name for the inbound
// policy's Server; a label that does not apply is empty. Hot paths resolve their series
// once: Route and TCP return handles whose methods only add to counters.
//
// What a client or a peer chooses cannot grow the series without bound or crash the proxy:
// label values that are not UTF-8 (on which Prometheus panics) and over-long authorities
// read "invalid", routes past MaxRoutes per direction read "other", grpc_status takes gRPC's
// codes only, and series idle for RetainIdle are dropped (a kept handle then counts into
// the live series of its labels, made anew within the bound).
//
// It owns its collectors. It imports the Prometheus client and the standard library; it
// must not import `github.com/meridian-mesh/meridian/...`.
package metrics

package dataplane

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The ports of a run: every process has a loopback address of its own, so these are fixed.
const (
	appHTTPPort     = 8080 // the application's HTTP/1.1 port (and nginx's)
	appGRPCPort     = 8081 // the application's gRPC port (and nginx's http2 listener)
	inboundPort     = 4143
	outboundPort    = 4140
	proxyAdminPort  = 4191
	identityPort    = 8080
	identityAdmin   = 9990
	destinationPort = 8086
	destAdmin       = 9996
)

// The names of the benchmark's cluster: one Service app.bench with one meshed pod, and the
// client's identity.
const (
	namespace      = "bench"
	clientID       = "client.bench.serviceaccount.identity.linkerd.cluster.local"
	serverID       = "app.bench.serviceaccount.identity.linkerd.cluster.local"
	identityID     = "linkerd-identity.linkerd.serviceaccount.identity.linkerd.cluster.local"
	destinationID  = "linkerd-destination.linkerd.serviceaccount.identity.linkerd.cluster.local"
	httpAuthority  = "app.bench.svc.cluster.local:8080"
	grpcAuthority  = "app.bench.svc.cluster.local:8081"
	controlPlaneNS = "linkerd"
)

// Hosts in the run's /24.
const (
	hostClient  = 1 // the client pod: its proxy
	hostApp     = 2 // the server pod: the application and its proxy
	hostNginx1  = 3 // the front nginx
	hostNginx2  = 4 // the back nginx
	hostControl = 5 // identity and destination
)

// topology is the run's loopback network, 127.X.Y.0/24.
type topology struct{ x, y byte }

func (t topology) addr(host byte) netip.Addr { return netip.AddrFrom4([4]byte{127, t.x, t.y, host}) }

func (t topology) hostPort(host byte, port uint16) string {
	return netip.AddrPortFrom(t.addr(host), port).String()
}

// listens are the addresses a run binds.
func (t topology) listens() []string {
	var out []string
	for _, hp := range []struct {
		host  byte
		ports []uint16
	}{
		{hostClient, []uint16{inboundPort, outboundPort, proxyAdminPort}},
		{hostApp, []uint16{appHTTPPort, appGRPCPort, inboundPort, outboundPort, proxyAdminPort}},
		{hostNginx1, []uint16{appHTTPPort, appGRPCPort}},
		{hostNginx2, []uint16{appHTTPPort, appGRPCPort}},
		{hostControl, []uint16{identityPort, identityAdmin, destinationPort, destAdmin}},
	} {
		for _, p := range hp.ports {
			out = append(out, t.hostPort(hp.host, p))
		}
	}
	return out
}

// pickTopology picks a random 127.X.Y.0/24 (X in 100..199) whose addresses are all free.
func pickTopology() (topology, error) {
	var last error
	for range 20 {
		t := topology{x: byte(100 + rand.IntN(100)), y: byte(rand.IntN(256))}
		if last = t.free(); last == nil {
			return t, nil
		}
	}
	return topology{}, fmt.Errorf("no free loopback /24 for the benchmark: %w", last)
}

// free checks that every address of t can be bound now.
func (t topology) free() error {
	for _, a := range t.listens() {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		_ = l.Close()
	}
	return nil
}

// clusterYAML is the destination's directory source: the Service app.bench with its two
// ports, an EndpointSlice, and the meshed pod (service account app) at the app's address.
func (t topology) clusterYAML() []byte {
	ip := t.addr(hostApp).String()
	return []byte(`# The benchmark's cluster (bench/dataplane): one meshed pod behind app.bench.
apiVersion: v1
kind: Service
metadata: {name: app, namespace: bench, labels: {app: app}}
spec:
  selector: {app: app}
  clusterIP: 10.96.200.10
  ports:
  - {name: http, port: 8080, targetPort: 8080}
  - {name: grpc, port: 8081, targetPort: 8081}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-bench
  namespace: bench
  labels: {kubernetes.io/service-name: app, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}
addressType: IPv4
ports:
- {name: http, port: 8080, protocol: TCP}
- {name: grpc, port: 8081, protocol: TCP}
endpoints:
- addresses: ["` + ip + `"]
  conditions: {ready: true, serving: true, terminating: false}
  nodeName: node-a
  targetRef: {kind: Pod, namespace: bench, name: app-0}
---
apiVersion: v1
kind: Pod
metadata:
  name: app-0
  namespace: bench
  labels: {app: app, linkerd.io/control-plane-ns: ` + controlPlaneNS + `, linkerd.io/workload-ns: bench}
  annotations: {linkerd.io/identity-mode: default, linkerd.io/proxy-version: dev}
spec:
  serviceAccountName: app
  nodeName: node-a
  containers:
  - name: app
    image: bench
    ports:
    - {name: http, containerPort: 8080}
    - {name: grpc, containerPort: 8081}
status:
  phase: Running
  podIP: ` + ip + `
  podIPs: [{ip: ` + ip + `}]
  conditions: [{type: Ready, status: "True"}]
`)
}

// nginxConf is the configuration of one nginx of the pair: the front one (host
// hostNginx1) proxies to the back one, which proxies to the application. Plain HTTP both
// ways; keep-alive upstream connections; an http2 listener with grpc_pass for gRPC; no
// access log; no limit on requests per connection (as the proxies have none).
func (t topology) nginxConf(front bool, workers int, dir string) []byte {
	host, up := byte(hostNginx2), byte(hostApp)
	if front {
		host, up = hostNginx1, hostNginx2
	}
	w := "auto"
	if workers > 0 {
		w = strconv.Itoa(workers)
	}
	listen := func(port uint16) string { return t.hostPort(host, port) }
	upstream := func(port uint16) string { return t.hostPort(up, port) }
	var b strings.Builder
	fmt.Fprintf(&b, `# nginx for bench/dataplane (the %s of the pair).
daemon off;
master_process on;
worker_processes %s;
pid %s/nginx.pid;
error_log %s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_temp_path %s/body;
  proxy_temp_path %s/proxy;
  fastcgi_temp_path %s/fastcgi;
  uwsgi_temp_path %s/uwsgi;
  scgi_temp_path %s/scgi;
  upstream h1 { server %s; keepalive 64; keepalive_requests 10000000; keepalive_timeout 300s; }
  upstream h2 { server %s; keepalive 64; keepalive_requests 10000000; keepalive_timeout 300s; }
  server {
    listen %s;
    location / {
      proxy_pass http://h1;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
    }
  }
  server {
    listen %s http2;
    http2_max_requests 10000000;
    location / { grpc_pass grpc://h2; }
  }
}
`, map[bool]string{true: "front", false: "back"}[front], w, dir, dir, dir, dir, dir, dir, dir,
		upstream(appHTTPPort), upstream(appGRPCPort), listen(appHTTPPort), listen(appGRPCPort))
	return []byte(b.String())
}

// proxyEnv is the environment of the proxy of pod host with identity id, as the injector
// writes it (with the local mesh's addresses).
func (t topology) proxyEnv(host byte, id, anchors, tokenFile string, ports string) []string {
	pod := "client"
	if host == hostApp {
		pod = "app-0"
	}
	env := []string{
		"LINKERD2_PROXY_INBOUND_LISTEN_ADDR=" + t.hostPort(host, inboundPort),
		"LINKERD2_PROXY_OUTBOUND_LISTEN_ADDR=" + t.hostPort(host, outboundPort),
		"LINKERD2_PROXY_ADMIN_LISTEN_ADDR=" + t.hostPort(host, proxyAdminPort),
		"LINKERD2_PROXY_DESTINATION_SVC_ADDR=" + t.hostPort(hostControl, destinationPort),
		"LINKERD2_PROXY_DESTINATION_SVC_NAME=" + destinationID,
		`LINKERD2_PROXY_DESTINATION_CONTEXT={"ns":"` + namespace + `","nodeName":"node-a","pod":"` + pod + `"}`,
		"LINKERD2_PROXY_IDENTITY_SVC_ADDR=" + t.hostPort(hostControl, identityPort),
		"LINKERD2_PROXY_IDENTITY_SVC_NAME=" + identityID,
		"LINKERD2_PROXY_IDENTITY_LOCAL_NAME=" + id,
		"LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS=" + anchors,
		"LINKERD2_PROXY_IDENTITY_TOKEN_FILE=" + tokenFile,
		"LINKERD2_PROXY_INBOUND_DEFAULT_POLICY=all-unauthenticated",
		"LINKERD2_PROXY_LOG=warn",
		"MERIDIAN_PROXY_ENABLE_PPROF=true", // profiles under load; the admin port is on loopback
	}
	if ports != "" {
		env = append(env, "LINKERD2_PROXY_INBOUND_PORTS="+ports)
	}
	return env
}

var errNoNginx = errors.New("nginx not found")

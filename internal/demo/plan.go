package demo

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	proxyconfig "github.com/meridian-mesh/meridian/proxy/config"
)

// Addrs are the loopback addresses of the demo's control plane: 127.N.1.x, each process on an
// address of its own with its usual ports. N (Net) is 0 unless two demos share a machine.
type Addrs struct{ Net byte }

func (a Addrs) ip(x byte) string { return fmt.Sprintf("127.%d.1.%d", a.Net, x) }

func hostPort(ip string, port int) string { return ip + ":" + strconv.Itoa(port) }

// DstService is the address of the Service linkerd-dst: the demo's forwarder to the replicas.
func (a Addrs) DstService() string { return hostPort(a.ip(1), 8086) }

// Replica is where replica i listens: gRPC (mTLS), admin, gossip.
func (a Addrs) Replica(i int) (grpc, admin, gossip string) {
	ip := a.ip(byte(10 + i))
	return hostPort(ip, 8086), hostPort(ip, 9996), hostPort(ip, 7946)
}

// ReplicaLocal is replica i's plaintext listener for tools (`meridian endpoints`): its
// --local-addr, as a pod's 127.0.0.1:8086 is reached through kubectl port-forward.
func (a Addrs) ReplicaLocal(i int) string { return hostPort(a.ip(byte(10+i)), 8087) }

// Identity and Policy are where those services listen: gRPC, admin.
func (a Addrs) Identity() (grpc, admin string) {
	return hostPort(a.ip(20), 8080), hostPort(a.ip(20), 9990)
}
func (a Addrs) Policy() (grpc, admin string) {
	return hostPort(a.ip(30), 8090), hostPort(a.ip(30), 9997)
}

// Ports of a pod's proxy on its pod IP, and of its application's metrics.
const (
	InboundPort  = 4143
	OutboundPort = 4140
	ProxyAdmin   = 4191
	appMetrics   = 9100
)

// ReplicaName is the ring name of replica i.
func ReplicaName(i int) string { return "dst-" + strconv.Itoa(i) }

// ControlPlane returns the processes of the control plane reading the example directory dir.
// Its gRPC is mTLS: identity serves with a certificate of its own issuer, policy and the
// replicas with certificates from identity (their tokens in s), which the replicas also
// relay with.
func ControlPlane(a Addrs, replicas int, dir string, s *Secrets) []Spec {
	idAddr, idAdmin := a.Identity()
	polAddr, polAdmin := a.Policy()
	logFlags := []string{"--log-level", "info", "--log-format", "console"}
	tlsFlags := func(token string) []string {
		return []string{"--identity-addr", idAddr, "--identity-trust-anchors", s.TrustAnchorsFile(), "--identity-token-file", token}
	}
	specs := []Spec{
		{Name: "identity", Role: RoleControl, Ready: "http://" + idAdmin + "/ready", Args: append([]string{"identity",
			"--issuer-dir", s.IdentityDir, "--tokens", "local", "--local-token-key", s.TokenKeyFile(),
			"--trust-domain", TrustDomain, "--control-plane-namespace", ControlPlaneNamespace,
			"--addr", idAddr, "--admin-addr", idAdmin}, logFlags...)},
		{Name: "policy", Role: RoleControl, Ready: "http://" + polAdmin + "/ready", Args: slices.Concat([]string{"policy",
			"--source", "dir:" + dir, "--grpc-addr", polAddr, "--admin-addr", polAdmin}, tlsFlags(s.PolicyToken), logFlags)},
	}
	var seeds []string
	for i := range replicas {
		_, _, gossip := a.Replica(i)
		seeds = append(seeds, gossip)
	}
	for i := range replicas {
		grpc, admin, gossip := a.Replica(i)
		specs = append(specs, Spec{Name: ReplicaName(i), Role: RoleControl, Ready: "http://" + admin + "/ready", Args: slices.Concat([]string{"destination",
			"--source", "dir:" + dir, "--addr", grpc, "--local-addr", a.ReplicaLocal(i), "--admin-addr", admin,
			"--node-name", ReplicaName(i), "--gossip-addr", gossip, "--join", strings.Join(seeds, ","),
			"--ring-expect-replicas", strconv.Itoa(replicas),
			"--gossip-key-file", s.GossipKeyFile, "--non-owner", "redirect", "--outbound-transport-mode", "transport-header"},
			tlsFlags(s.DestinationToken), logFlags)})
	}
	return specs
}

// AppKind is what a demo application serves on a port.
type AppKind string

const (
	AppHTTP AppKind = "http" // an HTTP echo
	AppGRPC AppKind = "grpc" // a gRPC service
	AppTCP  AppKind = "tcp"  // a line-echo "database"
)

// PodPlan is what the demo runs for one pod of the example cluster.
type PodPlan struct {
	Namespace, Name, ServiceAccount string
	App                             string // the pod's app label (its name without one)
	IP                              netip.Addr
	Meshed                          bool
	Identity                        string // the pod's mesh identity (meshed pods)
	Ports                           map[uint16]AppKind
	// Traffic is the traffic generator's command line (the container's args, `demo traffic
	// ...`) for the loadgen pod; nil for an application pod.
	Traffic []string
}

// Key is namespace/name.
func (p PodPlan) Key() string { return nsName(p.Namespace, p.Name) }

// MetricsAddr is where the pod's application (or the generator) serves /metrics and /ready.
func (p PodPlan) MetricsAddr() string { return hostPort(p.IP.String(), appMetrics) }

// ProxyAdminAddr is the pod's proxy's admin address.
func (p PodPlan) ProxyAdminAddr() string { return hostPort(p.IP.String(), ProxyAdmin) }

// meridianImage is the image whose container runs a meridian command (its args).
const meridianImage = "ghcr.io/meridian-mesh/meridian"

// PlanPods returns what to run for the cluster's pods: every pod that is running and ready
// with a loopback IPv4 address gets its application, and a meshed one a proxy. The notes say
// why other pods were left out.
func PlanPods(c *Cluster) (plans []PodPlan, notes []string) {
	seen := map[netip.Addr]string{}
	for _, pod := range c.Pods {
		key := nsName(pod.Namespace, pod.Name)
		ip, why := podIP(pod)
		if why != "" {
			notes = append(notes, key+": "+why)
			continue
		}
		if other, dup := seen[ip]; dup {
			notes = append(notes, fmt.Sprintf("%s: pod IP %s is %s's too; not run", key, ip, other))
			continue
		}
		seen[ip] = key
		p := PodPlan{Namespace: pod.Namespace, Name: pod.Name, ServiceAccount: pod.Spec.ServiceAccountName, App: pod.Labels["app"],
			IP: ip, Meshed: meshed(pod), Ports: map[uint16]AppKind{}}
		if p.App == "" {
			p.App = pod.Name
		}
		if p.ServiceAccount == "" {
			p.ServiceAccount = "default"
		}
		if p.Meshed {
			p.Identity = Identity(p.Namespace, p.ServiceAccount)
		}
		opaque := opaquePorts(pod)
		for _, ctr := range pod.Spec.Containers {
			if strings.HasPrefix(ctr.Image, meridianImage+":") && len(ctr.Args) >= 2 && ctr.Args[0] == "demo" && ctr.Args[1] == "traffic" {
				p.Traffic = slices.Clone(ctr.Args)
				continue
			}
			for _, cp := range ctr.Ports {
				p.Ports[uint16(cp.ContainerPort)] = kindOf(cp, opaque)
			}
		}
		if p.Traffic != nil && !p.Meshed {
			notes = append(notes, key+": the traffic generator needs a meshed pod (its proxy resolves the services); not run")
			continue
		}
		if p.Traffic == nil && len(p.Ports) == 0 {
			notes = append(notes, key+": no container port to serve; not run")
			continue
		}
		plans = append(plans, p)
	}
	return plans, notes
}

// podIP returns the pod's loopback IPv4 address, or why the pod is not run.
func podIP(pod *corev1.Pod) (netip.Addr, string) {
	if pod.Status.Phase != corev1.PodRunning {
		return netip.Addr{}, "not running; not run"
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return netip.Addr{}, "not ready; not run (its endpoints are not ready either)"
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !ip.Is4() || !ip.IsLoopback() {
		return netip.Addr{}, fmt.Sprintf("pod IP %q is not a loopback IPv4 address (127.x.y.z); not run", pod.Status.PodIP)
	}
	return ip, ""
}

// meshed reports whether the pod has a proxy, as the injector leaves it: the
// linkerd.io/control-plane-ns label or a linkerd-proxy container.
func meshed(pod *corev1.Pod) bool {
	if pod.Labels["linkerd.io/control-plane-ns"] != "" {
		return true
	}
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.Name == "linkerd-proxy" {
			return true
		}
	}
	return false
}

// defaultOpaquePorts are Linkerd's default opaque ports (SMTP, MySQL, Postgres, Redis, ...).
var defaultOpaquePorts = []uint16{25, 587, 3306, 4444, 5432, 6379, 9300, 11211}

// opaquePorts returns the pod's opaque ports: config.linkerd.io/opaque-ports (numbers, ranges
// and container port names) or Linkerd's defaults.
func opaquePorts(pod *corev1.Pod) map[uint16]bool {
	out := map[uint16]bool{}
	ann, ok := pod.Annotations["config.linkerd.io/opaque-ports"]
	if !ok {
		for _, p := range defaultOpaquePorts {
			out[p] = true
		}
		return out
	}
	named := map[string]uint16{}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name != "" {
				named[cp.Name] = uint16(cp.ContainerPort)
			}
		}
	}
	for _, part := range strings.Split(ann, ",") {
		part = strings.TrimSpace(part)
		if p, ok := named[part]; ok {
			out[p] = true
			continue
		}
		ps, err := proxyconfig.ParsePorts(part)
		if err != nil {
			continue // the translator reports it; the demo just does not treat it as opaque
		}
		for _, p := range ps {
			out[p] = true
		}
	}
	return out
}

// kindOf says which demo application serves a container port: gRPC for a port named grpc
// (or grpc-*), the line echo for an opaque port or one named tcp*, HTTP otherwise.
func kindOf(cp corev1.ContainerPort, opaque map[uint16]bool) AppKind {
	switch {
	case cp.Name == "grpc" || strings.HasPrefix(cp.Name, "grpc-"):
		return AppGRPC
	case opaque[uint16(cp.ContainerPort)] || strings.HasPrefix(cp.Name, "tcp"):
		return AppTCP
	}
	return AppHTTP
}

// sortedPorts returns the ports of p in order.
func (p PodPlan) sortedPorts() []uint16 {
	ports := make([]uint16, 0, len(p.Ports))
	for port := range p.Ports {
		ports = append(ports, port)
	}
	slices.Sort(ports)
	return ports
}

// AppSpec is the pod's application process: `meridian demo app`, serving each container port.
func (p PodPlan) AppSpec() Spec {
	args := []string{"demo", "app", "--pod", p.Key(), "--metrics-addr", p.MetricsAddr()}
	for _, port := range p.sortedPorts() {
		args = append(args, "--"+string(p.Ports[port]), hostPort(p.IP.String(), int(port)))
	}
	return Spec{Name: "app/" + p.Name, Role: RoleApp, Args: args, Ready: "http://" + p.MetricsAddr() + "/ready"}
}

// TrafficSpec is the loadgen pod's generator: its container's args, sent through the pod's
// proxy, at rate requests per second per target.
func (p PodPlan) TrafficSpec(rate float64) Spec {
	args := append(slices.Clone(p.Traffic), "--proxy", hostPort(p.IP.String(), OutboundPort),
		"--metrics-addr", p.MetricsAddr(), "--client-id", p.Identity, "--rate", strconv.FormatFloat(rate, 'f', -1, 64))
	return Spec{Name: "traffic/" + p.Name, Role: RoleTraffic, Args: args, Ready: "http://" + p.MetricsAddr() + "/ready"}
}

// ProxySpec is the pod's `meridian proxy`, configured as the injector would configure it
// (LINKERD2_PROXY_*, the control plane's identities included: mTLS to all three), on the
// pod's address: inbound :4143, outbound :4140, admin :4191.
func (p PodPlan) ProxySpec(a Addrs, trustAnchors, tokenFile string) Spec {
	ip := p.IP.String()
	idAddr, _ := a.Identity()
	polAddr, _ := a.Policy()
	workload, _ := json.Marshal(map[string]string{"ns": p.Namespace, "pod": p.Name})
	context, _ := json.Marshal(map[string]string{"ns": p.Namespace, "nodeName": "demo", "pod": p.Name})
	var ports, opaque []string
	for _, port := range p.sortedPorts() {
		ports = append(ports, strconv.Itoa(int(port)))
		if p.Ports[port] == AppTCP {
			opaque = append(opaque, strconv.Itoa(int(port)))
		}
	}
	env := map[string]string{
		"INBOUND_LISTEN_ADDR":                      hostPort(ip, InboundPort),
		"OUTBOUND_LISTEN_ADDR":                     hostPort(ip, OutboundPort),
		"ADMIN_LISTEN_ADDR":                        hostPort(ip, ProxyAdmin),
		"CONTROL_LISTEN_ADDR":                      hostPort(ip, 4190),
		"DESTINATION_SVC_ADDR":                     a.DstService(),
		"DESTINATION_SVC_NAME":                     Identity(ControlPlaneNamespace, DestinationSA),
		"POLICY_SVC_NAME":                          Identity(ControlPlaneNamespace, PolicySA),
		"IDENTITY_SVC_NAME":                        Identity(ControlPlaneNamespace, IdentitySA),
		"DESTINATION_CONTEXT":                      string(context),
		"POLICY_SVC_ADDR":                          polAddr,
		"POLICY_WORKLOAD":                          string(workload),
		"IDENTITY_SVC_ADDR":                        idAddr,
		"IDENTITY_LOCAL_NAME":                      p.Identity,
		"IDENTITY_TRUST_ANCHORS":                   trustAnchors,
		"IDENTITY_TOKEN_FILE":                      tokenFile,
		"INBOUND_IPS":                              ip,
		"INBOUND_PORTS":                            strings.Join(ports, ","),
		"INBOUND_PORTS_DISABLE_PROTOCOL_DETECTION": strings.Join(opaque, ","),
		"SHUTDOWN_GRACE_PERIOD":                    "1s",
		"LOG":                                      "warn,linkerd=info",
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var envList []string
	for _, k := range keys {
		envList = append(envList, proxyconfig.Prefix+k+"="+env[k])
	}
	return Spec{Name: "proxy/" + p.Name, Role: RoleProxy, Args: []string{"proxy"}, Env: envList, Ready: "http://" + hostPort(ip, ProxyAdmin) + "/ready"}
}

package e2e

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ns is the namespace of every workload of these tests.
const ns = "shop"

// inboundPort and outboundPort are the proxies' listener ports (Linkerd's).
const (
	inboundPort  = 4143
	outboundPort = 4140
)

// pod is one workload instance: on loopback its address is 127.x.y.z, its application
// listens on ip:port and its proxy's inbound on ip:4143.
type pod struct {
	name, app, sa string
	ip            netip.Addr
	port          uint16 // the application's port (0: no application, a client)
}

// identity is the pod's mesh identity.
func (p pod) identity() string { return identityOf(p.sa) }

func identityOf(sa string) string {
	return sa + "." + ns + ".serviceaccount.identity.linkerd.cluster.local"
}

func (p pod) appAddr() string { return netip.AddrPortFrom(p.ip, p.port).String() }

func (p pod) inboundAddr() string { return netip.AddrPortFrom(p.ip, inboundPort).String() }

func (p pod) outboundAddr() string { return netip.AddrPortFrom(p.ip, outboundPort).String() }

func (p pod) workload() string { return fmt.Sprintf(`{"ns":%q,"pod":%q}`, ns, p.name) }

// service is one Service: port targets its pods' application port; endpoints are the pods
// its EndpointSlice lists as ready (nil: every pod; an empty non-nil slice: none).
type service struct {
	name       string
	port       uint16
	targetPort uint16 // the pods' port when 0
	clusterIP  string // none when empty
	pods       []pod
	endpoints  []pod
}

func (s service) authority() string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", s.name, ns, s.port)
}

// yaml is the service's file: the Service, its EndpointSlice and its meshed pods (labels
// app and linkerd.io/control-plane-ns, the ServiceAccount, the container port, the pod IP),
// as both the destination and the policy controller read them.
func (s service) yaml() string {
	eps := s.endpoints
	if eps == nil {
		eps = s.pods
	}
	targetPort := s.targetPort
	for _, p := range s.pods {
		targetPort = p.port
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {namespace: %s, name: %s}\nspec:\n  selector: {app: %s}\n  ports:\n  - {name: p, port: %d, targetPort: %d}\n",
		ns, s.name, s.name, s.port, targetPort)
	if s.clusterIP != "" {
		fmt.Fprintf(&b, "  clusterIP: %s\n", s.clusterIP)
	}
	fmt.Fprintf(&b, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {namespace: %s, name: %s-a, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nports:\n- {name: p, port: %d}\nendpoints:",
		ns, s.name, s.name, targetPort)
	if len(eps) == 0 {
		b.WriteString(" []")
	}
	b.WriteString("\n")
	for _, p := range eps {
		fmt.Fprintf(&b, "- addresses: [%q]\n  conditions: {ready: true}\n  targetRef: {kind: Pod, namespace: %s, name: %s}\n", p.ip, ns, p.name)
	}
	for _, p := range s.pods {
		b.WriteString(podYAML(p))
	}
	return b.String()
}

// podYAML is a meshed pod.
func podYAML(p pod) string {
	ports := "[]"
	if p.port != 0 {
		ports = fmt.Sprintf("[{containerPort: %d}]", p.port)
	}
	return fmt.Sprintf("---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: %s, name: %s, labels: {app: %s, linkerd.io/control-plane-ns: linkerd}}\n"+
		"spec:\n  serviceAccountName: %s\n  containers:\n  - {name: app, image: app:1, ports: %s}\nstatus: {phase: Running, podIP: %q, podIPs: [{ip: %q}]}\n",
		ns, p.name, p.app, p.sa, ports, p.ip, p.ip)
}

// onlyFrom is a Server on app's port that denies by default and an AuthorizationPolicy
// admitting only ServiceAccount sa.
func onlyFrom(app string, port uint16, sa string) string {
	return fmt.Sprintf(`apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: %[1]s-http, namespace: %[4]s}
spec: {podSelector: {matchLabels: {app: %[1]s}}, port: %[2]d, proxyProtocol: HTTP/1, accessPolicy: deny}
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: %[1]s-from-%[3]s, namespace: %[4]s}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: %[1]s-http}
  requiredAuthenticationRefs:
  - {kind: ServiceAccount, name: %[3]s}
`, app, port, sa, ns)
}

// cluster is the directory of Kubernetes YAML every replica and the policy controller read.
type cluster struct {
	t   *testing.T
	dir string
}

// write replaces file name's content atomically (write, then rename).
func (c *cluster) write(name, content string) {
	c.t.Helper()
	tmp := filepath.Join(c.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, name)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) service(s service) { c.write("svc-"+s.name+".yaml", s.yaml()) }

// podNet hands out pod addresses under 127.<random>.0.0/16, so that two runs of these tests
// on one machine (other worktrees) do not collide on 127.x.y.z:4143.
type podNet struct {
	base byte
	next int
}

func newPodNet() *podNet {
	var b [1]byte
	_, _ = rand.Read(b[:])
	return &podNet{base: 100 + b[0]%150}
}

// pod returns a new pod of app with ServiceAccount sa (the app's name when empty).
func (n *podNet) pod(app, sa string, index int, port uint16) pod {
	n.next++
	if sa == "" {
		sa = app
	}
	ip := netip.AddrFrom4([4]byte{127, n.base, byte(n.next / 250), byte(1 + n.next%250)})
	return pod{name: fmt.Sprintf("%s-%d", app, index), app: app, sa: sa, ip: ip, port: port}
}

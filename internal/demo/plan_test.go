package demo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

const examples = "../../deploy/examples"

// readCluster reads a directory as the demo does.
func readCluster(t *testing.T, dir string) (*ClusterDir, *Cluster) {
	t.Helper()
	cd := NewClusterDir(dir, nil)
	testutil.Go(t, "the cluster dir", cd.Run)
	testutil.Eventually(t, 10*time.Second, "the first read", func() bool { return cd.Current() != nil })
	return cd, cd.Current()
}

func TestPlanOfTheExampleCluster(t *testing.T) {
	_, c := readCluster(t, examples)
	plans, notes := PlanPods(c)
	byName := map[string]PodPlan{}
	for _, p := range plans {
		byName[p.Name] = p
	}
	want := map[string]struct {
		meshed bool
		ports  map[uint16]AppKind
	}{
		"web-7c9d8f6b5-k2x9p":        {true, map[uint16]AppKind{8080: AppHTTP}},
		"web-7c9d8f6b5-q8m4z":        {true, map[uint16]AppKind{8080: AppHTTP}},
		"cart-5f6d4c7b9-7wz2c":       {true, map[uint16]AppKind{8080: AppHTTP, 9090: AppGRPC}},
		"postgres-0":                 {true, map[uint16]AppKind{5432: AppTCP}},
		"postgres-1":                 {true, map[uint16]AppKind{5432: AppTCP}},
		"payments-69c8d7b5f4-2gq9v":  {true, map[uint16]AppKind{8080: AppHTTP, 9990: AppHTTP}},
		"inventory-7d4b9c8f6-r6kxn":  {false, map[uint16]AppKind{8080: AppHTTP}},
		"recommend-84d7f9c6d8-5mxkq": {true, map[uint16]AppKind{8080: AppHTTP}},
	}
	for name, w := range want {
		p, ok := byName[name]
		if !ok {
			t.Errorf("%s is not run", name)
			continue
		}
		if p.Meshed != w.meshed || len(p.Ports) != len(w.ports) {
			t.Errorf("%s: meshed %v ports %v, want %v %v", name, p.Meshed, p.Ports, w.meshed, w.ports)
		}
		for port, k := range w.ports {
			if p.Ports[port] != k {
				t.Errorf("%s: port %d is %q, want %q", name, port, p.Ports[port], k)
			}
		}
	}
	lg, ok := byName["loadgen-6f7d9c8b4-m2p7w"]
	if !ok || lg.Traffic == nil || !lg.Meshed || lg.Identity != "loadgen.shop.serviceaccount.identity.linkerd.cluster.local" {
		t.Fatalf("loadgen: %+v", lg)
	}
	for _, target := range []string{"http://web.shop.svc.cluster.local", "grpc://cart.shop.svc.cluster.local:9090", "tcp://postgres.billing.svc.cluster.local:5432"} {
		if !slices.Contains(lg.Traffic, "--target="+target) {
			t.Errorf("loadgen's args %q lack %s", lg.Traffic, target)
		}
	}
	// The pods that are not ready are left out, and said so.
	for _, name := range []string{"cart-5f6d4c7b9-tn5hx", "search-6b8f9d5c4-hq2lz"} {
		if _, ok := byName[name]; ok {
			t.Errorf("%s (not ready) is run", name)
		}
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, name) && strings.Contains(n, "not ready") }) {
			t.Errorf("notes %q do not say why %s is not run", notes, name)
		}
	}
	// The example cluster keeps the variety the destination's tests and the README rely on.
	kinds := map[string]bool{}
	for _, s := range c.Services {
		kinds[string(s.Spec.Type)+"/"+s.Spec.ClusterIP] = true
		if s.Name == "recommend" && !slices.Contains(s.Spec.IPFamilies, corev1.IPv6Protocol) {
			t.Error("recommend is no longer IPv6")
		}
	}
	if !kinds["ExternalName/"] || !kinds["/None"] {
		t.Errorf("the examples lost the ExternalName or the headless Service: %v", kinds)
	}
}

func TestSpecsOfAPod(t *testing.T) {
	_, c := readCluster(t, examples)
	plans, _ := PlanPods(c)
	var pg, lg PodPlan
	for _, p := range plans {
		switch p.Name {
		case "postgres-0":
			pg = p
		case "loadgen-6f7d9c8b4-m2p7w":
			lg = p
		}
	}
	a := Addrs{Net: 7}
	proxy := pg.ProxySpec(a, "ANCHORS", "/tok")
	env := strings.Join(proxy.Env, "\n")
	for _, want := range []string{
		"LINKERD2_PROXY_INBOUND_LISTEN_ADDR=127.0.20.10:4143", "LINKERD2_PROXY_OUTBOUND_LISTEN_ADDR=127.0.20.10:4140",
		"LINKERD2_PROXY_ADMIN_LISTEN_ADDR=127.0.20.10:4191", "LINKERD2_PROXY_DESTINATION_SVC_ADDR=127.7.1.1:8086",
		"LINKERD2_PROXY_IDENTITY_LOCAL_NAME=postgres.billing.serviceaccount.identity.linkerd.cluster.local",
		"LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS=ANCHORS", "LINKERD2_PROXY_IDENTITY_TOKEN_FILE=/tok",
		`LINKERD2_PROXY_POLICY_WORKLOAD={"ns":"billing","pod":"postgres-0"}`, "LINKERD2_PROXY_INBOUND_PORTS_DISABLE_PROTOCOL_DETECTION=5432",
		"LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD=1s",
		"LINKERD2_PROXY_DESTINATION_SVC_NAME=linkerd-destination.linkerd.serviceaccount.identity.linkerd.cluster.local",
		"LINKERD2_PROXY_POLICY_SVC_NAME=linkerd-policy.linkerd.serviceaccount.identity.linkerd.cluster.local",
		"LINKERD2_PROXY_IDENTITY_SVC_NAME=linkerd-identity.linkerd.serviceaccount.identity.linkerd.cluster.local",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("proxy env lacks %s:\n%s", want, env)
		}
	}
	app := pg.AppSpec()
	if got := strings.Join(app.Args, " "); got != "demo app --pod billing/postgres-0 --metrics-addr 127.0.20.10:9100 --tcp 127.0.20.10:5432" {
		t.Errorf("app args %q", got)
	}
	tr := lg.TrafficSpec(2.5)
	if got := strings.Join(tr.Args, " "); !strings.HasPrefix(got, "demo traffic --target=") ||
		!strings.HasSuffix(got, "--proxy 127.0.10.7:4140 --metrics-addr 127.0.10.7:9100 --client-id loadgen.shop.serviceaccount.identity.linkerd.cluster.local --rate 2.5") {
		t.Errorf("traffic args %q", got)
	}
	cp := ControlPlane(a, 3, "/ex", &Secrets{IdentityDir: "/id", GossipKeyFile: "/gk", DestinationToken: "/dst.tok", PolicyToken: "/pol.tok"})
	var names []string
	for _, s := range cp {
		names = append(names, s.Name)
		if s.Role != RoleControl || !strings.HasPrefix(s.Ready, "http://127.7.1.") {
			t.Errorf("%s: role %v ready %q", s.Name, s.Role, s.Ready)
		}
	}
	if strings.Join(names, ",") != "identity,policy,dst-0,dst-1,dst-2" {
		t.Errorf("control plane %v", names)
	}
	dst := strings.Join(cp[3].Args, " ")
	for _, want := range []string{"--source dir:/ex", "--addr 127.7.1.11:8086", "--node-name dst-1", "--gossip-addr 127.7.1.11:7946",
		"--join 127.7.1.10:7946,127.7.1.11:7946,127.7.1.12:7946", "--gossip-key-file /gk", "--non-owner redirect", "--outbound-transport-mode transport-header",
		"--identity-addr 127.7.1.20:8080 --identity-trust-anchors /id/ca-bundle.crt --identity-token-file /dst.tok", "--local-addr 127.7.1.11:8087"} {
		if !strings.Contains(dst, want) {
			t.Errorf("dst-1's args lack %q: %s", want, dst)
		}
	}
	// mTLS everywhere: nothing runs with --plaintext.
	for _, s := range cp {
		if slices.Contains(s.Args, "--plaintext") {
			t.Errorf("%s runs with --plaintext", s.Name)
		}
	}
	if pol := strings.Join(cp[1].Args, " "); !strings.Contains(pol, "--identity-addr 127.7.1.20:8080 --identity-trust-anchors /id/ca-bundle.crt --identity-token-file /pol.tok") {
		t.Errorf("policy's args lack its TLS flags: %s", pol)
	}
}

func TestPodSelection(t *testing.T) {
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	pod := func(ip string, phase corev1.PodPhase, conds []corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase, PodIP: ip, Conditions: conds}}
		p.Namespace, p.Name = "ns", "p-"+ip
		p.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "grpc-api", ContainerPort: 7000}, {Name: "tcp-redis", ContainerPort: 6000}, {ContainerPort: 6379}}}}
		return p
	}
	c := &Cluster{Pods: []*corev1.Pod{
		pod("127.0.5.1", corev1.PodRunning, ready),
		pod("127.0.5.1", corev1.PodRunning, ready), // the same address again
		pod("10.0.0.1", corev1.PodRunning, ready),
		pod("::1", corev1.PodRunning, ready),
		pod("127.0.5.2", corev1.PodPending, ready),
		pod("127.0.5.3", corev1.PodRunning, nil),
	}}
	c.Pods[1].Name = "dup"
	plans, notes := PlanPods(c)
	if len(plans) != 1 || plans[0].IP.String() != "127.0.5.1" || plans[0].Meshed || plans[0].ServiceAccount != "default" {
		t.Fatalf("plans %+v", plans)
	}
	if got := plans[0].Ports; got[7000] != AppGRPC || got[6000] != AppTCP || got[6379] != AppTCP {
		t.Errorf("ports %v: want grpc-* gRPC, tcp-* and Linkerd's default opaque 6379 TCP", got)
	}
	if len(notes) != 5 {
		t.Errorf("notes %q, want one per pod not run", notes)
	}
	// With the annotation, only what it lists is opaque (by number, range or port name).
	p := pod("127.0.5.9", corev1.PodRunning, ready)
	p.Annotations = map[string]string{"config.linkerd.io/opaque-ports": "grpc-api, 6000-6001, bad"}
	plans, _ = PlanPods(&Cluster{Pods: []*corev1.Pod{p}})
	if got := plans[0].Ports; got[7000] != AppGRPC || got[6000] != AppTCP || got[6379] != AppHTTP {
		t.Errorf("annotated ports %v", got)
	}
}

func TestCopyExamplesRewritesAddresses(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "ex")
	if err := copyExamples(examples, dst, 42); err != nil {
		t.Fatal(err)
	}
	_, c := readCluster(t, dst)
	plans, _ := PlanPods(c)
	for _, p := range plans {
		if !strings.HasPrefix(p.IP.String(), "127.42.") {
			t.Errorf("%s at %s after --net 42", p.Name, p.IP)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, DenyPolicyOff)); err != nil {
		t.Errorf("the deny policy was not copied: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dst, "shop.yaml"))
	if strings.Contains(string(b), "127.0.10.") || !strings.Contains(string(b), `"::1"`) {
		t.Error("the copy kept a 127.0 address or lost the IPv6 one")
	}
}

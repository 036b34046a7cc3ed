package charttest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meridian-mesh/meridian/internal/kubetest"
)

// Config configures a Kubelet.
type Config struct {
	Env       *kubetest.Env
	Namespace string // where the workloads are
	// Binary is the meridian binary (Binary(t)); it is the entrypoint of Image.
	Binary string
	// ProxyBinary is the meridian-proxy binary (ProxyBinary(t)), which Image holds beside
	// Binary: what an injected proxy container runs (linkerd-proxy, command meridian-proxy,
	// outside the control plane). Empty: such containers are refused.
	ProxyBinary string
	// Image is the image (without tag) whose entrypoint is Binary; containers of other
	// images are refused. Default ghcr.io/meridian-mesh/meridian.
	Image string
	// ClusterDomain is the DNS suffix the stand-in DNS serves (default cluster.local).
	ClusterDomain string
	// ProbePeriod is how often probes run (default 250ms; a kubelet uses the spec's
	// periodSeconds, which would only make the tests slower).
	ProbePeriod time.Duration
}

// Kubelet is the stand-in for the controllers, the kubelet and the cluster DNS (see the
// package doc). Its methods are called from the test's goroutine; its prober runs on its own
// goroutine until the test ends.
type Kubelet struct {
	cfg     Config
	kube    kubernetes.Interface
	apiHost string
	apiPort string
	caPEM   []byte
	podNet  netip.Prefix // a /24 of 127/8
	dns     *clusterDNS
	dir     string

	mu     sync.Mutex
	pods   map[string]*pod // by name
	nextIP int

	stop chan struct{}
	wg   sync.WaitGroup
}

// Start returns a running Kubelet for cfg.Namespace; everything it started stops when t
// ends. It skips t unless it runs as root on Linux.
func Start(t *testing.T, cfg Config) *Kubelet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the stand-in kubelet needs root (mount namespaces, pod users, DNS on port 53)")
	}
	if cfg.Image == "" {
		cfg.Image = "ghcr.io/meridian-mesh/meridian"
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.ProbePeriod == 0 {
		cfg.ProbePeriod = 250 * time.Millisecond
	}
	u, err := url.Parse(cfg.Env.Config.Host)
	if err != nil {
		t.Fatalf("API server address %q: %v", cfg.Env.Config.Host, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("API server address %q: %v", cfg.Env.Config.Host, err)
	}
	dir, err := os.MkdirTemp("", "charttest-pods-")
	if err != nil {
		t.Fatal(err)
	}
	k := &Kubelet{
		cfg: cfg, kube: cfg.Env.Client, apiHost: host, apiPort: port, caPEM: cfg.Env.Config.CAData,
		dir: dir, pods: map[string]*pod{}, stop: make(chan struct{}),
	}
	// A /24 of 127/8 of its own, so that test binaries running at once do not collide; the
	// DNS takes .2, pods .10 on.
	for i := 0; ; i++ {
		var b [2]byte
		_, _ = rand.Read(b[:])
		b[0] = 1 + b[0]%250
		k.podNet = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, b[0], b[1], 0}), 24)
		k.dns, err = startDNS(k.addr(2), k.kube, cfg.ClusterDomain)
		if err == nil {
			break
		}
		if i == 10 {
			t.Fatalf("start the stand-in DNS: %v", err)
		}
	}
	k.wg.Add(1)
	go k.probeLoop()
	t.Cleanup(func() { k.close(t) })
	return k
}

func (k *Kubelet) addr(host byte) netip.Addr {
	a := k.podNet.Addr().As4()
	a[3] = host
	return netip.AddrFrom4(a)
}

// resolvConf is the pods' /etc/resolv.conf, as a kubelet writes it for ClusterFirst.
func (k *Kubelet) resolvConf(ns string) string {
	d := k.cfg.ClusterDomain
	return fmt.Sprintf("nameserver %s\nsearch %s.svc.%s svc.%s %s\noptions ndots:5\n", k.addr(2), ns, d, d, d)
}

// close stops every pod, the prober and the DNS; on failure it prints the pods' logs.
func (k *Kubelet) close(t *testing.T) {
	k.mu.Lock()
	pods := make([]*pod, 0, len(k.pods))
	for _, p := range k.pods {
		pods = append(pods, p)
	}
	k.mu.Unlock()
	sort.Slice(pods, func(i, j int) bool { return pods[i].name < pods[j].name })
	for _, p := range pods {
		p.stopAll(t)
	}
	close(k.stop)
	k.wg.Wait()
	k.dns.close()
	if t.Failed() {
		for _, p := range pods {
			for _, c := range p.containers {
				t.Logf("--- log of pod %s container %s (last lines):\n%s", p.name, c.spec.Name, tail(c.logPath, 40))
			}
		}
	}
	_ = os.RemoveAll(k.dir)
}

// Sync makes the pods match the namespace's StatefulSets and Deployments: it creates and
// starts the missing pods, and stops and deletes those a scale-down removed. It fails t when a
// running pod's template changed (rolling updates are not emulated) or a pod cannot start.
func (k *Kubelet) Sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := k.cfg.Namespace
	stss, err := k.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list StatefulSets: %v", err)
	}
	for i := range stss.Items {
		s := &stss.Items[i]
		want := map[string]bool{}
		for ord := 0; ord < int(deref(s.Spec.Replicas, 1)); ord++ {
			name := fmt.Sprintf("%s-%d", s.Name, ord)
			want[name] = true
			k.ensurePod(ctx, t, "StatefulSet", s.Name, s.UID, name, &s.Spec.Template, func(p *corev1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain = name, s.Spec.ServiceName
				p.Labels["statefulset.kubernetes.io/pod-name"] = name
				p.Labels["apps.kubernetes.io/pod-index"] = fmt.Sprint(ord)
			})
		}
		k.removeExcept(ctx, t, "StatefulSet/"+s.Name, want)
	}
	deps, err := k.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Deployments: %v", err)
	}
	for i := range deps.Items {
		d := &deps.Items[i]
		k.syncDeployment(ctx, t, d)
	}
}

func (k *Kubelet) syncDeployment(ctx context.Context, t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	hash := templateHash(&d.Spec.Template)[:10]
	owner := "Deployment/" + d.Name
	want := map[string]bool{}
	k.mu.Lock()
	for _, p := range k.pods {
		if p.owner == owner && len(want) < int(deref(d.Spec.Replicas, 1)) {
			want[p.name] = true
		}
	}
	k.mu.Unlock()
	for len(want) < int(deref(d.Spec.Replicas, 1)) {
		name := fmt.Sprintf("%s-%s-%s", d.Name, hash, randSuffix())
		want[name] = true
		k.ensurePod(ctx, t, "Deployment", d.Name, d.UID, name, &d.Spec.Template, func(p *corev1.Pod) {
			p.Labels["pod-template-hash"] = hash
		})
	}
	for name := range want {
		k.mu.Lock()
		p := k.pods[name]
		k.mu.Unlock()
		if p != nil && p.templateHash != templateHash(&d.Spec.Template) {
			t.Fatalf("the pod template of Deployment %s changed; the stand-in kubelet does not emulate rolling updates", d.Name)
		}
	}
	k.removeExcept(ctx, t, owner, want)
}

// removeExcept stops and deletes the pods of owner not in keep.
func (k *Kubelet) removeExcept(ctx context.Context, t *testing.T, owner string, keep map[string]bool) {
	t.Helper()
	k.mu.Lock()
	var gone []*pod
	for name, p := range k.pods {
		if p.owner == owner && !keep[name] {
			gone = append(gone, p)
			delete(k.pods, name)
		}
	}
	k.mu.Unlock()
	for _, p := range gone {
		p.stopAll(t)
		if err := k.kube.CoreV1().Pods(k.cfg.Namespace).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Errorf("delete pod %s: %v", p.name, err)
		}
	}
}

// StopPod stops the processes of a pod, as if its containers had crashed: the pod object
// stays, not ready, and is not restarted.
func (k *Kubelet) StopPod(t *testing.T, name string) {
	t.Helper()
	k.mu.Lock()
	p := k.pods[name]
	k.mu.Unlock()
	if p == nil {
		t.Fatalf("no pod %s", name)
	}
	p.stopAll(t)
}

// PodIP returns a pod's IP, or "" for a pod the stand-in does not run.
func (k *Kubelet) PodIP(name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.pods[name]; p != nil {
		return p.ip
	}
	return ""
}

// PodNames returns the names of the pods of owner ("StatefulSet/linkerd-destination"), sorted.
func (k *Kubelet) PodNames(owner string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for name, p := range k.pods {
		if p.owner == owner {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Log returns what a pod's containers printed.
func (k *Kubelet) Log(name string) string {
	k.mu.Lock()
	p := k.pods[name]
	k.mu.Unlock()
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range p.containers {
		data, _ := os.ReadFile(c.logPath)
		b.Write(data)
	}
	return b.String()
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func randSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	var b [5]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func hex64(v uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return fmt.Sprintf("%x", b)
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

package check

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// PodFetcher reaches a pod's admin port through the API server's pod proxy
// (pods/proxy, which needs no route to the pod network), and from the pod IP directly when
// the proxy fails (the API server refuses to proxy to loopback and link-local addresses,
// and a cluster may forbid pods/proxy).
type PodFetcher struct {
	Kube    kubernetes.Interface
	Timeout time.Duration
	// HTTP is the client for direct fetches (default: one with Timeout).
	HTTP *http.Client
}

var _ Fetcher = (*PodFetcher)(nil)

// Fetch implements Fetcher.
func (f *PodFetcher) Fetch(ctx context.Context, pod *corev1.Pod, port int, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.Timeout)
	defer cancel()
	body, perr := f.Kube.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, strconv.Itoa(port), path, nil).DoRaw(ctx)
	if perr == nil {
		return body, nil
	}
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("through the API server: %v; the pod has no IP", perr)
	}
	c := f.HTTP
	if c == nil {
		c = &http.Client{Timeout: f.Timeout}
	}
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("through the API server: %v; directly: %v", short(perr.Error()), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, short(string(b)))
	}
	return b, nil
}

// ringView is what a destination replica's /ring says.
type ringView struct {
	Self     string `json:"self"`
	ID       string `json:"id"`
	Services int    `json:"services"`
	Members  []struct {
		Name     string `json:"name"`
		Services int    `json:"services"`
	} `json:"members"`
	owned int // destination_owned_services from /metrics
}

func (v *ringView) names() []string {
	out := make([]string, len(v.Members))
	for i, m := range v.Members {
		out[i] = m.Name
	}
	sort.Strings(out)
	return out
}

// ringAttempts and ringRetry bound how long the ring check waits for replicas that are
// still converging (a ring change takes a gossip round to reach everyone).
const (
	ringAttempts = 3
	ringRetry    = time.Second
)

func checkRing(ctx context.Context, s *state) (Result, bool) {
	w := s.workloads["destination"]
	if w == nil {
		return Result{Skipped: true, Message: "skipped: no destination StatefulSet"}, false
	}
	var res Result
	for i := 0; i < ringAttempts; i++ {
		if i > 0 {
			t := time.NewTimer(ringRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return res, false
			case <-t.C:
			}
		}
		if res = ringOnce(ctx, s, w); res.OK {
			break
		}
	}
	return res, false
}

// ringOnce fetches every replica's view once and compares them.
func ringOnce(ctx context.Context, s *state, w *workload) Result {
	hint := fmt.Sprintf("a replica that does not see the others cannot reach them on the gossip port, or has another gossip key (Secret linkerd-dst-gossip-key); kubectl -n %s logs the replicas named above", s.cfg.Namespace)
	want := make([]string, w.replicas)
	for i := range want {
		want[i] = fmt.Sprintf("%s-%d", w.workload, i)
	}
	sort.Strings(want)
	var problems []string
	views := map[string]*ringView{}
	for i := range w.pods {
		p := &w.pods[i]
		v, err := fetchRing(ctx, s, p, adminPort(p, w.adminPort))
		if err != nil {
			problems = append(problems, p.Name+": "+err.Error())
			continue
		}
		views[p.Name] = v
	}
	for _, name := range want {
		if _, ok := views[name]; !ok && !hasPod(w.pods, name) {
			problems = append(problems, name+": no such pod")
		}
	}
	var first *ringView
	for _, name := range sortedKeys(views) {
		v := views[name]
		if got := v.names(); !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("%s sees %d members %v, the StatefulSet wants %d %v", name, len(got), got, len(want), want))
			continue
		}
		if first == nil {
			first = v
		} else if v.ID != first.ID || v.Services != first.Services {
			problems = append(problems, fmt.Sprintf("%s sees ring %s over %d services, %s sees ring %s over %d", name, v.ID, v.Services, first.Self, first.ID, first.Services))
		}
		sum, share := 0, -1
		for _, m := range v.Members {
			sum += m.Services
			if m.Name == name {
				share = m.Services
			}
		}
		if sum != v.Services {
			problems = append(problems, fmt.Sprintf("%s: its ring gives %d owners to %d services", name, sum, v.Services))
		}
		if share != v.owned {
			problems = append(problems, fmt.Sprintf("%s holds %d services, its ring gives it %d", name, v.owned, share))
		}
	}
	if len(problems) > 0 {
		return fail(fmt.Sprintf("%d problems", len(problems)), hint, problems...)
	}
	if first == nil {
		return fail("no destination replica answered", hint)
	}
	var shares []string
	for _, m := range first.Members {
		shares = append(shares, strconv.Itoa(m.Services))
	}
	return Result{OK: true, Message: fmt.Sprintf("%d replicas see ring %s: %d services, each owned once (%s)", len(views), first.ID, first.Services, strings.Join(shares, "/"))}
}

func fetchRing(ctx context.Context, s *state, p *corev1.Pod, port int) (*ringView, error) {
	b, err := s.deps.Fetch.Fetch(ctx, p, port, "/ring")
	if err != nil {
		return nil, fmt.Errorf("/ring: %w", err)
	}
	v := &ringView{}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("/ring: %w", err)
	}
	if v.Self != p.Name {
		return nil, fmt.Errorf("/ring says its node name is %q, not the pod's name", v.Self)
	}
	m, err := s.deps.Fetch.Fetch(ctx, p, port, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	if v.owned, err = gauge(m, "destination_owned_services"); err != nil {
		return nil, fmt.Errorf("/metrics: %w", err)
	}
	return v, nil
}

// gauge reads an unlabelled gauge from Prometheus text exposition.
func gauge(metrics []byte, name string) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), name+" ")
		if !found {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("%s has no value", name)
		}
		f, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a number", name, short(rest))
		}
		return int(f), nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no " + name + " gauge")
}

// adminPort is the pod's container port named admin-http, or def.
func adminPort(p *corev1.Pod, def int) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == "admin-http" {
				return int(port.ContainerPort)
			}
		}
	}
	return def
}

func hasPod(pods []corev1.Pod, name string) bool {
	for _, p := range pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

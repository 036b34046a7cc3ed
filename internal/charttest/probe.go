package charttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

var probeClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// probeLoop runs every pod's readiness and liveness probes each ProbePeriod and writes the
// pods' Ready conditions when they change, until close.
func (k *Kubelet) probeLoop() {
	defer k.wg.Done()
	t := time.NewTicker(k.cfg.ProbePeriod)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		k.mu.Lock()
		pods := make([]*pod, 0, len(k.pods))
		for _, p := range k.pods {
			pods = append(pods, p)
		}
		k.mu.Unlock()
		for _, p := range pods {
			ready := true
			for _, c := range p.containers {
				live := probeOK(c.spec.LivenessProbe, &c.spec, p.ip)
				r := !c.exited() && probeOK(c.spec.ReadinessProbe, &c.spec, p.ip)
				c.live.Store(!c.exited() && live)
				c.ready.Store(r)
				ready = ready && r
			}
			if ready != p.ready.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := k.setReady(ctx, p, ready); err == nil {
					p.ready.Store(ready)
				}
				cancel()
			}
		}
	}
}

// probeOK runs one probe; a container without that probe passes.
func probeOK(pr *corev1.Probe, c *corev1.Container, ip string) bool {
	if pr == nil {
		return true
	}
	return probe(pr, c, ip) == nil
}

// probe runs pr against the container at ip: an httpGet must answer 2xx or 3xx, a tcpSocket
// must accept.
func probe(pr *corev1.Probe, c *corev1.Container, ip string) error {
	switch {
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		port, err := probePort(g.Port, c)
		if err != nil {
			return err
		}
		host := g.Host
		if host == "" {
			host = ip
		}
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		resp, err := probeClient.Get(scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + g.Path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s: %s", g.Path, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	case pr.TCPSocket != nil:
		port, err := probePort(pr.TCPSocket.Port, c)
		if err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("only httpGet and tcpSocket probes are emulated")
}

func probePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, p.StrVal)
}

// WaitReady waits until every pod the stand-in runs is ready (its Ready condition written).
func (k *Kubelet) WaitReady(t *testing.T, within time.Duration) {
	t.Helper()
	testutil.Eventually(t, within, "every pod ready", func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, p := range k.pods {
			if !p.ready.Load() {
				return false
			}
		}
		return true
	})
}

// ProbeAll runs every readiness and liveness probe of every running pod once, now, and
// returns one line per probe that does not answer 200 (nil when all do).
func (k *Kubelet) ProbeAll() []string {
	k.mu.Lock()
	pods := make([]*pod, 0, len(k.pods))
	for _, p := range k.pods {
		pods = append(pods, p)
	}
	k.mu.Unlock()
	var bad []string
	n := 0
	for _, p := range pods {
		for _, c := range p.containers {
			for kind, pr := range map[string]*corev1.Probe{"readiness": c.spec.ReadinessProbe, "liveness": c.spec.LivenessProbe} {
				if pr == nil {
					bad = append(bad, fmt.Sprintf("%s/%s has no %s probe", p.name, c.spec.Name, kind))
					continue
				}
				n++
				if err := probeStatus200(pr, &c.spec, p.ip); err != nil {
					bad = append(bad, fmt.Sprintf("%s/%s %s probe: %v", p.name, c.spec.Name, kind, err))
				}
			}
		}
	}
	if n == 0 {
		bad = append(bad, "no probes at all")
	}
	return bad
}

// probeStatus200 is probe, but an HTTP probe must answer exactly 200.
func probeStatus200(pr *corev1.Probe, c *corev1.Container, ip string) error {
	if pr.HTTPGet == nil {
		return probe(pr, c, ip)
	}
	port, err := probePort(pr.HTTPGet.Port, c)
	if err != nil {
		return err
	}
	resp, err := probeClient.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + pr.HTTPGet.Path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", pr.HTTPGet.Path, resp.Status)
	}
	return nil
}

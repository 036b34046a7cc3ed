package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/proxy/discovery"
)

// scrapeClient reads the processes' admin ports; a process that does not answer within the
// timeout is left out of the round.
var scrapeClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: 10 * time.Second}}

// scrapeTarget is one thing to read in a round.
type scrapeTarget struct {
	name, url string
	ring      bool // a replica's /ring, else /metrics
}

// scrape reads every target at once and returns the round.
func scrape(ctx context.Context, targets []scrapeTarget, now func() time.Time) *Scrape {
	s := &Scrape{Rings: map[string]*RingView{}, Metrics: map[string]Metrics{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := fetch(ctx, t.url)
			if err != nil {
				return
			}
			defer body.Close()
			if t.ring {
				var v RingView
				if json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&v) == nil {
					mu.Lock()
					s.Rings[t.name] = &v
					mu.Unlock()
				}
				return
			}
			if m, err := ParseMetrics(body); err == nil {
				mu.Lock()
				s.Metrics[t.name] = m
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.At = now()
	return s
}

func fetch(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// resolveTimeout bounds one lookup; a failed lookup is tried again after retryAfter.
const (
	resolveTimeout = 3 * time.Second
	retryAfter     = 2 * time.Second
)

// serviceWatch follows the example cluster's services through the Destination API (the
// proxies' own client, proxy/discovery, through linkerd-dst), as a proxy would. It holds a
// target for every service port and releases those whose Service went away.
type serviceWatch struct {
	r      *discovery.Resolver
	domain string

	mu    sync.Mutex
	ports map[string]*portWatch // by authority
	wg    sync.WaitGroup        // lookups in flight
}

type portWatch struct {
	target  *discovery.Target
	err     error
	pending bool
	tried   time.Time
}

func newServiceWatch(r *discovery.Resolver) *serviceWatch {
	return &serviceWatch{r: r, domain: "svc." + TrustDomain, ports: map[string]*portWatch{}}
}

// states returns the services of c as discovery sees them now, starting lookups for new
// ports (they answer in a later round) and releasing the ports of removed services.
func (w *serviceWatch) states(ctx context.Context, c *Cluster, now time.Time) []ServiceState {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := map[string]bool{}
	var out []ServiceState
	for _, svc := range c.Services {
		st := ServiceState{Namespace: svc.Namespace, Name: svc.Name}
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			st.Note = "ExternalName " + svc.Spec.ExternalName + ": outside the mesh"
			out = append(out, st)
			continue
		}
		for _, p := range svc.Spec.Ports {
			auth := svc.Name + "." + svc.Namespace + "." + w.domain + ":" + strconv.Itoa(int(p.Port))
			live[auth] = true
			st.Ports = append(st.Ports, w.port(ctx, auth, p.Port, now))
		}
		out = append(out, st)
	}
	for auth, pw := range w.ports {
		if !live[auth] && !pw.pending {
			if pw.target != nil {
				pw.target.Release()
			}
			delete(w.ports, auth)
		}
	}
	return out
}

// port returns one port's state; the caller holds w.mu.
func (w *serviceWatch) port(ctx context.Context, auth string, port int32, now time.Time) PortState {
	ps := PortState{Port: port, Authority: auth}
	pw := w.ports[auth]
	if pw == nil {
		pw = &portWatch{}
		w.ports[auth] = pw
	}
	switch {
	case pw.target != nil:
		snap := pw.target.Snapshot()
		ps.Resolved, ps.Exists = snap.Resolved, snap.Exists
		for _, e := range snap.Endpoints {
			ps.Endpoints = append(ps.Endpoints, EndpointState{Addr: e.Addr.String(), Identity: e.Identity, Pod: e.Labels["pod"]})
		}
		sort.Slice(ps.Endpoints, func(i, j int) bool { return ps.Endpoints[i].Addr < ps.Endpoints[j].Addr })
		return ps
	case errors.Is(pw.err, discovery.ErrNotMeshName):
		ps.Err = "not a mesh name"
		return ps
	case pw.err != nil:
		ps.Err = "lookup failed: " + pw.err.Error()
	}
	if !pw.pending && now.Sub(pw.tried) >= retryAfter && ctx.Err() == nil {
		pw.pending, pw.tried = true, now
		w.wg.Add(1)
		go w.resolve(ctx, auth, pw)
	}
	return ps
}

func (w *serviceWatch) resolve(ctx context.Context, auth string, pw *portWatch) {
	defer w.wg.Done()
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	t, err := w.r.Resolve(rctx, auth)
	cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	pw.pending = false
	if err != nil {
		pw.err = err
		return
	}
	if w.ports[auth] != pw { // removed meanwhile
		t.Release()
		return
	}
	pw.target, pw.err = t, nil
}

// close waits for the lookups in flight and releases every target.
func (w *serviceWatch) close() {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for auth, pw := range w.ports {
		if pw.target != nil {
			pw.target.Release()
		}
		delete(w.ports, auth)
	}
}

package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Check is one result of `meridian demo --once`.
type Check struct {
	Name, Detail string
	OK           bool
}

// The routes of the deny policy: it refuses DeniedClient's requests to DeniedTarget and
// admits AdmittedClient's (when the example cluster has that client).
const (
	DeniedTarget   = "web.shop.svc.cluster.local:80"
	DeniedClient   = "loadgen"
	AdmittedClient = "reports"
)

// Bounds of the script's phases.
const (
	onceFlowing = 30 * time.Second // every route answers
	oncePolicy  = 20 * time.Second // the deny policy takes effect, and is lifted
	onceRing    = 40 * time.Second // the ring drops a killed replica and its services move
	oncePoll    = 250 * time.Millisecond
	onceMinimum = 3 // answers each route must give in each phase
)

// once is `--once`: traffic on every route; the deny policy applied (403s) and lifted; a
// replica killed (its services move, traffic flows on); then the summary and the checks,
// and an error if any failed.
func (m *mesh) once(ctx context.Context) error {
	var checks []Check
	fail := func(err error) error {
		m.summary(m.refresh(ctx))
		return err
	}
	model, err := m.waitFor(ctx, onceFlowing, "every route to answer", func(md Model) bool {
		return len(md.Routes) > 0 && allRoutes(md, func(r RouteRow) bool { return r.OK >= onceMinimum })
	})
	if err != nil {
		return fail(err)
	}
	m.say("  ok  traffic flows on every route")
	tls := m.onceControlPlane(ctx, model)
	if tls.OK {
		m.say("  ok  the control plane refuses plaintext gRPC; the proxies and the demo reach it over mTLS")
	}
	checks = append(checks, tls)
	edit, err := m.onceEdit(ctx)
	if err != nil {
		return fail(err)
	}
	checks = append(checks, edit)
	deny, err := m.oncePolicy(ctx, model)
	if err != nil {
		return fail(err)
	}
	checks = append(checks, deny)
	kill, err := m.onceKill(ctx)
	if err != nil {
		return fail(err)
	}
	checks = append(checks, kill)
	final := m.refresh(ctx)
	checks = append(m.routeChecks(final), checks...)
	m.summary(final)
	failed := 0
	for _, c := range checks {
		mark := "PASS"
		if !c.OK {
			mark, failed = "FAIL", failed+1
		}
		m.say("%s  %s: %s", mark, c.Name, c.Detail)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed (logs in %s)", failed, len(checks), m.sup.logDir)
	}
	m.say("all %d checks passed", len(checks))
	return nil
}

// waitFor refreshes the model until cond holds, within the bound.
func (m *mesh) waitFor(ctx context.Context, within time.Duration, what string, cond func(Model) bool) (Model, error) {
	deadline := time.Now().Add(within)
	for {
		model := m.refresh(ctx)
		if cond(model) {
			return model, nil
		}
		if time.Now().After(deadline) {
			return model, fmt.Errorf("waited %s for %s", within, what)
		}
		select {
		case <-ctx.Done():
			return model, ctx.Err()
		case e := <-m.sup.Exits():
			if !e.Expected {
				return model, fmt.Errorf("%s (pid %d) exited: %v; its log ends:\n%s", e.Name, e.Pid, e.Err, m.sup.Proc(e.Name).LogTail(12))
			}
		case <-time.After(oncePoll):
		}
	}
}

func allRoutes(md Model, ok func(RouteRow) bool) bool {
	for _, r := range md.Routes {
		if !ok(r) {
			return false
		}
	}
	return true
}

// routeOf finds the route from client to authority.
func routeOf(md Model, client, authority string) (RouteRow, bool) {
	for _, r := range md.Routes {
		if r.Client == client && r.Authority == authority {
			return r, true
		}
	}
	return RouteRow{}, false
}

// EditedService is the service the script gives an endpoint by adding an EndpointSlice to
// the example directory (it has no ready endpoint, and no traffic goes to it).
const EditedService = "shop/search"

// onceEdit adds an EndpointSlice for EditedService to the directory the replicas follow,
// waits for discovery to serve its endpoint, removes it, and waits for it to go.
func (m *mesh) onceEdit(ctx context.Context) (Check, error) {
	c := Check{Name: "edit the example cluster"}
	addr := fmt.Sprintf("127.%d.10.9", m.cfg.Net)
	path := filepath.Join(m.dir, "search-endpoint.yaml")
	slice := `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: search-demo
  namespace: shop
  labels: {kubernetes.io/service-name: search}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: ["` + addr + `"]
  conditions: {ready: true, serving: true, terminating: false}
`
	has := func(md Model) bool {
		return slices.ContainsFunc(md.Services, func(s ServiceRow) bool {
			return s.Service == EditedService && slices.ContainsFunc(s.Endpoints, func(e EndpointState) bool { return e.Addr == addr+":8080" })
		})
	}
	t0 := time.Now()
	if err := writeAtomic(path, []byte(slice)); err != nil {
		return c, err
	}
	if _, err := m.waitFor(ctx, oncePolicy, "discovery to serve the endpoint added to "+EditedService, has); err != nil {
		return c, err
	}
	added := time.Since(t0)
	if err := os.Remove(path); err != nil {
		return c, err
	}
	t0 = time.Now()
	if _, err := m.waitFor(ctx, oncePolicy, "discovery to drop the endpoint removed from "+EditedService, func(md Model) bool { return !has(md) }); err != nil {
		return c, err
	}
	m.say("  ok  an EndpointSlice added to %s: discovery served %s:8080 after %s, and dropped it %s after its removal",
		EditedService, addr, added.Round(10*time.Millisecond), time.Since(t0).Round(10*time.Millisecond))
	c.OK, c.Detail = true, fmt.Sprintf("an endpoint added to %s in a file of the directory was served, and removed again, through the Destination API", EditedService)
	return c, nil
}

// writeAtomic writes a file through a rename, so that a watcher never reads half of it.
func writeAtomic(path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// oncePolicy applies the deny policy until DeniedClient's requests to web are refused while
// AdmittedClient's are still answered, then lifts it until DeniedClient is answered again.
func (m *mesh) oncePolicy(ctx context.Context, model Model) (Check, error) {
	c := Check{Name: "deny policy " + DenyPolicy}
	web, ok := routeOf(model, DeniedClient, DeniedTarget)
	if !ok {
		return c, fmt.Errorf("no traffic from %s to %s, the route the deny policy refuses", DeniedClient, DeniedTarget)
	}
	admitted, hasAdmitted := routeOf(model, AdmittedClient, DeniedTarget)
	t0 := time.Now()
	if err := m.setDeny(true); err != nil {
		return c, err
	}
	denyBase := policyDenied(model)
	model, err := m.waitFor(ctx, oncePolicy, DeniedClient+"'s requests to web to get 403 ("+AdmittedClient+"'s answered)", func(md Model) bool {
		r, _ := routeOf(md, DeniedClient, DeniedTarget)
		a, _ := routeOf(md, AdmittedClient, DeniedTarget)
		return r.Denied >= web.Denied+onceMinimum && policyDenied(md) > denyBase && (!hasAdmitted || a.OK >= admitted.OK+onceMinimum)
	})
	if err != nil {
		return c, err
	}
	took := time.Since(t0)
	r, _ := routeOf(model, DeniedClient, DeniedTarget)
	a, _ := routeOf(model, AdmittedClient, DeniedTarget)
	if err := m.setDeny(false); err != nil {
		return c, err
	}
	m.say("  ok  the deny policy refused %d of %s's requests with 403 (in effect after %s)", int(r.Denied-web.Denied), DeniedClient, took.Round(10*time.Millisecond))
	if _, err := m.waitFor(ctx, oncePolicy, "web to answer "+DeniedClient+" again once the policy is lifted", func(md Model) bool {
		r2, _ := routeOf(md, DeniedClient, DeniedTarget)
		return r2.OK >= r.OK+onceMinimum
	}); err != nil {
		return c, err
	}
	m.say("  ok  lifted: web answers %s again", DeniedClient)
	c.OK = r.Denied > web.Denied && r.Failed == web.Failed && (!hasAdmitted || a.Denied == admitted.Denied && a.Failed == admitted.Failed)
	c.Detail = fmt.Sprintf("%d of %s's requests to web refused with 403 while it was in place (inbound_http_authz_deny_total +%d), answered again once lifted",
		int(r.Denied-web.Denied), DeniedClient, int(policyDenied(model)-denyBase))
	if hasAdmitted {
		c.Detail += fmt.Sprintf("; %s, which it admits, got %d answers and %d refusals meanwhile", AdmittedClient, int(a.OK-admitted.OK), int(a.Denied-admitted.Denied))
	}
	return c, nil
}

// policyDenied adds up the inbound denials of every proxy.
func policyDenied(md Model) float64 {
	var n float64
	for _, p := range md.Policy {
		n += p.Denied
	}
	return n
}

// onceKill kills the replica that owns the most of the traffic's services, waits for the
// ring to drop it and its services to move, and for every route to answer again.
func (m *mesh) onceKill(ctx context.Context) (Check, error) {
	before := m.refresh(ctx)
	victim := m.replicaToKill(before)
	c := Check{Name: "kill a destination replica"}
	if victim == "" {
		c.OK, c.Detail = true, "one replica only: nothing to kill"
		return c, nil
	}
	owned := map[string]bool{}
	for _, s := range before.Services {
		if s.Owner == victim {
			owned[s.Service] = true
		}
	}
	t0 := time.Now()
	m.kill(victim, before)
	after, err := m.waitFor(ctx, onceRing, "the ring to drop "+victim+" and its services to move", func(md Model) bool {
		if !md.Ring.Agreed || md.Ring.SeenBy == "" || md.Ring.Members != m.cfg.Replicas-1 {
			return false
		}
		return !slices.ContainsFunc(md.Services, func(s ServiceRow) bool { return s.Owner == victim || s.Owner == "?" })
	})
	if err != nil {
		return c, err
	}
	took := time.Since(t0)
	var moved []string
	for _, s := range after.Services {
		if owned[s.Service] && !slices.Contains(moved, s.Service+" -> "+s.Owner) {
			moved = append(moved, s.Service+" -> "+s.Owner)
		}
	}
	m.say("  ok  killed %s: the ring dropped it after %s; moved %s", victim, took.Round(10*time.Millisecond), orNone(moved))
	base := after
	final, err := m.waitFor(ctx, onceFlowing, "every route to answer after the kill", func(md Model) bool {
		return allRoutes(md, func(r RouteRow) bool {
			b, _ := routeOf(base, r.Client, r.Authority)
			return r.OK >= b.OK+onceMinimum
		})
	})
	if err != nil {
		return c, err
	}
	m.say("  ok  traffic flows on every route after the kill")
	c.OK = final.Traffic.Failed == before.Traffic.Failed && len(owned) > 0 && len(moved) == len(owned)
	c.Detail = fmt.Sprintf("killed %s (SIGKILL); its services moved (%s); %d requests failed meanwhile",
		victim, orNone(moved), int(final.Traffic.Failed-before.Traffic.Failed))
	return c, nil
}

// routeChecks are, for every route: answers and no failure; mTLS with both identities
// verified when its pods are meshed (plaintext when not); the server application given the
// client's identity (HTTP and gRPC).
func (m *mesh) routeChecks(md Model) []Check {
	meshed := map[string]bool{}
	for _, p := range m.pods {
		meshed[p.Name] = p.Meshed
	}
	protoName := map[AppKind]string{AppHTTP: "HTTP", AppGRPC: "gRPC", AppTCP: "TCP"}
	var out []Check
	for _, r := range md.Routes {
		name := protoName[r.Proto] + " " + r.Client + " -> " + r.Authority
		client := r.ClientID
		out = append(out, Check{Name: name, OK: r.OK > 0 && r.Failed == 0,
			Detail: fmt.Sprintf("%d ok, %d denied, %d failed; answered by %s", int(r.OK), int(r.Denied), int(r.Failed), orNone(r.Pods))})
		allMeshed := len(r.Pods) > 0 && !slices.ContainsFunc(r.Pods, func(p string) bool { return !meshed[p] })
		if !allMeshed {
			out = append(out, Check{Name: name + " plaintext", OK: !r.TLS && len(r.Pods) > 0,
				Detail: "its pods are not meshed: the client's proxy sends in plaintext, with no identity"})
			continue
		}
		out = append(out, Check{Name: name + " mTLS", OK: r.TLS && slices.Contains(r.Clients, client) && len(r.Servers) > 0,
			Detail: fmt.Sprintf("client %s verified by the server's proxy, server %s verified by the client's", joinShort(r.Clients), joinShort(r.Servers))})
		if r.Proto != AppTCP {
			out = append(out, Check{Name: name + " client identity", OK: slices.Contains(r.AppSaw, client),
				Detail: fmt.Sprintf("the server application was given l5d-client-id %s", joinShort(r.AppSaw))})
		}
	}
	if len(out) == 0 {
		out = append(out, Check{Name: "routes", Detail: "no traffic generator in the example cluster"})
	}
	return out
}

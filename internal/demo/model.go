package demo

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meridian-mesh/meridian/ring"
)

// RingView is a replica's /ring answer (see shard.Replica.RingHandler).
type RingView struct {
	Self     string       `json:"self"`
	ID       string       `json:"id"`
	Services int          `json:"services"`
	Members  []RingMember `json:"members"`
}

// RingMember is one member in a RingView.
type RingMember struct {
	Name       string  `json:"name"`
	Addr       string  `json:"addr"`
	Partitions int     `json:"partitions"`
	Share      float64 `json:"share"`
	Services   int     `json:"services"`
}

// Scrape is one round of reading every process: the replicas' rings and everyone's metrics.
// Immutable once made.
type Scrape struct {
	At      time.Time
	Rings   map[string]*RingView // by replica name; absent when it did not answer
	Metrics map[string]Metrics   // by process name; absent when it did not answer
}

// ProcState is a process as the supervisor sees it.
type ProcState struct {
	Name   string
	Role   Role
	Pid    int
	Alive  bool
	Starts int
}

// ServiceState is a Service of the example cluster as the demo's own Destination client
// sees it.
type ServiceState struct {
	Namespace, Name string
	Note            string // why it has no ports to look up (an ExternalName Service)
	Ports           []PortState
}

// PortState is the discovery of one service port.
type PortState struct {
	Port      int32
	Authority string
	Resolved  bool   // the first answer arrived
	Exists    bool   // the destination knows the service
	Err       string // the lookup failed (not a mesh name, ...)
	Endpoints []EndpointState
}

// EndpointState is one endpoint of a service port.
type EndpointState struct {
	Addr     string
	Identity string // "" when not meshed
	Pod      string
}

// Event is something that happened, at a time since the start.
type Event struct {
	At   time.Duration
	Text string
}

// Inputs are everything the view is made from.
type Inputs struct {
	Now, Started time.Time
	Replicas     []string // the replicas' names, in order
	ReplicaAddrs []string // their gRPC addresses
	Procs        []ProcState
	Pods         []PodPlan
	Services     []ServiceState
	History      []*Scrape // oldest first
	Events       []Event
	Window       time.Duration // rates and latencies are over this much of History
}

// Model is what the view shows. It is computed from Inputs by BuildModel, without I/O.
type Model struct {
	Uptime          time.Duration
	Processes, Live int
	Ring            RingModel
	Services        []ServiceRow
	Routes          []RouteRow
	Policy          []PolicyRow
	Traffic         Totals
	Events          []Event
	Window          time.Duration // what the rates and latencies cover (less at the start)
}

// RingModel is the ring as the first live replica sees it.
type RingModel struct {
	Rows    []RingRow
	ID      string
	Agreed  bool // every live replica sees the same ring
	Members int
	SeenBy  string
}

// RingRow is one replica.
type RingRow struct {
	Name, Addr string
	Pid        int
	Alive      bool
	InRing     bool
	Partitions int
	Share      float64
	Services   int
}

// ServiceRow is one service port.
type ServiceRow struct {
	Service   string // namespace/name
	Port      int32
	Owner     string
	Endpoints []EndpointState
	Note      string
}

// RouteRow is one target of the traffic generator.
type RouteRow struct {
	Proto     AppKind
	Target    string // the target URL
	Authority string
	// Over the window, from the client's proxy (HTTP: response_total; TCP: tcp_open_total).
	RPS, Success, DeniedRPS float64  // Success NaN without requests
	P50, P99                float64  // milliseconds; NaN without requests
	TLS                     bool     // the client's proxy reached the endpoints over mTLS
	Servers                 []string // the servers' identities the client's proxy verified
	Clients                 []string // the client identities the servers' proxies verified
	AppSaw                  []string // the client identities the server applications were given
	Pods                    []string // the pods that answered
	OK, Denied, Failed      float64  // since the start, as the generator counted them
	Client                  string   // the generator's pod's app
	ClientID                string   // and its identity
}

// PolicyRow is the inbound policy decisions of one pod's proxy for one Server and
// authorization.
type PolicyRow struct {
	Pod, Server, Authz, Proto string
	Allowed, Denied           float64
}

// Totals are the generator's counts since the start.
type Totals struct{ OK, Denied, Failed float64 }

// BuildModel computes the view from its inputs.
func BuildModel(in Inputs) Model {
	m := Model{Uptime: in.Now.Sub(in.Started), Events: in.Events}
	for _, p := range in.Procs {
		m.Processes++
		if p.Alive {
			m.Live++
		}
	}
	if len(in.History) == 0 {
		return m
	}
	cur := in.History[len(in.History)-1]
	prev := windowStart(in.History, in.Window)
	if prev != cur {
		m.Window = cur.At.Sub(prev.At)
	}
	m.Ring = ringModel(in, cur)
	m.Services = serviceRows(in, cur)
	m.Routes = routeRows(in, cur, prev)
	m.Policy = policyRows(in, cur)
	for _, r := range m.Routes {
		m.Traffic.OK += r.OK
		m.Traffic.Denied += r.Denied
		m.Traffic.Failed += r.Failed
	}
	return m
}

// windowStart is the oldest scrape within window of the newest (the newest itself when there
// is only one).
func windowStart(h []*Scrape, window time.Duration) *Scrape {
	cur := h[len(h)-1]
	for _, s := range h {
		if cur.At.Sub(s.At) <= window {
			return s
		}
	}
	return cur
}

func procByName(in Inputs) map[string]ProcState {
	out := make(map[string]ProcState, len(in.Procs))
	for _, p := range in.Procs {
		out[p.Name] = p
	}
	return out
}

func ringModel(in Inputs, cur *Scrape) RingModel {
	procs := procByName(in)
	var ref *RingView
	rm := RingModel{Agreed: true}
	for _, name := range in.Replicas {
		v := cur.Rings[name]
		if v == nil || !procs[name].Alive {
			continue
		}
		if ref == nil {
			ref, rm.SeenBy = v, name
		} else if v.ID != ref.ID {
			rm.Agreed = false
		}
	}
	members := map[string]RingMember{}
	if ref != nil {
		rm.ID, rm.Members = ref.ID, len(ref.Members)
		for _, mb := range ref.Members {
			members[mb.Name] = mb
		}
	}
	for i, name := range in.Replicas {
		p := procs[name]
		mb, inRing := members[name]
		if mb.Addr == "" && i < len(in.ReplicaAddrs) {
			mb.Addr = in.ReplicaAddrs[i]
		}
		rm.Rows = append(rm.Rows, RingRow{Name: name, Addr: mb.Addr, Pid: p.Pid, Alive: p.Alive, InRing: inRing,
			Partitions: mb.Partitions, Share: mb.Share, Services: mb.Services})
	}
	return rm
}

// referenceRing is the ring the first live replica sees, rebuilt here to find each service's
// owner; nil when no replica answered or the rebuilt ring does not match what it reported
// (a replica built with another ring shape).
func referenceRing(in Inputs, cur *Scrape) *ring.Ring {
	procs := procByName(in)
	for _, name := range in.Replicas {
		v := cur.Rings[name]
		if v == nil || !procs[name].Alive || len(v.Members) == 0 {
			continue
		}
		ms := make([]ring.Member, len(v.Members))
		for i, mb := range v.Members {
			ms[i] = ring.Member{Name: mb.Name, Addr: mb.Addr}
		}
		r := ring.Build(ms, ring.DefaultHashConfig())
		for _, mb := range v.Members {
			if r.OwnedPartitions(mb.Name) != mb.Partitions {
				return nil
			}
		}
		return r
	}
	return nil
}

func serviceRows(in Inputs, cur *Scrape) []ServiceRow {
	r := referenceRing(in, cur)
	var rows []ServiceRow
	for _, s := range in.Services {
		owner := "?"
		if r != nil {
			owner = r.Owner(nsName(s.Namespace, s.Name)).Name
		}
		if len(s.Ports) == 0 {
			rows = append(rows, ServiceRow{Service: nsName(s.Namespace, s.Name), Owner: owner, Note: s.Note})
			continue
		}
		for _, p := range s.Ports {
			row := ServiceRow{Service: nsName(s.Namespace, s.Name), Port: p.Port, Owner: owner, Endpoints: p.Endpoints}
			switch {
			case p.Err != "":
				row.Note = p.Err
			case !p.Resolved:
				row.Note = "resolving..."
			case !p.Exists:
				row.Note = "the destination does not know it"
			case len(p.Endpoints) == 0:
				row.Note = "no ready endpoints: requests fail fast"
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// trafficPods are the pods that run a traffic generator.
func trafficPods(in Inputs) []PodPlan {
	var out []PodPlan
	for _, p := range in.Pods {
		if p.Traffic != nil {
			out = append(out, p)
		}
	}
	return out
}

func routeRows(in Inputs, cur, prev *Scrape) []RouteRow {
	dt := cur.At.Sub(prev.At).Seconds()
	var rows []RouteRow
	for _, lg := range trafficPods(in) {
		gen := cur.Metrics["traffic/"+lg.Name]
		for _, target := range gen.Values("demo_traffic_requests_total", "target", nil) {
			t, err := ParseTarget(target)
			if err != nil {
				continue
			}
			row := RouteRow{Proto: t.Protocol, Target: target, Authority: t.Authority, Client: lg.App, ClientID: lg.Identity}
			for _, res := range []struct {
				name string
				dst  *float64
			}{{ResultOK, &row.OK}, {ResultDenied, &row.Denied}, {ResultFailed, &row.Failed}} {
				*res.dst = gen.Sum("demo_traffic_requests_total", Labels("target", target, "result", res.name))
			}
			proxyName := "proxy/" + lg.Name
			fillRoute(&row, cur.Metrics[proxyName], prev.Metrics[proxyName], dt)
			if t.Protocol == AppTCP { // no latency in the proxy's TCP metrics: the generator's
				h := Delta(gen.Histogram("demo_traffic_latency_ms", Labels("target", target)),
					prev.Metrics["traffic/"+lg.Name].Histogram("demo_traffic_latency_ms", Labels("target", target)))
				row.P50, row.P99 = Quantile(0.5, h), Quantile(0.99, h)
			}
			serverSide(&row, cur)
			rows = append(rows, row)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { // meshed routes first, then by protocol, client
		a, b := rows[i], rows[j]
		if a.TLS != b.TLS {
			return a.TLS
		}
		if protoOrder(a.Proto) != protoOrder(b.Proto) {
			return protoOrder(a.Proto) < protoOrder(b.Proto)
		}
		return a.Client < b.Client
	})
	return rows
}

func protoOrder(p AppKind) int { return slices.Index([]AppKind{AppHTTP, AppGRPC, AppTCP}, p) }

// fillRoute reads the client proxy's outbound metrics of the route: over the window
// (cur minus prev, which may be nil) and since the start (identities, pods).
func fillRoute(row *RouteRow, cur, prev Metrics, dt float64) {
	out := Labels("direction", "outbound", "authority", row.Authority)
	rate := func(name string, m Match) float64 { return cur.Sum(name, m) - prev.Sum(name, m) }
	row.Success, row.P50, row.P99 = math.NaN(), math.NaN(), math.NaN()
	family := "request_total"
	if row.Proto == AppTCP {
		family = "tcp_open_total"
		opens := rate("tcp_open_total", out)
		closes := rate("tcp_close_total", out)
		failed := rate("tcp_close_total", All(out, Labels("classification", "failure")))
		if dt > 0 {
			row.RPS = opens / dt
		}
		if closes > 0 {
			row.Success = 1 - failed/closes
		}
	} else {
		total := rate("response_total", out)
		ok := rate("response_total", All(out, Labels("classification", "success")))
		denied := rate("response_total", All(out, Labels("status_code", "403"))) + rate("response_total", All(out, Labels("grpc_status", "7")))
		if dt > 0 {
			row.RPS, row.DeniedRPS = total/dt, denied/dt
		}
		if total > 0 {
			row.Success = ok / total
		}
		h := Delta(cur.Histogram("response_latency_ms", out), prev.Histogram("response_latency_ms", out))
		row.P50, row.P99 = Quantile(0.5, h), Quantile(0.99, h)
	}
	row.TLS = slices.Contains(cur.Values(family, "tls", out), "true")
	row.Servers = nonEmpty(cur.Values(family, "server_id", out))
	row.Pods = nonEmpty(cur.Values(family, "dst_pod", out))
}

// serverSide reads, from the proxies and applications of the pods that answered, whether
// they saw the route's client identity (other clients may call the same pods).
func serverSide(row *RouteRow, cur *Scrape) {
	if row.ClientID == "" {
		return
	}
	family, proto := "request_total", string(row.Proto)
	if row.Proto == AppTCP {
		family = "tcp_open_total"
	}
	var proxySaw, appSaw bool
	for _, pod := range row.Pods {
		proxySaw = proxySaw || cur.Metrics["proxy/"+pod].Sum(family, Labels("direction", "inbound", "client_id", row.ClientID, "tls", "true")) > 0
		appSaw = appSaw || cur.Metrics["app/"+pod].Sum("demo_app_requests_total", Labels("protocol", proto, "client_id", row.ClientID)) > 0
	}
	if proxySaw {
		row.Clients = []string{row.ClientID}
	}
	if appSaw {
		row.AppSaw = []string{row.ClientID}
	}
}

func nonEmpty(ss []string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

func policyRows(in Inputs, cur *Scrape) []PolicyRow {
	var rows []PolicyRow
	for _, p := range in.Pods {
		if !p.Meshed || p.Traffic != nil {
			continue
		}
		m := cur.Metrics["proxy/"+p.Name]
		type key struct{ srv, authz, proto string }
		acc := map[key]*PolicyRow{}
		var order []key
		add := func(family, proto string, allowed bool) {
			for _, s := range m[family] {
				k := key{s.Labels["srv_name"], s.Labels["authz_name"], proto}
				r := acc[k]
				if r == nil {
					r = &PolicyRow{Pod: p.Name, Server: k.srv, Authz: k.authz, Proto: proto}
					acc[k] = r
					order = append(order, k)
				}
				if allowed {
					r.Allowed += s.Value
				} else {
					r.Denied += s.Value
				}
			}
		}
		add("inbound_http_authz_allow_total", "HTTP", true)
		add("inbound_http_authz_deny_total", "HTTP", false)
		add("inbound_tcp_authz_allow_total", "TCP", true)
		add("inbound_tcp_authz_deny_total", "TCP", false)
		sort.SliceStable(order, func(i, j int) bool {
			return strings.Join([]string{order[i].proto, order[i].srv, order[i].authz}, "\x00") < strings.Join([]string{order[j].proto, order[j].srv, order[j].authz}, "\x00")
		})
		for _, k := range order {
			rows = append(rows, *acc[k])
		}
	}
	return rows
}

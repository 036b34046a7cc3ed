package demo

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ViewOptions say how a Model is drawn.
type ViewOptions struct {
	Color bool     // ANSI colours (a terminal)
	Title string   // the first line's start
	Keys  string   // the keys line ("" for none)
	Hints []string // what to try
}

// ANSI sequences.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// identitySuffix is what every mesh identity of the demo ends with; the view leaves it out.
const identitySuffix = ".serviceaccount.identity." + ControlPlaneNamespace + "." + TrustDomain

// ShortID is an identity without the common suffix: web.shop.
func ShortID(id string) string { return strings.TrimSuffix(id, identitySuffix) }

// Render draws m.
func Render(w io.Writer, m Model, o ViewOptions) {
	v := &view{w: w, color: o.Color}
	v.line(v.c(ansiBold, o.Title) + fmt.Sprintf("   up %s   %d/%d processes running", fmtUptime(m.Uptime), m.Live, m.Processes))
	v.ring(m.Ring)
	v.services(m.Services)
	v.routes(m)
	v.policy(m.Policy)
	if len(m.Events) > 0 {
		v.section("EVENTS", "")
		for _, e := range lastN(m.Events, 6) {
			v.line("  " + v.c(ansiDim, fmtUptime(e.At)) + "  " + e.Text)
		}
	}
	if o.Keys != "" {
		v.line("")
		v.line(v.c(ansiBold, "KEYS") + "  " + o.Keys)
	}
	if len(o.Hints) > 0 {
		v.section("TRY", "")
		for _, h := range o.Hints {
			v.line("  " + h)
		}
	}
}

func lastN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type view struct {
	w     io.Writer
	color bool
}

func (v *view) line(s string) { fmt.Fprintln(v.w, s) }

// c colours s when the view has colour.
func (v *view) c(code, s string) string {
	if !v.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (v *view) section(title, note string) {
	v.line("")
	if note != "" {
		note = "  " + v.c(ansiDim, note)
	}
	v.line(v.c(ansiBold+ansiCyan, title) + note)
}

// cell is a table cell: its text and colour.
type cell struct{ text, color string }

func plain(s string) cell { return cell{text: s} }

// table writes rows with columns padded to their widest cell (by runes, before colour).
func (v *view) table(header []string, rows [][]cell) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c.text))
			}
		}
	}
	pad := func(s string, i int) string {
		if i == len(width)-1 {
			return s
		}
		return s + strings.Repeat(" ", width[i]-utf8.RuneCountInString(s)+2)
	}
	var b strings.Builder
	b.WriteString("  ")
	for i, h := range header {
		b.WriteString(pad(h, i))
	}
	v.line(v.c(ansiDim, strings.TrimRight(b.String(), " ")))
	for _, r := range rows {
		b.Reset()
		b.WriteString("  ")
		for i, c := range r {
			b.WriteString(v.c(c.color, c.text))
			if i < len(width)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.text)+2))
			}
		}
		v.line(strings.TrimRight(b.String(), " "))
	}
}

func (v *view) ring(r RingModel) {
	note := "no replica answers"
	if r.SeenBy != "" {
		agree := "every live replica sees the same ring"
		if !r.Agreed {
			agree = "the live replicas see different rings: converging"
		}
		note = fmt.Sprintf("%d members, ring %s as %s sees it; %s", r.Members, r.ID, r.SeenBy, agree)
	}
	v.section("RING", note)
	var rows [][]cell
	for _, row := range r.Rows {
		state, color := "up", ansiGreen
		switch {
		case !row.Alive && row.InRing:
			state, color = "down (the ring has not noticed yet)", ansiRed
		case !row.Alive:
			state, color = "down", ansiRed
		case !row.InRing:
			state, color = "joining", ansiYellow
		}
		parts, svcs, share := "-", "-", "-"
		if row.InRing {
			parts, svcs, share = strconv.Itoa(row.Partitions), strconv.Itoa(row.Services), fmt.Sprintf("%.0f%%", 100*row.Share)
		}
		rows = append(rows, []cell{plain(row.Name), plain(row.Addr), plain(strconv.Itoa(row.Pid)), {state, color}, plain(parts), plain(svcs), plain(share)})
	}
	v.table([]string{"REPLICA", "ADDRESS", "PID", "STATE", "PARTITIONS", "SERVICES", "SHARE"}, rows)
}

func (v *view) services(rows []ServiceRow) {
	v.section("SERVICES", "as the Destination API serves them; OWNER: the replica that serves the service")
	var out [][]cell
	for _, s := range rows {
		port := "-"
		if s.Port != 0 {
			port = strconv.Itoa(int(s.Port))
		}
		eps := cell{text: s.Note, color: ansiYellow}
		if s.Note == "" {
			var parts []string
			meshed := true
			for _, e := range s.Endpoints {
				tag := "meshed"
				if e.Identity == "" {
					tag, meshed = "not meshed", false
				}
				parts = append(parts, e.Addr+" "+tag)
			}
			eps = cell{text: strings.Join(parts, ", ")}
			if !meshed {
				eps.color = ansiDim
			}
		}
		out = append(out, []cell{plain(s.Service), plain(port), plain(s.Owner), eps})
	}
	v.table([]string{"SERVICE", "PORT", "OWNER", "ENDPOINTS"}, out)
}

func (v *view) routes(m Model) {
	v.section("ROUTES", fmt.Sprintf("each client's requests through its pod's proxy, over the last %s; identities <sa>.<ns>", m.Window.Round(time.Second)))
	var rows [][]cell
	for _, r := range m.Routes {
		proto := map[AppKind]string{AppHTTP: "HTTP", AppGRPC: "gRPC", AppTCP: "TCP"}[r.Proto]
		succ := cell{text: "-"}
		if !math.IsNaN(r.Success) {
			succ = cell{text: fmt.Sprintf("%.1f%%", 100*r.Success), color: ansiGreen}
			if r.Success < 1 {
				succ.color = ansiRed
			}
		}
		denied := cell{text: "0"}
		if r.DeniedRPS > 0 {
			denied = cell{text: fmt.Sprintf("%.1f/s", r.DeniedRPS), color: ansiYellow}
		}
		tls, ids := cell{text: "no", color: ansiDim}, cell{text: "plaintext: not meshed", color: ansiDim}
		if r.TLS {
			tls = cell{text: "yes", color: ansiGreen}
			ids = plain(fmt.Sprintf("%s -> %s", joinShort(r.Clients), joinShort(r.Servers)))
			if len(r.AppSaw) > 0 {
				ids.text += " (app saw it)"
			}
		}
		rows = append(rows, []cell{plain(r.Client), plain(proto), plain(strings.Replace(r.Authority, clusterSuffix, "", 1)), plain(fmt.Sprintf("%.1f", r.RPS)),
			succ, denied, plain(fmtMs(r.P50)), plain(fmtMs(r.P99)), tls, ids})
	}
	v.table([]string{"FROM", "PROTO", "TARGET", "RPS", "SUCCESS", "403", "P50", "P99", "mTLS", "IDENTITIES (verified)"}, rows)
	t := m.Traffic
	failed := cell{text: fmt.Sprintf("%.0f failed", t.Failed), color: ansiGreen}
	if t.Failed > 0 {
		failed.color = ansiRed
	}
	v.line(fmt.Sprintf("  since the start: %.0f ok, %.0f denied, %s", t.OK, t.Denied, v.c(failed.color, failed.text)))
}

// clusterSuffix is what every target's host ends with; the view leaves it out.
const clusterSuffix = ".svc." + TrustDomain

func joinShort(ids []string) string {
	if len(ids) == 0 {
		return "?"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = ShortID(id)
	}
	return strings.Join(s, ",")
}

func (v *view) policy(rows []PolicyRow) {
	v.section("POLICY", "inbound authorization decisions of each pod's proxy, since it started")
	var out [][]cell
	for _, r := range rows {
		denied := cell{text: fmt.Sprintf("%.0f", r.Denied)}
		if r.Denied > 0 {
			denied.color = ansiYellow
		}
		authz := r.Authz
		if authz == "" {
			authz = "-"
		}
		out = append(out, []cell{plain(r.Pod), plain(r.Proto), plain(r.Server), plain(authz), plain(fmt.Sprintf("%.0f", r.Allowed)), denied})
	}
	v.table([]string{"POD", "PROTO", "SERVER", "AUTHORIZATION", "ALLOWED", "DENIED"}, out)
}

func fmtMs(ms float64) string {
	switch {
	case math.IsNaN(ms):
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.0fms", ms)
	}
}

func fmtUptime(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

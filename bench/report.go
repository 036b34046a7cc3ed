package bench

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes res to path.
func WriteJSON(path string, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func mib(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

type row struct {
	name string
	val  func(RunResult) float64
	fmt  func(float64) string
	// ratio: show the ratio to the first configuration
	ratio bool
}

func rows() []row {
	f1 := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	n0 := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	return []row{
		{"propagation p50 (ms)", func(r RunResult) float64 { return r.P50Ms }, f1, true},
		{"propagation p99 (ms)", func(r RunResult) float64 { return r.P99Ms }, f1, true},
		{"propagation p999 (ms)", func(r RunResult) float64 { return r.P999Ms }, f1, true},
		{"propagation max (ms)", func(r RunResult) float64 { return r.MaxMs }, f1, true},
		{fmt.Sprintf("seconds with a sample over %d ms", SlowMs), func(r RunResult) float64 { return float64(r.SlowSeconds) }, n0, false},
		{"API server watch p50 (ms)", func(r RunResult) float64 { return r.APIWatchP50Ms }, f1, true},
		{"API server watch p99 (ms)", func(r RunResult) float64 { return r.APIWatchP99Ms }, f1, true},
		{"API server watch max (ms)", func(r RunResult) float64 { return r.APIWatchMaxMs }, f1, true},
		{fmt.Sprintf("API server watch, seconds over %d ms", SlowMs), func(r RunResult) float64 { return float64(r.APIWatchSlowSeconds) }, n0, false},
		{"API server watch missed", func(r RunResult) float64 { return float64(r.APIWatchMissed) }, n0, false},
		{"latency samples", func(r RunResult) float64 { return float64(r.LatencySamples) }, n0, false},
		{"latency missed", func(r RunResult) float64 { return float64(r.LatencyMissed) }, n0, false},
		{"idle heap per shard, mean", func(r RunResult) float64 { return meanU(r.IdleHeapBytesPerShard) }, mib, true},
		{"idle heap per shard, max", func(r RunResult) float64 { return maxU(r.IdleHeapBytesPerShard) }, mib, true},
		{"heap per shard, mean", RunResult.HeapMean, mib, true},
		{"heap per shard, max", RunResult.HeapMax, mib, true},
		{"RSS per shard, mean", func(r RunResult) float64 { return meanU(r.RSSBytesPerShard) }, mib, true},
		{"API server RSS", func(r RunResult) float64 { return float64(r.APIServerRSSBytes) }, mib, false},
		{"etcd RSS", func(r RunResult) float64 { return float64(r.EtcdRSSBytes) }, mib, false},
		{"API server CPU seconds in churn", func(r RunResult) float64 { return r.APIServerCPUSecondsChurn }, f1, false},
		{"etcd CPU seconds in churn", func(r RunResult) float64 { return r.EtcdCPUSecondsChurn }, f1, false},
		{"driver heap", func(r RunResult) float64 { return float64(r.DriverHeapBytes) }, mib, false},
		{"CPU seconds in churn (all shards)", func(r RunResult) float64 { return r.CPUSecondsChurn }, f1, true},
		{"driver CPU seconds in churn", func(r RunResult) float64 { return r.DriverCPUSecondsChurn }, f1, false},
		{"driver GC cycles in churn", func(r RunResult) float64 { return float64(r.DriverGCCyclesChurn) }, n0, false},
		{"run-queue wait, all shards (s)", func(r RunResult) float64 { return sumF(r.RunqueueWaitSeconds) }, f1, false},
		{"storm first batch p99 (ms)", func(r RunResult) float64 { return r.StormP99Ms }, f1, true},
		{"storm, Gets' first Add p99 (ms)", func(r RunResult) float64 { return r.StormGetP99Ms }, f1, true},
		{"storm streams unanswered", func(r RunResult) float64 { return float64(r.StormUnanswered) }, n0, false},
		{"storm span (ms)", func(r RunResult) float64 { return r.StormSpanMs }, f1, true},
		{"storm CPU seconds, all shards", func(r RunResult) float64 { return r.StormCPUSecondsReplicas }, f1, true},
		{"storm CPU seconds, driver", func(r RunResult) float64 { return r.StormCPUSecondsDriver }, f1, false},
		{"API server and etcd CPU seconds in storm", func(r RunResult) float64 { return r.StormCPUSecondsAPI }, f1, false},
		{"storm CPU, share of all CPUs", func(r RunResult) float64 { return r.StormCPUShare }, f1, false},
		{"replica GOMAXPROCS (0: all CPUs)", func(r RunResult) float64 { return float64(r.ReplicaGOMAXPROCS) }, n0, false},
		{"sync (s)", func(r RunResult) float64 { return r.SyncSeconds }, f1, true},
		{"bytes received", func(r RunResult) float64 { return float64(r.BytesReceived) }, mib, true},
		{"changes applied", func(r RunResult) float64 { return float64(r.ChangesApplied) }, n0, false},
		{"coalescings", func(r RunResult) float64 { return float64(r.Coalescings) }, n0, false},
		{"owned services per shard, max", func(r RunResult) float64 { return maxU(r.OwnedServicesPerShard) }, n0, true},
		{"redirects followed", func(r RunResult) float64 { return float64(r.Redirects) }, n0, false},
		{"ownership changes", func(r RunResult) float64 { return float64(r.OwnershipChanges) }, n0, false},
		{"suspicions (unanswered probes)", func(r RunResult) float64 { return float64(r.Suspicions) }, n0, false},
		{"members declared failed", func(r RunResult) float64 { return float64(r.MembersDeclaredFailed) }, n0, false},
		{"goroutine waits over 0.12 s, all shards", func(r RunResult) float64 { return float64(r.SlowSchedWaits) }, n0, false},
		{"dead but reachable, held", func(r RunResult) float64 { return float64(r.DeadHeld) }, n0, false},
		{"dead but reachable: back (flaps avoided)", func(r RunResult) float64 { return float64(r.DeadRevived) }, n0, false},
		{"pods read with a GET (all shards)", func(r RunResult) float64 { return float64(r.PodGets) }, n0, false},
		{"pods kept from the watch's recent drops", func(r RunResult) float64 { return float64(r.PodRecent) }, n0, false},
		{"forwarded streams at end", func(r RunResult) float64 { return float64(r.ForwardedStreams) }, n0, false},
		{"streams closed by kill", func(r RunResult) float64 { return float64(r.StreamsClosedByKill) }, n0, false},
		{"kill to streams converged (s)", func(r RunResult) float64 { return r.KillConvergeSeconds }, f1, false},
		{"streams closed", func(r RunResult) float64 { return float64(r.StreamsClosed) }, n0, false},
		{"final state mismatches", func(r RunResult) float64 { return float64(r.FinalStateMismatches) }, n0, false},
	}
}

// tableCells returns the summary table: a header, then one row per figure with a column per
// configuration and, when there are several, the ratio of each to the first.
func tableCells(res *Result) [][]string {
	head := []string{"figure"}
	for _, r := range res.Runs {
		head = append(head, r.Label())
	}
	rest := res.Runs[min(1, len(res.Runs)):]
	for _, r := range rest {
		head = append(head, fmt.Sprintf("%d/%d", r.Shards, res.Runs[0].Shards))
	}
	out := [][]string{head}
	for _, rw := range rows() {
		if hiddenWhenZero(rw.name) && allZero(res.Runs, rw.val) {
			continue
		}
		cells := []string{rw.name}
		for _, r := range res.Runs {
			cells = append(cells, rw.fmt(rw.val(r)))
		}
		for _, r := range rest {
			c := ""
			if rw.ratio {
				c = ratio(rw.val(r), rw.val(res.Runs[0]))
			}
			cells = append(cells, c)
		}
		out = append(out, cells)
	}
	return out
}

// hiddenWhenZero reports whether the row named name is left out of the table when every
// configuration has 0 there: the API server's and etcd's figures, which the feed source has
// none of.
func hiddenWhenZero(name string) bool {
	return strings.HasPrefix(name, "API server ") || strings.HasPrefix(name, "etcd ")
}

func allZero(runs []RunResult, val func(RunResult) float64) bool {
	for _, r := range runs {
		if val(r) != 0 {
			return false
		}
	}
	return true
}

// WriteTable writes the summary table.
func WriteTable(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, cells := range tableCells(res) {
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

type svgLine struct {
	Color, Label, Points string
}

type svgBar struct {
	X, Y, W, H float64
	Color      string
	Title      string
}

type svgTick struct {
	Pos   float64
	Label string
}

type reportData struct {
	Res                  *Result
	Title                string
	Table                [][]string
	Lines                []svgLine
	XTicks, YTicks       []svgTick
	Bars                 []svgBar
	BarTicks, BarLabels  []svgTick
	CDFEmpty, BarsEmpty  bool
	PlotW, PlotH, Margin float64
}

const (
	plotW, plotH, margin = 720.0, 320.0, 96.0 // the left margin holds labels such as "3798.8 MiB"
)

// WriteHTML writes a self-contained page: the figures, the latency CDF of every
// configuration and the heap and RSS of every shard, as inline SVG.
func WriteHTML(path string, res *Result) error {
	d := reportData{Res: res, PlotW: plotW, PlotH: plotH, Margin: margin,
		Title: fmt.Sprintf("Meridian bench: %d services × %d endpoints, %d streams, churn %g/s for %gs",
			res.Cluster.Services, res.Cluster.EndpointsPerService, res.Streams, res.ChurnPerSecond, res.DurationS)}
	d.Table = tableCells(res)

	// CDF: x is log10(ms) over the range seen, y the fraction.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range res.Runs {
		for _, p := range r.LatencyCDF {
			lo, hi = math.Min(lo, p.Ms), math.Max(hi, p.Ms)
		}
	}
	d.CDFEmpty = math.IsInf(lo, 1)
	if !d.CDFEmpty {
		llo, lhi := math.Floor(math.Log10(math.Max(lo, 0.001))), math.Ceil(math.Log10(math.Max(hi, 0.001)))
		if lhi <= llo {
			lhi = llo + 1
		}
		x := func(v float64) float64 {
			return margin + (math.Log10(math.Max(v, 0.001))-llo)/(lhi-llo)*plotW
		}
		y := func(f float64) float64 { return margin/2 + (1-f)*plotH }
		for e := llo; e <= lhi; e++ {
			d.XTicks = append(d.XTicks, svgTick{x(math.Pow(10, e)), trimFloat(math.Pow(10, e)) + " ms"})
		}
		for f := 0.0; f <= 1.0001; f += 0.25 {
			d.YTicks = append(d.YTicks, svgTick{y(f), fmt.Sprintf("%.2f", f)})
		}
		for i, r := range res.Runs {
			var pts []string
			prev := 0.0
			for _, p := range r.LatencyCDF {
				// Steps: up at each point, across to the next.
				pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(p.Ms), y(prev), x(p.Ms), y(p.Fraction)))
				prev = p.Fraction
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", margin+plotW, y(prev)))
			d.Lines = append(d.Lines, svgLine{palette[i%len(palette)], fmt.Sprintf("%s: p99 %.2f ms", r.Label(), r.P99Ms), strings.Join(pts, " ")})
		}
	}

	// Bars: per configuration a group, per shard a heap bar and a lighter RSS bar.
	maxV := 0.0
	nbars := 0
	for _, r := range res.Runs {
		for i := range r.HeapBytesPerShard {
			maxV = math.Max(maxV, float64(r.HeapBytesPerShard[i]))
			if i < len(r.RSSBytesPerShard) {
				maxV = math.Max(maxV, float64(r.RSSBytesPerShard[i]))
			}
			nbars++
		}
	}
	d.BarsEmpty = nbars == 0 || maxV == 0
	if !d.BarsEmpty {
		gap := 24.0
		bw := math.Min(40, (plotW-gap*float64(len(res.Runs)))/float64(nbars)/2)
		xpos := margin + gap/2
		yb := func(v float64) float64 { return margin/2 + plotH - v/maxV*plotH }
		for gi, r := range res.Runs {
			gx := xpos
			for i, h := range r.HeapBytesPerShard {
				c := palette[gi%len(palette)]
				d.Bars = append(d.Bars, svgBar{xpos, yb(float64(h)), bw, float64(h) / maxV * plotH, c, fmt.Sprintf("%s, shard %d: heap %s", r.Label(), i, mib(float64(h)))})
				if i < len(r.RSSBytesPerShard) {
					v := float64(r.RSSBytesPerShard[i])
					d.Bars = append(d.Bars, svgBar{xpos + bw, yb(v), bw, v / maxV * plotH, c + "55", fmt.Sprintf("%s, shard %d: RSS %s", r.Label(), i, mib(v))})
				}
				xpos += 2 * bw
			}
			d.BarLabels = append(d.BarLabels, svgTick{(gx + xpos) / 2, r.Label()})
			xpos += gap
		}
		for f := 0.0; f <= 1.0001; f += 0.25 {
			d.BarTicks = append(d.BarTicks, svgTick{yb(f * maxV), mib(f * maxV)})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := reportTmpl.Execute(f, d); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%g", v)
	return s
}

func add(a, b float64) float64 { return a + b }

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"add": add, "half": func(v float64) float64 { return v / 2 }, "mul": func(i int, k float64) float64 { return float64(i) * k }, "mulPct": func(v float64) float64 { return v * 100 }}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}
svg text{font-size:11px;fill:#444}.axis{stroke:#888;stroke-width:1}.grid{stroke:#eee;stroke-width:1}
.legend{font-size:12px}
</style></head><body>
<h1>{{.Title}}</h1>
<p>{{.Res.Cluster.Namespaces}} namespaces, {{printf "%.0f" (mulPct .Res.Cluster.MeshedShare)}}% meshed, {{.Res.StreamsPerConn}} streams per connection, seed {{.Res.Cluster.Seed}}.</p>
<table>{{range $i, $r := .Table}}<tr>{{range $r}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>{{end}}</table>
<h2>Propagation latency (CDF, log scale)</h2>
{{if .CDFEmpty}}<p>No latency samples.</p>{{else}}
<svg xmlns="http://www.w3.org/2000/svg" width="{{add .PlotW (add .Margin .Margin)}}" height="{{add .PlotH .Margin}}" role="img" aria-label="latency CDF">
{{range .XTicks}}<line class="grid" x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$.Margin | half}}" y2="{{add ($.Margin | half) $.PlotH}}"/><text x="{{.Pos}}" y="{{add ($.Margin | half) (add $.PlotH 16)}}" text-anchor="middle">{{.Label}}</text>{{end}}
{{range .YTicks}}<line class="grid" x1="{{$.Margin}}" x2="{{add $.Margin $.PlotW}}" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="{{add $.Margin -6}}" y="{{add .Pos 4}}" text-anchor="end">{{.Label}}</text>{{end}}
<line class="axis" x1="{{.Margin}}" x2="{{.Margin}}" y1="{{.Margin | half}}" y2="{{add (.Margin | half) .PlotH}}"/>
<line class="axis" x1="{{.Margin}}" x2="{{add .Margin .PlotW}}" y1="{{add (.Margin | half) .PlotH}}" y2="{{add (.Margin | half) .PlotH}}"/>
{{range .Lines}}<polyline fill="none" stroke="{{.Color}}" stroke-width="2" points="{{.Points}}"/>{{end}}
{{range $i, $l := .Lines}}<rect x="{{add $.Margin 12}}" y="{{add 40 (mul $i 18)}}" width="12" height="12" fill="{{$l.Color}}"/><text class="legend" x="{{add $.Margin 30}}" y="{{add 50 (mul $i 18)}}">{{$l.Label}}</text>{{end}}
</svg>{{end}}
<h2>Memory per shard (after GC): heap (solid), RSS (light)</h2>
{{if .BarsEmpty}}<p>No memory figures.</p>{{else}}
<svg xmlns="http://www.w3.org/2000/svg" width="{{add .PlotW (add .Margin .Margin)}}" height="{{add .PlotH .Margin}}" role="img" aria-label="memory per shard">
{{range .BarTicks}}<line class="grid" x1="{{$.Margin}}" x2="{{add $.Margin $.PlotW}}" y1="{{.Pos}}" y2="{{.Pos}}"/><text x="{{add $.Margin -6}}" y="{{add .Pos 4}}" text-anchor="end">{{.Label}}</text>{{end}}
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Color}}"><title>{{.Title}}</title></rect>{{end}}
<line class="axis" x1="{{.Margin}}" x2="{{add .Margin .PlotW}}" y1="{{add (.Margin | half) .PlotH}}" y2="{{add (.Margin | half) .PlotH}}"/>
{{range .BarLabels}}<text x="{{.Pos}}" y="{{add ($.Margin | half) (add $.PlotH 16)}}" text-anchor="middle">{{.Label}}</text>{{end}}
</svg>{{end}}
</body></html>
`))

func sumF(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s
}

func maxU(v []uint64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, float64(x))
	}
	return m
}

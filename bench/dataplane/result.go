package dataplane

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Result is what one run measured.
type Result struct {
	// The run's parameters.
	RatePerSecond   float64 `json:"rate_per_second"`
	Rounds          int     `json:"rounds"`
	SegmentSeconds  float64 `json:"segment_seconds"`
	WarmupSeconds   float64 `json:"warmup_seconds"`
	Connections     int     `json:"connections"`
	CPUs            int     `json:"cpus"`
	NginxVersion    string  `json:"nginx_version,omitempty"`
	NginxWorkers    int     `json:"nginx_workers"` // 0: auto
	ProxyGOMAXPROCS int     `json:"proxy_gomaxprocs"`
	GoVersion       string  `json:"go_version"`

	Protocols []ProtocolResult `json:"protocols"`
	// Targets are issue 13's targets, checked.
	Targets []Target `json:"targets"`
}

// ProtocolResult is one protocol's measurements: every variant's, and the comparison.
type ProtocolResult struct {
	Protocol Protocol        `json:"protocol"`
	Variants []VariantResult `json:"variants"`
	// Added latency: a proxy pair's percentile minus direct's in the same round, the median
	// over the rounds, in milliseconds; and the ratio of Meridian's to nginx's (absent when
	// nginx added nothing measurable). The Pooled figures are the same from the percentiles
	// of all rounds together.
	NginxAddedP50Ms    float64  `json:"nginx_added_p50_ms"`
	NginxAddedP99Ms    float64  `json:"nginx_added_p99_ms"`
	MeridianAddedP50Ms float64  `json:"meridian_added_p50_ms"`
	MeridianAddedP99Ms float64  `json:"meridian_added_p99_ms"`
	AddedP50Ratio      *float64 `json:"added_p50_ratio,omitempty"`
	AddedP99Ratio      *float64 `json:"added_p99_ratio,omitempty"`
	Pooled             Added    `json:"pooled"`
	// ClientIDSeen is the l5d-client-id the application saw on Meridian's path.
	ClientIDSeen string `json:"client_id_seen,omitempty"`
}

// VariantResult is one variant's measurements over all its rounds.
type VariantResult struct {
	Variant  Variant `json:"variant"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	// FirstError is the first failure's message.
	FirstError string `json:"first_error,omitempty"`
	// AchievedRate is the requests answered per second of the segments.
	AchievedRate float64 `json:"achieved_rate_per_second"`
	// Latency from each request's due time (coordinated omission corrected), ms.
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// Service time, from the send (what a closed-loop generator would report), ms.
	ServiceP50Ms float64 `json:"service_p50_ms"`
	ServiceP99Ms float64 `json:"service_p99_ms"`
	// LateMaxMs is the largest delay between a due time and its send: near zero unless
	// every worker was busy (or the harness did not get a CPU).
	LateMaxMs float64 `json:"late_max_ms"`
	// Rounds are the variant's segments, in order; MedianP50Ms and MedianP99Ms the medians
	// of their percentiles (robust to a segment the machine disturbed).
	Rounds      []RoundResult `json:"rounds"`
	MedianP50Ms float64       `json:"median_p50_ms"`
	MedianP99Ms float64       `json:"median_p99_ms"`
	// Processes are the variant's processes (the proxies, nginx's), with what they cost.
	Processes []ProcessResult `json:"processes,omitempty"`
}

// RoundResult is one segment of a variant.
type RoundResult struct {
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	// HarnessWaitMs is how long the harness's threads (generator and application) waited
	// for a CPU during the segment (Linux schedstat): a large figure means the machine, not
	// the path, set the pace of that segment.
	HarnessWaitMs float64 `json:"harness_cpu_wait_ms"`
}

// ProcessResult is one process's cost under load (nginx: its master and workers together).
type ProcessResult struct {
	Name string `json:"name"`
	// RSSMaxBytes is the largest VmRSS sampled under this protocol's load; RSSPeakBytes is
	// VmHWM (the peak over the process's life) at the end of it.
	RSSMaxBytes  uint64 `json:"rss_max_bytes"`
	RSSPeakBytes uint64 `json:"rss_peak_bytes"`
	// RSSAnonBytes and RSSFileBytes split the largest sample: anonymous memory (the heap,
	// stacks) and mapped file pages (the executable, shared by every process running it).
	RSSAnonBytes uint64 `json:"rss_anon_bytes"`
	RSSFileBytes uint64 `json:"rss_file_bytes"`
	// CPUMicrosPerRequest is CPU time (user+system) per request, microseconds.
	CPUMicrosPerRequest float64 `json:"cpu_us_per_request"`
	// AllocsPerRequest is Go heap allocations per request (go_memstats_mallocs_total),
	// less the process's allocation without load; AllocsPerRequestRaw counts everything.
	AllocsPerRequest    *float64 `json:"allocs_per_request,omitempty"`
	AllocsPerRequestRaw *float64 `json:"allocs_per_request_raw,omitempty"`
}

// Target is one of issue 13's targets, as measured.
type Target struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit"`
	Met    bool    `json:"met"`
	Detail string  `json:"detail"`
}

func ms(us int64) float64 { return float64(us) / 1000 }

// fill sets the latency figures from the histograms.
func (v *VariantResult) fill(latency, service *hdrhistogram.Histogram) {
	if latency.TotalCount() > 0 {
		v.P50Ms, v.P90Ms, v.P99Ms = ms(latency.ValueAtQuantile(50)), ms(latency.ValueAtQuantile(90)), ms(latency.ValueAtQuantile(99))
		v.P999Ms, v.MaxMs = ms(latency.ValueAtQuantile(99.9)), ms(latency.Max())
	}
	if service.TotalCount() > 0 {
		v.ServiceP50Ms, v.ServiceP99Ms = ms(service.ValueAtQuantile(50)), ms(service.ValueAtQuantile(99))
	}
}

// variant returns the protocol's result for v (nil when it was not run).
func (p *ProtocolResult) variant(v Variant) *VariantResult {
	for i := range p.Variants {
		if p.Variants[i].Variant == v {
			return &p.Variants[i]
		}
	}
	return nil
}

// Added is the latency the proxy pairs add, in milliseconds, and Meridian's over nginx's.
type Added struct {
	NginxP50Ms    float64  `json:"nginx_p50_ms"`
	NginxP99Ms    float64  `json:"nginx_p99_ms"`
	MeridianP50Ms float64  `json:"meridian_p50_ms"`
	MeridianP99Ms float64  `json:"meridian_p99_ms"`
	P50Ratio      *float64 `json:"p50_ratio,omitempty"`
	P99Ratio      *float64 `json:"p99_ratio,omitempty"`
}

// compare fills the added latencies and their ratios.
func (p *ProtocolResult) compare() {
	d, n, m := p.variant(Direct), p.variant(Nginx), p.variant(Meridian)
	if d == nil {
		return
	}
	p50 := func(r RoundResult) float64 { return r.P50Ms }
	p99 := func(r RoundResult) float64 { return r.P99Ms }
	if n != nil {
		p.NginxAddedP50Ms, p.NginxAddedP99Ms = medianAdded(n, d, p50), medianAdded(n, d, p99)
		p.Pooled.NginxP50Ms, p.Pooled.NginxP99Ms = n.P50Ms-d.P50Ms, n.P99Ms-d.P99Ms
	}
	if m != nil {
		p.MeridianAddedP50Ms, p.MeridianAddedP99Ms = medianAdded(m, d, p50), medianAdded(m, d, p99)
		p.Pooled.MeridianP50Ms, p.Pooled.MeridianP99Ms = m.P50Ms-d.P50Ms, m.P99Ms-d.P99Ms
	}
	if n != nil && m != nil {
		p.AddedP50Ratio = ratio(p.MeridianAddedP50Ms, p.NginxAddedP50Ms)
		p.AddedP99Ratio = ratio(p.MeridianAddedP99Ms, p.NginxAddedP99Ms)
		p.Pooled.P50Ratio = ratio(p.Pooled.MeridianP50Ms, p.Pooled.NginxP50Ms)
		p.Pooled.P99Ratio = ratio(p.Pooled.MeridianP99Ms, p.Pooled.NginxP99Ms)
	}
}

// medianAdded is the median over the rounds of v's figure minus direct's in the same round.
func medianAdded(v, direct *VariantResult, f func(RoundResult) float64) float64 {
	n := min(len(v.Rounds), len(direct.Rounds))
	diffs := make([]RoundResult, n)
	for i := range n {
		diffs[i].P50Ms = f(v.Rounds[i]) - f(direct.Rounds[i])
	}
	return median(diffs, func(r RoundResult) float64 { return r.P50Ms })
}

// median is the median of f over rs (0 for none).
func median(rs []RoundResult, f func(RoundResult) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ratio(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	r := a / b
	return &r
}

// checkTargets fills r.Targets: per protocol, added p50 at most nginx's and added p99 at most
// 1.5x nginx's (where nginx adds nothing, or less than nothing, so that no ratio exists: at
// most nginx's, compared in milliseconds); per proxy, RSS at most 30 MB and allocations per
// request under 30.
func (r *Result) checkTargets() {
	r.Targets = nil
	for _, p := range r.Protocols {
		if p.variant(Nginx) != nil && p.variant(Meridian) != nil {
			r.Targets = append(r.Targets,
				addedTarget(p.Protocol, "p50", p.AddedP50Ratio, 1, p.MeridianAddedP50Ms, p.NginxAddedP50Ms),
				addedTarget(p.Protocol, "p99", p.AddedP99Ratio, 1.5, p.MeridianAddedP99Ms, p.NginxAddedP99Ms))
		}
		m := p.variant(Meridian)
		if m == nil {
			continue
		}
		for _, pr := range m.Processes {
			mb := mib(pr.RSSMaxBytes)
			r.Targets = append(r.Targets, Target{Name: string(p.Protocol) + " " + pr.Name + " RSS under load", Value: mb, Limit: 30, Unit: "MiB",
				Met: mb <= 30, Detail: fmt.Sprintf("anon %.1f + file %.1f MiB; VmHWM %.1f MiB", mib(pr.RSSAnonBytes), mib(pr.RSSFileBytes), mib(pr.RSSPeakBytes))})
			if pr.AllocsPerRequest != nil {
				r.Targets = append(r.Targets, Target{Name: string(p.Protocol) + " " + pr.Name + " allocations per request", Value: *pr.AllocsPerRequest, Limit: 30, Unit: "",
					Met: *pr.AllocsPerRequest < 30, Detail: fmt.Sprintf("%.1f counting scrapes and idle work", *pr.AllocsPerRequestRaw)})
			}
		}
	}
}

// addedTarget is the target on a percentile's added latency: Meridian's over nginx's at most
// limit, or, where nginx's is not positive (no ratio), Meridian's minus nginx's at most 0 ms.
func addedTarget(proto Protocol, pct string, ratio *float64, limit, meridian, nginx float64) Target {
	detail := fmt.Sprintf("%.3f ms vs %.3f ms", meridian, nginx)
	if ratio != nil {
		return Target{Name: fmt.Sprintf("%s added %s / nginx's", proto, pct), Value: *ratio, Limit: limit, Unit: "x", Met: *ratio <= limit, Detail: detail}
	}
	d := meridian - nginx
	return Target{Name: fmt.Sprintf("%s added %s - nginx's", proto, pct), Value: d, Limit: 0, Unit: "ms", Met: d <= 0,
		Detail: detail + " (nginx's is not positive: no ratio)"}
}

// WriteJSON writes r to path, indented.
func WriteJSON(path string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable writes the summary: per protocol every variant's latency, the proxy pairs'
// added latency and its ratio, the processes' cost; then the targets.
func WriteTable(w io.Writer, r *Result) error {
	fmt.Fprintf(w, "%g requests/s, %d rounds x %gs per variant after %gs warm-up, %d connections, %d CPUs, nginx %s\n\n",
		r.RatePerSecond, r.Rounds, r.SegmentSeconds, r.WarmupSeconds, r.Connections, r.CPUs, r.NginxVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "protocol\tvariant\trequests\terrors\tround p50 ms\tround p99 ms\tadded p50\tadded p99\t\tall: p50\tp90\tp99\tp99.9\tmax ms\t")
	for _, p := range r.Protocols {
		for _, v := range p.Variants {
			added := "-\t-"
			switch v.Variant {
			case Nginx:
				added = fmt.Sprintf("%.3f\t%.3f", p.NginxAddedP50Ms, p.NginxAddedP99Ms)
			case Meridian:
				added = fmt.Sprintf("%.3f\t%.3f", p.MeridianAddedP50Ms, p.MeridianAddedP99Ms)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.3f\t%.3f\t%s\t\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", p.Protocol, v.Variant, v.Requests, v.Errors,
				v.MedianP50Ms, v.MedianP99Ms, added, v.P50Ms, v.P90Ms, v.P99Ms, v.P999Ms, v.MaxMs)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Protocols {
		if p.AddedP50Ratio != nil || p.AddedP99Ratio != nil {
			fmt.Fprintf(w, "%s: meridian's added latency / nginx's: p50 %s, p99 %s (medians of the rounds; pooled: p50 %s, p99 %s)\n", p.Protocol,
				fmtRatio(p.AddedP50Ratio), fmtRatio(p.AddedP99Ratio), fmtRatio(p.Pooled.P50Ratio), fmtRatio(p.Pooled.P99Ratio))
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "protocol\tprocess\tRSS max MiB\tanon\tfile\tVmHWM MiB\tCPU us/req\tallocs/req\tallocs/req raw\t")
	for _, p := range r.Protocols {
		for _, v := range p.Variants {
			for _, pr := range v.Processes {
				fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", p.Protocol, pr.Name, mib(pr.RSSMaxBytes),
					mib(pr.RSSAnonBytes), mib(pr.RSSFileBytes), mib(pr.RSSPeakBytes), pr.CPUMicrosPerRequest,
					fmtOpt(pr.AllocsPerRequest), fmtOpt(pr.AllocsPerRequestRaw))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets (issue 13):")
		for _, t := range r.Targets {
			mark := "met"
			if !t.Met {
				mark = "MISSED"
			}
			prec := 2
			if t.Unit == "ms" {
				prec = 3
			}
			fmt.Fprintf(w, "  %-6s %-42s %8.*f %-3s (limit %g%s; %s)\n", mark, t.Name, prec, t.Value, t.Unit, t.Limit, t.Unit, t.Detail)
		}
	}
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func fmtRatio(r *float64) string {
	if r == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", *r)
}

func fmtOpt(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

// missed lists the targets r did not meet.
func (r *Result) missed() []string {
	var out []string
	for _, t := range r.Targets {
		if !t.Met {
			out = append(out, t.Name)
		}
	}
	return out
}

// MissedError is an error naming the targets r missed, or nil.
func (r *Result) MissedError() error {
	if m := r.missed(); len(m) > 0 {
		return fmt.Errorf("targets missed: %s", strings.Join(m, "; "))
	}
	return nil
}

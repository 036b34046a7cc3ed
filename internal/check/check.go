package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Config says what to check.
type Config struct {
	// Namespace is the control plane's namespace ("linkerd").
	Namespace string
	// CLIVersion is the version of the running CLI, compared with the control plane's.
	CLIVersion string
	// MinValidity is how long the trust anchors, the issuer and the webhook certificate must
	// stay valid (60 days).
	MinValidity time.Duration
	// FetchTimeout bounds one request to a pod's admin port.
	FetchTimeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultConfig returns the defaults: namespace linkerd, 60 days of validity, 5 s per fetch.
func DefaultConfig() Config {
	return Config{Namespace: "linkerd", MinValidity: 60 * 24 * time.Hour, FetchTimeout: 5 * time.Second}
}

// Deps are the clients the checks use.
type Deps struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface // for the CRDs
	// Fetch gets a path of a pod's admin port; nil: PodFetcher through Kube.
	Fetch Fetcher
}

// Fetcher gets path (such as /ring) from port of pod's admin server. It is called from one
// goroutine at a time.
type Fetcher interface {
	Fetch(ctx context.Context, pod *corev1.Pod, port int, path string) ([]byte, error)
}

// Result is the outcome of one check.
type Result struct {
	Name    string   `json:"name"`
	OK      bool     `json:"ok"`
	Skipped bool     `json:"skipped,omitempty"`
	Message string   `json:"message,omitempty"` // what was found (on failure: what is wrong)
	Details []string `json:"details,omitempty"` // one line per problem
	Hint    string   `json:"hint,omitempty"`    // what to do about a failure
}

// Report is the outcome of every check, in order.
type Report struct {
	Namespace string   `json:"namespace"`
	OK        bool     `json:"success"`
	Results   []Result `json:"checks"`
}

// Failed returns the failed (not skipped) checks.
func (r Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if !res.OK && !res.Skipped {
			out = append(out, res)
		}
	}
	return out
}

// state is what the checks learn and later checks use.
type state struct {
	cfg  Config
	deps Deps
	now  time.Time
	// Filled by the pods check.
	workloads map[string]*workload // by component
}

// check is one step: it returns its result; a failed check with stop set skips the rest.
type check struct {
	name string
	run  func(ctx context.Context, s *state) (res Result, stop bool)
}

var checks = []check{
	{"can reach the Kubernetes API", checkAPI},
	{"the control-plane namespace exists", checkNamespace},
	{"the CRDs are installed", checkCRDs},
	{"the control-plane pods are ready", checkPods},
	{"the destination replicas agree on one ring, and every service has one owner", checkRing},
	{"the trust anchors and the issuer are valid", checkIdentity},
	{"the webhook's certificate matches its caBundle and is valid", checkWebhook},
	{"the CLI and the control plane have the same version", checkVersion},
}

// Run runs every check against the cluster deps reach.
func Run(ctx context.Context, cfg Config, deps Deps) Report {
	d := DefaultConfig()
	if cfg.Namespace == "" {
		cfg.Namespace = d.Namespace
	}
	if cfg.MinValidity == 0 {
		cfg.MinValidity = d.MinValidity
	}
	if cfg.FetchTimeout == 0 {
		cfg.FetchTimeout = d.FetchTimeout
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	if deps.Fetch == nil {
		deps.Fetch = &PodFetcher{Kube: deps.Kube, Timeout: cfg.FetchTimeout}
	}
	s := &state{cfg: cfg, deps: deps, now: now()}
	rep := Report{Namespace: cfg.Namespace, OK: true}
	stopped := ""
	for _, c := range checks {
		if stopped != "" {
			rep.Results = append(rep.Results, Result{Name: c.name, Skipped: true, Message: "skipped: " + stopped})
			continue
		}
		res, stop := c.run(ctx, s)
		res.Name = c.name
		if !res.OK {
			rep.OK = false
			if stop {
				stopped = c.name + " failed"
			}
		}
		rep.Results = append(rep.Results, res)
	}
	return rep
}

// WriteText prints the report as `linkerd check` does: a ✓ or × line per check, the details
// and the hint of each failure indented below it, and a summary.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "meridian check (namespace %s)\n\n", r.Namespace)
	for _, res := range r.Results {
		mark := "✓"
		switch {
		case res.Skipped:
			mark = "-"
		case !res.OK:
			mark = "×"
		}
		line := mark + " " + res.Name
		if res.Message != "" {
			line += ": " + res.Message
		}
		b.WriteString(line + "\n")
		for _, d := range res.Details {
			b.WriteString("    " + d + "\n")
		}
		if !res.OK && !res.Skipped && res.Hint != "" {
			b.WriteString("    → " + res.Hint + "\n")
		}
	}
	if n := len(r.Failed()); n > 0 {
		fmt.Fprintf(&b, "\n%d of %d checks failed\n", n, len(r.Results))
	} else {
		fmt.Fprintf(&b, "\nStatus check results are ✓\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the report as one JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func ok(msg string) (Result, bool) { return Result{OK: true, Message: msg}, false }

func fail(msg, hint string, details ...string) Result {
	return Result{Message: msg, Hint: hint, Details: details}
}

package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyFunc reports nil when the process is ready to serve, or an error saying why not.
// It is called from HTTP handler goroutines and must be safe for concurrent use.
type ReadyFunc func() error

// Options say what the admin endpoints report.
type Options struct {
	// Ready is /ready's answer; nil means always ready.
	Ready ReadyFunc
	// Warnings, when set, lists what an operator should know while the process serves (a
	// manifest that does not parse, say); /ready shows them under "warnings:" whether or
	// not the process is ready, without changing its status code.
	Warnings func() []string
	// Pprof serves /debug/pprof/.
	Pprof bool
}

// MaxReadyWarnings bounds the warnings /ready lists: a probe every few seconds should not
// carry one line per invalid object of a large cluster.
const MaxReadyWarnings = 100

// Handler returns the admin mux with /debug/pprof/ on: see NewHandler.
func Handler(g prometheus.Gatherer, ready ReadyFunc) http.Handler {
	return NewHandler(g, Options{Ready: ready, Pprof: true})
}

// NewHandler returns the admin mux: /metrics from g (never compressed), /live (always 200 while the process
// runs), /ready (200 "ready" when o.Ready returns nil, else 503 "not ready: " and the reason,
// then the first MaxReadyWarnings warnings and how many more there are) and, when o.Pprof, /debug/pprof/.
func NewHandler(g prometheus.Gatherer, o Options) http.Handler {
	mux := http.NewServeMux()
	// Uncompressed even when the scraper offers gzip: a control-plane process exposes a few
	// hundred series, and each gzip'd scrape keeps a compressor of about 800 KB in promhttp's
	// pool, which outlives the scrape (an idle destination replica's live heap after a forced
	// collection: 3.3 MiB scraped plainly, 4.9 MiB scraped with gzip).
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{DisableCompression: true}))
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("live\n"))
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		code := http.StatusOK
		if err := readyErr(o.Ready); err != nil {
			code = http.StatusServiceUnavailable
			b.WriteString("not ready: " + err.Error() + "\n")
		} else {
			b.WriteString("ready\n")
		}
		if o.Warnings != nil {
			if ws := o.Warnings(); len(ws) > 0 {
				b.WriteString("warnings:\n")
				for _, s := range ws[:min(len(ws), MaxReadyWarnings)] {
					b.WriteString("  " + s + "\n")
				}
				if n := len(ws) - MaxReadyWarnings; n > 0 {
					fmt.Fprintf(&b, "  ... and %d more (each was logged at warn when it appeared)\n", n)
				}
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(b.String()))
	})
	if o.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

func readyErr(ready ReadyFunc) error {
	if ready == nil {
		return nil
	}
	return ready()
}

// Serve serves h on lis until ctx ends, then shuts down gracefully (bounded to 5s), and
// then closes the connections still open, which cancels their requests' contexts (a
// /debug/pprof/profile?seconds=30 in flight). It returns nil after a shutdown caused by ctx,
// or the serve error otherwise.
func Serve(ctx context.Context, lis net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// Run listens on addr and serves the admin handler until ctx ends.
func Run(ctx context.Context, addr string, g prometheus.Gatherer, ready ReadyFunc) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, lis, Handler(g, ready))
}

package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// ClientIDHeader is the header in which a Linkerd (or Meridian) inbound proxy tells the
// application the verified identity of the client.
const ClientIDHeader = "l5d-client-id"

// AppConfig is one pod's demo application: `meridian demo app`.
type AppConfig struct {
	Pod             string   // namespace/name, in every answer
	HTTP, GRPC, TCP []string // addresses to serve an HTTP echo, the gRPC service, the line echo on
	Grace           time.Duration
}

// Echo is what the HTTP echo answers (as JSON) and the gRPC service puts in its response
// headers: who answered and the client identity the pod's proxy vouched for.
type Echo struct {
	Pod      string `json:"pod"`
	ClientID string `json:"client_id"`
	Method   string `json:"method,omitempty"`
	Host     string `json:"host,omitempty"`
	Path     string `json:"path,omitempty"`
}

// Metadata keys of the gRPC service's response headers.
const (
	grpcPodKey      = "x-demo-pod"
	grpcClientIDKey = "x-demo-client-id"
)

// App serves one pod's demo application on every address it was given. It counts what it
// serves in demo_app_requests_total{protocol,client_id} (client_id: the l5d-client-id its
// proxy set, "" without one) and demo_app_connections_total{protocol="tcp"}.
type App struct {
	cfg      AppConfig
	log      *zap.Logger
	requests *prometheus.CounterVec
	conns    prometheus.Counter

	lis   []net.Listener
	ready chan struct{}
}

// NewApp builds the application and binds its listeners; its metrics go to reg.
func NewApp(cfg AppConfig, reg prometheus.Registerer, log *zap.Logger) (*App, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Second
	}
	a := &App{cfg: cfg, log: log, ready: make(chan struct{}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "demo_app_requests_total", Help: "Requests the demo application served, by protocol and the client identity its proxy vouched for."}, []string{"protocol", "client_id"}),
		conns:    prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_app_connections_total", Help: "TCP connections the line echo accepted."}),
	}
	if reg != nil {
		if err := reg.Register(a.requests); err != nil {
			return nil, err
		}
		if err := reg.Register(a.conns); err != nil {
			return nil, err
		}
	}
	for _, addr := range append(append(append([]string{}, cfg.HTTP...), cfg.GRPC...), cfg.TCP...) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			a.closeListeners()
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		a.lis = append(a.lis, l)
	}
	if len(a.lis) == 0 {
		return nil, errors.New("nothing to serve: give --http, --grpc or --tcp addresses")
	}
	return a, nil
}

func (a *App) closeListeners() {
	for _, l := range a.lis {
		_ = l.Close()
	}
}

// Ready is nil once the application serves.
func (a *App) Ready() error {
	select {
	case <-a.ready:
		return nil
	default:
		return errors.New("starting")
	}
}

// Run serves until ctx ends, then stops within the grace period.
func (a *App) Run(ctx context.Context) error {
	nh, ng := len(a.cfg.HTTP), len(a.cfg.GRPC)
	var wg sync.WaitGroup
	errs := make(chan error, len(a.lis))
	for i, l := range a.lis {
		var serve func(context.Context, net.Listener) error
		switch {
		case i < nh:
			serve = a.serveHTTP
		case i < nh+ng:
			serve = a.serveGRPC
		default:
			serve = a.serveTCP
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(ctx, l); err != nil {
				errs <- fmt.Errorf("%s: %w", l.Addr(), err)
			}
		}()
	}
	close(a.ready)
	a.log.Info("serving", zap.String("pod", a.cfg.Pod), zap.Strings("http", a.cfg.HTTP), zap.Strings("grpc", a.cfg.GRPC), zap.Strings("tcp", a.cfg.TCP))
	wg.Wait()
	close(errs)
	return errors.Join(drain(errs)...)
}

func drain(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

// serveHTTP answers every request with an Echo.
func (a *App) serveHTTP(ctx context.Context, l net.Listener) error {
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(ClientIDHeader)
		a.requests.WithLabelValues("http", id).Inc()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Echo{Pod: a.cfg.Pod, ClientID: id, Method: r.Method, Host: r.Host, Path: r.URL.Path})
	})}
	return serveUntil(ctx, a.cfg.Grace, func() error { return srv.Serve(l) }, srv.Shutdown, srv.Close, http.ErrServerClosed)
}

// serveUntil runs serve until ctx ends, then shuts it down gracefully (forcing it after
// grace). A serve error other than closed is returned.
func serveUntil(ctx context.Context, grace time.Duration, serve func() error, shutdown func(context.Context) error, force func() error, closed error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if shutdown(sctx) != nil {
		_ = force()
	}
	if err := <-errc; err != nil && !errors.Is(err, closed) {
		return err
	}
	return nil
}

// healthService is the gRPC service: grpc.health.v1.Health, whose Check answers SERVING and
// says in its response headers which pod answered and which client identity it saw.
type healthService struct {
	*health.Server
	app *App
}

func (h healthService) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	var id string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(ClientIDHeader); len(v) > 0 {
			id = v[0]
		}
	}
	h.app.requests.WithLabelValues("grpc", id).Inc()
	_ = grpc.SetHeader(ctx, metadata.Pairs(grpcPodKey, h.app.cfg.Pod, grpcClientIDKey, id))
	return h.Server.Check(ctx, in)
}

func (a *App) serveGRPC(ctx context.Context, l net.Listener) error {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, healthService{Server: health.NewServer(), app: a})
	return serveUntil(ctx, a.cfg.Grace, func() error { return srv.Serve(l) }, func(sctx context.Context) error {
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }()
		select {
		case <-done:
			return nil
		case <-sctx.Done():
			srv.Stop()
			<-done
			return sctx.Err()
		}
	}, func() error { srv.Stop(); return nil }, grpc.ErrServerStopped)
}

// maxLine bounds a line of the line echo; a longer one ends the connection.
const maxLine = 4 << 10

// serveTCP is the line echo: it answers every line with "<pod>: <line>".
func (a *App) serveTCP(ctx context.Context, l net.Listener) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	stop := context.AfterFunc(ctx, func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			_ = c.Close()
		}
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		a.conns.Inc()
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			_ = c.Close()
			return nil
		}
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.echoLines(c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	}
}

func (a *App) echoLines(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, maxLine)
	for {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		a.requests.WithLabelValues("tcp", "").Inc()
		if _, err := fmt.Fprintf(c, "%s: %s\n", a.cfg.Pod, strings.TrimRight(string(line), "\r\n")); err != nil {
			return
		}
	}
}

package h2

import (
	"context"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

const wait = 10 * time.Second

// upstreamServer serves h with net/http's HTTP/2 server, plaintext with prior knowledge.
func upstreamServer(t testing.TB, h http.Handler) string {
	t.Helper()
	lis := testutil.Listen(t)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		<-done
	})
	return lis.Addr().String()
}

// h2Client is net/http's HTTP/2 client with prior knowledge, dialling addr.
func h2Client(t testing.TB, addr string) *http.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// relayProxy is a proxy on the package's relay: every request goes to one upstream.
type relayProxy struct {
	addr   string
	pool   *Pool
	up     string
	cfg    Config
	edit   *Edit
	mu     sync.Mutex
	ups    []*Conn
	obs    []*testObserver
	wg     sync.WaitGroup
	answer func(st *Stream) bool // answers instead of relaying when it returns true
}

func startRelay(t testing.TB, upstream string, cfg Config) *relayProxy {
	t.Helper()
	p := &relayProxy{pool: &Pool{}, up: upstream, cfg: cfg}
	lis := testutil.Listen(t)
	p.addr = lis.Addr().String()
	var servers []*Conn
	var smu sync.Mutex
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			sc := NewServerConn(nc, cfg, p)
			smu.Lock()
			servers = append(servers, sc)
			smu.Unlock()
			p.wg.Add(1)
			go func() { defer p.wg.Done(); _ = sc.Serve() }()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		smu.Lock()
		for _, sc := range servers {
			sc.Close()
		}
		smu.Unlock()
		p.pool.Close()
		testutil.Wait(t, testutil.StopWithin, "the relay's goroutines", p.wg.Wait)
	})
	return p
}

// upstream returns a connection with a stream reserved, dialling one when the pool has
// none that can take it.
func (p *relayProxy) upstream() (*Conn, error) {
	if c := p.pool.Take(); c != nil {
		return c, nil
	}
	nc, err := net.DialTimeout("tcp", p.up, wait)
	if err != nil {
		return nil, err
	}
	c, err := NewClientConn(nc, p.cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.ups = append(p.ups, c)
	p.mu.Unlock()
	p.pool.Add(c)
	p.wg.Add(1)
	go func() { defer p.wg.Done(); _ = c.Run() }()
	if !c.reserve() {
		return nil, ErrConnClosed
	}
	return c, nil
}

func (p *relayProxy) ServeStream(st *Stream) (*Conn, *Edit, Observer) {
	if p.answer != nil && p.answer(st) {
		return nil, nil, nil
	}
	o := &testObserver{done: make(chan error, 1)}
	p.mu.Lock()
	p.obs = append(p.obs, o)
	p.mu.Unlock()
	if c := p.pool.Take(); c != nil {
		return c, p.edit, o
	}
	p.wg.Add(1)
	go func() { // the first request dials
		defer p.wg.Done()
		c, err := p.upstream()
		if err != nil {
			st.Respond(http.StatusBadGateway, []hpack.HeaderField{{Name: "l5d-proxy-error", Value: err.Error()}}, nil)
			return
		}
		st.Relay(c, p.edit, o)
	}()
	return nil, nil, nil
}

func (p *relayProxy) observers() []*testObserver {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*testObserver(nil), p.obs...)
}

// testObserver records what the relay reported of one exchange.
type testObserver struct {
	mu       sync.Mutex
	status   int
	trailers map[string]string
	done     chan error
}

func (o *testObserver) Header(h *Header, trailers bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !trailers {
		o.status = h.Status
		return
	}
	o.trailers = map[string]string{}
	for _, f := range h.Fields {
		o.trailers[f.Name] = f.Value
	}
}

func (o *testObserver) Done(_ *Stream, err error) { o.done <- err }

package proxytest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// Wait bounds the waits of these helpers on a peer: a connection's deadline.
const Wait = 20 * time.Second

// Serve runs srv on lis until t ends, then closes it and waits for Serve to return.
func Serve(t testing.TB, srv *http.Server, lis net.Listener) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		_ = srv.Close()
		testutil.Wait(t, testutil.StopWithin, "the test HTTP server to stop", func() { <-done })
	})
}

// ServeHTTP serves h on lis (HTTP/1.1, and HTTP/2 with prior knowledge) until t ends.
func ServeHTTP(t testing.TB, lis net.Listener, h http.Handler) {
	t.Helper()
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	Serve(t, &http.Server{Handler: h, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}, lis)
}

// Scripted is an HTTP/1.1 server that answers each request it reads (with net/http's
// parser) with the next of its responses, raw bytes, closing the connection after those
// marked close. It records what it read of each request and counts connections and
// requests.
type Scripted struct {
	Addr     net.Addr
	Conns    atomic.Int64
	Requests atomic.Int64
	mu       sync.Mutex
	seen     []string
}

// StartScripted runs a Scripted server on loopback until t ends: respond gets the number of
// the request (from 1) and its method.
func StartScripted(t testing.TB, respond func(n int64, method string) (resp string, closeAfter bool)) *Scripted {
	t.Helper()
	s := &Scripted{}
	lis := testutil.Listen(t)
	s.Addr = lis.Addr()
	testutil.ServeConns(t, lis, "the scripted server", func(c net.Conn) {
		s.Conns.Add(1)
		_ = c.SetDeadline(time.Now().Add(Wait))
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(req.Body)
			var head strings.Builder
			_ = req.Header.Write(&head)
			s.mu.Lock()
			s.seen = append(s.seen, req.Method+" "+req.RequestURI+" "+req.Host+"\n"+head.String()+string(body))
			s.mu.Unlock()
			resp, closeAfter := respond(s.Requests.Add(1), req.Method)
			if _, err := io.WriteString(c, resp); err != nil || closeAfter {
				return
			}
		}
	})
	return s
}

// Port is the server's port.
func (s *Scripted) Port() uint16 { return uint16(s.Addr.(*net.TCPAddr).Port) }

// Last is what the server read of the last request: "METHOD request-URI host\n", the
// header fields as net/http writes them, then the body; "" before the first.
func (s *Scripted) Last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return ""
	}
	return s.seen[len(s.seen)-1]
}

// Exchange writes raw on c and reads n final responses to requests of method (interim
// responses are skipped), each with its body read into memory.
func Exchange(t testing.TB, c net.Conn, raw string, n int, method string) []*http.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(Wait))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for range n {
		res, err := http.ReadResponse(br, &http.Request{Method: method})
		for err == nil && res.StatusCode < 200 { // interim responses: the final one follows
			res, err = http.ReadResponse(br, &http.Request{Method: method})
		}
		if err != nil {
			t.Fatalf("response %d: %v", len(out)+1, err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", len(out)+1, err)
		}
		res.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, res)
	}
	return out
}

// Result is the outcome of a GET sent by GetAsync: the status and body, or the error.
type Result struct {
	Status int
	Body   string
	Err    error
}

// GetAsync sends GET url with hc on a goroutine of its own and delivers the Result on the
// channel returned (buffered: the goroutine ends whether or not anyone receives). hc's
// timeout bounds it.
func GetAsync(hc *http.Client, url string) <-chan Result {
	out := make(chan Result, 1)
	go func() {
		res, err := hc.Get(url)
		if err != nil {
			out <- Result{Err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		out <- Result{Status: res.StatusCode, Body: string(b), Err: err}
	}()
	return out
}

// Dial connects to addr over TCP; the connection is closed when t ends.
func Dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, Wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Body reads what is left of res's body (a read error ends it).
func Body(res *http.Response) string {
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// LongPoll is an application whose every request waits for the client to give up: it reports
// each request on Arrived, and on Cancelled once the request's context ends (its connection
// closed), answering only after 30 s.
type LongPoll struct {
	Addr      net.Addr
	Arrived   chan struct{}
	Cancelled chan struct{}
}

// StartLongPoll runs a LongPoll on a loopback listener until t ends.
func StartLongPoll(t testing.TB) *LongPoll {
	t.Helper()
	lis := testutil.Listen(t)
	lp := &LongPoll{Addr: lis.Addr(), Arrived: make(chan struct{}, 16), Cancelled: make(chan struct{}, 16)}
	stop := make(chan struct{})
	ServeHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lp.Arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			lp.Cancelled <- struct{}{}
		case <-time.After(30 * time.Second):
			_, _ = io.WriteString(w, "late")
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop) }) // before ServeHTTP's cleanup, which waits for the handlers
	return lp
}

// Port is the application's port.
func (lp *LongPoll) Port() uint16 { return uint16(lp.Addr.(*net.TCPAddr).Port) }

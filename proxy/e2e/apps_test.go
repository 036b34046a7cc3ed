package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// echoReply is what the HTTP echo answers: who served the request and what it saw.
type echoReply struct {
	Pod      string `json:"pod"`
	ClientID string `json:"client_id"` // the l5d-client-id header it received
	Remote   string `json:"remote"`
	Proto    string `json:"proto"` // the request's protocol as it reached the app
}

// httpEcho is an application: an HTTP server answering every request with an echoReply,
// after Delay when it is set.
type httpEcho struct {
	pod      pod
	Delay    atomic.Int64 // nanoseconds
	requests atomic.Int64
}

// startHTTPEcho serves the echo on lis (a new listener on the pod's address when nil) until
// the test ends.
func startHTTPEcho(t *testing.T, p pod, lis net.Listener) *httpEcho {
	t.Helper()
	if lis == nil {
		lis = listenOn(t, p.appAddr())
	}
	e := &httpEcho{pod: p}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, Protocols: &protocols}
	testutil.Go(t, "http echo "+p.name, func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- srv.Serve(lis) }()
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return e
}

func (e *httpEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	if d := time.Duration(e.Delay.Load()); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoReply{Pod: e.pod.name, ClientID: r.Header.Get("l5d-client-id"), Remote: r.RemoteAddr, Proto: r.Proto})
}

// tcpEcho is an application speaking a line protocol: every line it reads it writes back
// prefixed with its pod's name.
type tcpEcho struct {
	pod   pod
	conns atomic.Int64
}

func startTCPEcho(t *testing.T, p pod, lis net.Listener) *tcpEcho {
	t.Helper()
	if lis == nil {
		lis = listenOn(t, p.appAddr())
	}
	e := &tcpEcho{pod: p}
	testutil.Go(t, "tcp echo "+p.name, func(ctx context.Context) error {
		var wg sync.WaitGroup
		var mu sync.Mutex
		open := map[net.Conn]bool{}
		stop := context.AfterFunc(ctx, func() {
			_ = lis.Close()
			mu.Lock()
			defer mu.Unlock()
			for c := range open {
				_ = c.Close()
			}
		})
		defer stop()
		for {
			c, err := lis.Accept()
			if err != nil {
				wg.Wait()
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			e.conns.Add(1)
			mu.Lock()
			open[c] = true
			if ctx.Err() != nil { // stopping: the closer may have run already
				_ = c.Close()
			}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { mu.Lock(); delete(open, c); mu.Unlock(); _ = c.Close() }()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(p.name + ": " + line)); err != nil {
						return
					}
				}
			}()
		}
	})
	return e
}

// listenOn listens on addr until the test ends.
func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	return lis
}

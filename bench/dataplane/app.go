package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// app is the application every variant reaches: an HTTP/1.1 server that answers every
// request with a fixed response (reading heads in place, so that it costs each variant the
// same little), and a gRPC server with the standard health service. It records the
// l5d-client-id the server proxy sets, to show that Meridian's requests came over mTLS.
type app struct {
	httpLis, grpcLis net.Listener
	grpc             *grpc.Server

	clientID  atomic.Pointer[string] // the last l5d-client-id seen (HTTP/1.1 or gRPC)
	requests  atomic.Int64
	malformed atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// appResponse is the HTTP/1.1 answer.
var appResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")

// startApp listens on httpAddr and grpcAddr and serves until close.
func startApp(httpAddr, grpcAddr string) (*app, error) {
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return nil, err
	}
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		hl.Close()
		return nil, err
	}
	a := &app{httpLis: hl, grpcLis: gl, conns: map[net.Conn]struct{}{}}
	a.grpc = grpc.NewServer(grpc.UnaryInterceptor(a.record))
	healthpb.RegisterHealthServer(a.grpc, health.NewServer())
	a.wg.Add(2)
	go func() { defer a.wg.Done(); a.acceptHTTP() }()
	go func() { defer a.wg.Done(); _ = a.grpc.Serve(gl) }()
	return a, nil
}

// record notes the l5d-client-id of a gRPC call.
func (a *app) record(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	a.requests.Add(1)
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("l5d-client-id"); len(v) > 0 {
			a.noteClientID([]byte(v[0]))
		}
	}
	return h(ctx, req)
}

func (a *app) noteClientID(v []byte) {
	if p := a.clientID.Load(); p != nil && *p == string(v) {
		return
	}
	s := string(v)
	a.clientID.Store(&s)
}

// lastClientID is the last l5d-client-id seen ("" for none).
func (a *app) lastClientID() string {
	if p := a.clientID.Load(); p != nil {
		return *p
	}
	return ""
}

func (a *app) acceptHTTP() {
	for {
		c, err := a.httpLis.Accept()
		if err != nil {
			return
		}
		a.mu.Lock()
		if a.conns == nil { // closing
			a.mu.Unlock()
			c.Close()
			return
		}
		a.conns[c] = struct{}{}
		a.wg.Add(1)
		a.mu.Unlock()
		go func() {
			defer a.wg.Done()
			a.serveHTTP(c)
			a.mu.Lock()
			delete(a.conns, c)
			a.mu.Unlock()
			c.Close()
		}()
	}
}

// serveHTTP answers the requests of one connection: GETs (or requests with a
// Content-Length body); anything else gets a 400 and the connection closes.
func (a *app) serveHTTP(c net.Conn) {
	br := bufio.NewReaderSize(c, 4<<10)
	for {
		closeAfter, n, err := readRequestHead(br, a)
		if err != nil {
			if !errors.Is(err, errEOF) {
				a.malformed.Add(1)
				_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}
			return
		}
		if _, err := br.Discard(int(n)); err != nil {
			return
		}
		a.requests.Add(1)
		if _, err := c.Write(appResponse); err != nil || closeAfter {
			return
		}
	}
}

var (
	errEOF        = errors.New("end of stream")
	errAppRequest = errors.New("request the benchmark's application does not take")
)

var (
	hdrClientID      = []byte("l5d-client-id:")
	hdrContentLength = []byte("content-length:")
	hdrTransferEnc   = []byte("transfer-encoding:")
	hdrConnection    = []byte("connection:")
)

// readRequestHead reads one request head; it returns whether the connection closes after
// it and the length of its body.
func readRequestHead(br *bufio.Reader, a *app) (closeAfter bool, body int64, err error) {
	first := true
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err != nil && first && len(line) == 0:
			return false, 0, errEOF
		case err != nil:
			return false, 0, err
		}
		if first {
			if !bytes.HasSuffix(bytes.TrimRight(line, "\r\n"), []byte(" HTTP/1.1")) {
				return false, 0, errAppRequest
			}
			first = false
			continue
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return closeAfter, body, nil
		}
		switch {
		case hasPrefixFold(line, hdrClientID):
			a.noteClientID(bytes.TrimSpace(line[len(hdrClientID):]))
		case hasPrefixFold(line, hdrContentLength):
			n, err := strconv.ParseInt(string(bytes.TrimSpace(line[len(hdrContentLength):])), 10, 64)
			if err != nil || n < 0 || n > 1<<20 {
				return false, 0, errAppRequest
			}
			body = n
		case hasPrefixFold(line, hdrTransferEnc):
			return false, 0, errAppRequest
		case hasPrefixFold(line, hdrConnection):
			closeAfter = bytes.Contains(bytes.ToLower(line), []byte("close"))
		}
	}
}

// hasPrefixFold reports whether line starts with the lowercase ASCII prefix, ignoring case.
func hasPrefixFold(line, prefix []byte) bool {
	return len(line) >= len(prefix) && bytes.EqualFold(line[:len(prefix)], prefix)
}

// close stops both servers and waits for their goroutines.
func (a *app) close() {
	_ = a.httpLis.Close()
	a.grpc.Stop()
	a.mu.Lock()
	for c := range a.conns {
		_ = c.Close()
	}
	a.conns = nil
	a.mu.Unlock()
	a.wg.Wait()
}

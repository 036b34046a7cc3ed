package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The generator is open-loop: a segment's requests are due at start + i/rate, and a worker
// takes the next due request, waits for its time (or sends at once when it is late), and
// records the latency from the time it was due. Workers that are all busy delay the
// requests that fall due meanwhile, and that delay counts (no coordinated omission).

// newHistogram records microseconds from 1 us to a minute, to 3 significant digits.
func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
}

// sender sends one request and waits for its response. A sender is used by one worker at a
// time; an error leaves it ready for the next request (reconnecting if it must).
type sender interface {
	send(ctx context.Context) error
	close()
}

// segmentResult is what one segment measured.
type segmentResult struct {
	latency *hdrhistogram.Histogram // from the due time
	service *hdrhistogram.Histogram // from the send
	sent    int64
	errors  int64
	elapsed time.Duration // from the first due time to the last response
	lateMax time.Duration // the largest delay between a due time and its send
	err     error         // the first error
}

// runSegment sends rate requests per second for d over senders (one worker each). It
// returns once every worker has finished.
func runSegment(ctx context.Context, senders []sender, rate float64, d time.Duration) segmentResult {
	interval := time.Duration(float64(time.Second) / rate)
	n := int64(d / interval)
	start := time.Now().Add(5 * time.Millisecond) // every worker is waiting by then
	var next atomic.Int64
	type part struct {
		latency, service *hdrhistogram.Histogram
		sent, errors     int64
		lateMax          time.Duration
		err              error
		last             time.Time
	}
	parts := make([]part, len(senders))
	var wg sync.WaitGroup
	for w, s := range senders {
		p := &parts[w]
		p.latency, p.service = newHistogram(), newHistogram()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				due := start.Add(time.Duration(i) * interval)
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
				}
				sentAt := time.Now()
				err := s.send(ctx)
				done := time.Now()
				p.sent++
				p.lateMax = max(p.lateMax, sentAt.Sub(due))
				p.last = done
				if err != nil {
					p.errors++
					if p.err == nil {
						p.err = err
					}
					continue
				}
				_ = p.latency.RecordValue(max(1, done.Sub(due).Microseconds()))
				_ = p.service.RecordValue(max(1, done.Sub(sentAt).Microseconds()))
			}
		}()
	}
	wg.Wait()
	res := segmentResult{latency: newHistogram(), service: newHistogram()}
	var last time.Time
	for i := range parts {
		p := &parts[i]
		res.latency.Merge(p.latency)
		res.service.Merge(p.service)
		res.sent += p.sent
		res.errors += p.errors
		res.lateMax = max(res.lateMax, p.lateMax)
		if res.err == nil {
			res.err = p.err
		}
		if p.last.After(last) {
			last = p.last
		}
	}
	res.elapsed = last.Sub(start)
	return res
}

// requestTimeout bounds one request: a request that takes longer is an error.
const requestTimeout = 10 * time.Second

// h1Sender sends a fixed HTTP/1.1 request over one keep-alive connection.
type h1Sender struct {
	addr string
	req  []byte
	c    net.Conn
	br   *bufio.Reader
}

// newH1Sender sends GET / to addr: in origin-form with Host authority, or with proxy set in
// absolute-form (an explicit HTTP proxy).
func newH1Sender(addr, authority string, proxy bool) *h1Sender {
	target := "/"
	if proxy {
		target = "http://" + authority + "/"
	}
	req := "GET " + target + " HTTP/1.1\r\nHost: " + authority + "\r\nUser-Agent: meridian-bench\r\nAccept: */*\r\n\r\n"
	return &h1Sender{addr: addr, req: []byte(req)}
}

func (s *h1Sender) send(ctx context.Context) error {
	if s.c == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return err
		}
		s.c, s.br = c, bufio.NewReaderSize(c, 4<<10)
	}
	_ = s.c.SetDeadline(time.Now().Add(requestTimeout))
	keep, err := s.exchange()
	if err != nil || !keep {
		s.close()
	}
	return err
}

func (s *h1Sender) exchange() (keep bool, err error) {
	if _, err := s.c.Write(s.req); err != nil {
		return false, err
	}
	return readResponse(s.br)
}

var (
	hdrChunked = []byte("chunked")
	hdrClose   = []byte("close")
)

// readResponse reads a 200 response and its body (Content-Length or chunked); keep is false
// when the server closes the connection after it.
func readResponse(br *bufio.Reader) (keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return false, fmt.Errorf("response %q", bytes.TrimSpace(line[:min(len(line), 64)]))
	}
	length, chunked, keep := int64(-1), false, true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
		switch {
		case hasPrefixFold(line, hdrContentLength):
			if length, err = strconv.ParseInt(string(bytes.TrimSpace(line[len(hdrContentLength):])), 10, 64); err != nil {
				return false, fmt.Errorf("content-length: %w", err)
			}
		case hasPrefixFold(line, hdrTransferEnc):
			chunked = bytes.Contains(bytes.ToLower(line), hdrChunked)
		case hasPrefixFold(line, hdrConnection):
			keep = !bytes.Contains(bytes.ToLower(line), hdrClose)
		}
	}
	switch {
	case chunked:
		_, err = io.Copy(io.Discard, httputil.NewChunkedReader(br))
	case length >= 0:
		_, err = br.Discard(int(length))
	default:
		return false, errors.New("response without a length")
	}
	return keep, err
}

func (s *h1Sender) close() {
	if s.c != nil {
		_ = s.c.Close()
		s.c, s.br = nil, nil
	}
}

// grpcClient is one gRPC connection (HTTP/2, plaintext) shared by every worker of a
// variant: each worker's sender calls Health/Check on it.
type grpcClient struct {
	conn   *grpc.ClientConn
	health healthpb.HealthClient
}

// newGRPCClient connects to addr; authority is the :authority of the calls ("": addr).
func newGRPCClient(addr, authority string) (*grpcClient, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if authority != "" {
		opts = append(opts, grpc.WithAuthority(authority))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, err
	}
	return &grpcClient{conn: conn, health: healthpb.NewHealthClient(conn)}, nil
}

func (g *grpcClient) close() { _ = g.conn.Close() }

// grpcSender is one worker's use of a grpcClient.
type grpcSender struct{ g *grpcClient }

var healthRequest = &healthpb.HealthCheckRequest{}

func (s grpcSender) send(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	res, err := s.g.health.Check(ctx, healthRequest)
	if err != nil {
		return err
	}
	if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health %s", res.GetStatus())
	}
	return nil
}

func (grpcSender) close() {}

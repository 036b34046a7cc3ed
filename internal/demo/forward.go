package demo

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Forwarder plays the Service linkerd-dst, as kube-proxy does for a ClusterIP: each
// connection goes to one of the replicas, taken in turn, skipping those that refuse it. The
// proxies' first lookup of a service lands there; a replica that does not own the service
// redirects them to its owner, which they then reach directly.
type Forwarder struct {
	lis      net.Listener
	backends func() []string // the replicas' gRPC addresses; called for every connection
	log      *zap.Logger
	next     atomic.Uint64

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// dialTimeout bounds a connection attempt to one replica.
const dialTimeout = 500 * time.Millisecond

// NewForwarder listens on addr.
func NewForwarder(addr string, backends func() []string, log *zap.Logger) (*Forwarder, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Forwarder{lis: l, backends: backends, log: log, conns: map[net.Conn]bool{}}, nil
}

// Addr is the listener's address.
func (f *Forwarder) Addr() string { return f.lis.Addr().String() }

// Run forwards connections until ctx ends, then closes every one of them.
func (f *Forwarder) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		_ = f.lis.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for c := range f.conns {
			_ = c.Close()
		}
	})
	defer stop()
	defer f.wg.Wait()
	for {
		c, err := f.lis.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !f.track(ctx, c) {
			_ = c.Close()
			return nil
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			f.forward(ctx, c)
		}()
	}
}

func (f *Forwarder) track(ctx context.Context, c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

func (f *Forwarder) forward(ctx context.Context, c net.Conn) {
	addrs := f.backends()
	if len(addrs) == 0 {
		return
	}
	start := int(f.next.Add(1))
	var up net.Conn
	for i := range addrs {
		addr := addrs[(start+i)%len(addrs)]
		d := net.Dialer{Timeout: dialTimeout}
		var err error
		if up, err = d.DialContext(ctx, "tcp", addr); err == nil {
			break
		}
		f.log.Debug("linkerd-dst: replica refused", zap.String("replica", addr), zap.Error(err))
	}
	if up == nil {
		return
	}
	if !f.track(ctx, up) {
		_ = up.Close()
		return
	}
	defer f.untrack(up)
	pipe(c, up)
}

// pipe copies both ways until both directions ended (passing on a half-close) or one failed.
func pipe(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(b, a)
	}()
	copyHalf(a, b)
	<-done
}

func copyHalf(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		_ = cw.CloseWrite()
		return
	}
	_ = dst.Close()
	_ = src.Close()
}

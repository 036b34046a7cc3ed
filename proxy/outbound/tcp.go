package outbound

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/balance"
	"github.com/meridian-mesh/meridian/proxy/detect"
	"github.com/meridian-mesh/meridian/proxy/httpproxy"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// proxyTCP connects a transparent opaque connection to its target and copies it both ways;
// a connection that cannot be connected (no endpoints, every attempt failed) is reset.
func (o *Outbound) proxyTCP(client, raw net.Conn, t *target) {
	up, lease, err := o.connectTCP(o.ctx, t)
	if err != nil {
		o.log.Debug("tcp: connect", zap.String("authority", t.authority), zap.Error(err))
		refuse(raw)
		return
	}
	defer lease.Release()
	splice(client, up)
}

// connectTCP connects to the target for an opaque session: the endpoint with the fewest
// connections (another one once when the first fails to connect), or the direct address. It
// returns balance.ErrNoEndpoints for a target without endpoints. The lease is released by
// the caller when the connection ends.
func (o *Outbound) connectTCP(ctx context.Context, t *target) (net.Conn, balance.Lease, error) {
	if t.direct != nil {
		c, err := t.direct.dial(ctx, transportheader.Opaque)
		return c, balance.Lease{}, err
	}
	var tried *balance.Endpoint[*endpoint]
	var lastErr error
	for range 2 {
		e, err := t.lc.Pick(time.Now())
		if err != nil {
			return nil, balance.Lease{}, err
		}
		if e == tried {
			if e = otherThan(t.lc.Endpoints(), tried); e == nil {
				break
			}
		}
		lease := t.lc.Acquire(e)
		c, err := e.Value().dial(ctx, transportheader.Opaque)
		if err == nil {
			return c, lease, nil
		}
		lease.Failed(time.Now())
		tried, lastErr = e, err
	}
	return nil, balance.Lease{}, lastErr
}

// otherThan returns an endpoint of eps other than not, or nil.
func otherThan(eps []*balance.Endpoint[*endpoint], not *balance.Endpoint[*endpoint]) *balance.Endpoint[*endpoint] {
	for _, e := range eps {
		if e != not {
			return e
		}
	}
	return nil
}

// serveConnect answers CONNECT host:port: it connects to the target as an opaque session,
// answers 200 Connection established and tunnels the connection; 503 when the target has no
// endpoints, 502 when it cannot be reached.
func (o *Outbound) serveConnect(w http.ResponseWriter, req *http.Request, pr *httpproxy.Request) {
	if req.ProtoMajor != 1 {
		proxyError(w, req, http.StatusBadRequest, "CONNECT is supported over HTTP/1.1 only")
		return
	}
	t, err := o.targets.acquire(req.Context(), pr.Target.String())
	if err != nil {
		o.resolveError(w, req, err)
		return
	}
	defer t.release()
	up, lease, err := o.connectTCP(req.Context(), t)
	if err != nil {
		o.upstreamError(w, req, t, err)
		return
	}
	defer lease.Release()
	established := func(bw *bufio.Writer) error {
		if _, err := bw.WriteString(httpproxy.ConnectEstablished); err != nil {
			return err
		}
		return bw.Flush()
	}
	if !o.tunnel(w, up, established) {
		proxyError(w, req, http.StatusInternalServerError, "cannot take over the connection")
	}
}

// tunnel takes over w's client connection, writes the answer that opens the tunnel (write,
// on the connection's buffered writer) and copies both ways between the client (the bytes
// that came after its request first) and up until both are done. It returns false, having
// closed up, when the connection could not be taken over (the caller answers); once it is
// taken over, a failure closes both.
func (o *Outbound) tunnel(w http.ResponseWriter, up io.ReadWriteCloser, write func(*bufio.Writer) error) bool {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		return false
	}
	if !o.conns.addTunnel(conn) {
		_ = up.Close()
		_ = conn.Close()
		return true
	}
	defer o.conns.tunnelDone()
	defer o.conns.remove(conn)
	if err := write(brw.Writer); err != nil {
		_ = up.Close()
		_ = conn.Close()
		return true
	}
	var client net.Conn = conn
	if n := brw.Reader.Buffered(); n > 0 { // the tunnel's first bytes came with the request
		b, _ := brw.Reader.Peek(n)
		client = detect.NewConn(conn, append([]byte(nil), b...))
	}
	splice(client, up)
	return true
}

// bufPool holds the copy buffers of tunnels and response bodies.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// splice copies a and b both ways until both directions ended (an end of stream is passed on
// as a half-close where the stream supports one) or one failed (both are closed then); it
// closes both before it returns.
func splice(a, b io.ReadWriteCloser) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyHalf(a, b)
	}()
	copyHalf(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
}

// copyHalf copies src to dst; at src's end it half-closes dst, on an error it closes both.
func copyHalf(dst, src io.ReadWriteCloser) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	// Plain Reader and Writer: the pooled buffer is used, not a fresh one from ReadFrom or
	// WriteTo.
	_, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *bp)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

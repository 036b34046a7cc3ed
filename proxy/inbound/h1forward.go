package inbound

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

// serve authorizes and forwards the request just read, as serveRequest does for net/http's;
// it returns false when the client connection must close.
func (ls *h1session) serve() bool {
	start := time.Now()
	srv := ls.port.Policy()
	req := ls.request()
	if status, msg, failed := ls.i.admit(ls.s, srv, srv.Match(&req)); status != 0 {
		return ls.refuse(ls.i.refusedRoute(ls.s, srv.Name), start, status, msg, failed)
	}
	rm := ls.routeMetrics(srv.Name)
	rm.Request()
	ls.rm, ls.start = rm, start
	status, failed, keep := ls.forward()
	ls.record(status, failed)
	return keep
}

// record counts the response once, before its last bytes leave (as net/http's server
// does: a client that has the response finds it counted).
func (ls *h1session) record(status int, failed bool) {
	if ls.rm != nil {
		ls.rm.Response(status, "", failed, time.Since(ls.start))
		ls.rm = nil
	}
}

// refuse answers a request the proxy does not forward. A client refused with 403 is
// disconnected after the answer (see Config.MaxConns).
func (ls *h1session) refuse(rm *metrics.Route, start time.Time, status int, msg string, failed bool) bool {
	rm.Response(status, "", failed, time.Since(start))
	closeAfter := ls.req.Close || status == http.StatusForbidden
	err := h1.WriteError(ls.bw, status, msg, closeAfter)
	return err == nil && !closeAfter
}

// forward sends the request to the application over a pooled connection and relays the
// response. It returns the status (0 when the response was cut short), whether the request
// failed, and whether the client connection can stay open.
func (ls *h1session) forward() (status int, failed, keep bool) {
	for retried := false; ; retried = true {
		ls.res.Raw = ls.res.Raw[:0]
		uc, err := ls.upstream()
		if err != nil {
			return ls.appError(err)
		}
		if !ls.tc.setUpstream(uc.C) {
			return 0, true, false // closed under us: shutting down
		}
		h1.WriteRequestHead(uc.W, &ls.req, ls.req.Target, ls.req.Host, ls.idLine)
		if n := ls.req.ContentLength; n > 0 {
			_, _ = uc.W.Write(ls.body[:n])
		}
		err = uc.W.Flush()
		if err == nil {
			ls.watch.Arm()
			err = h1.ReadHead(uc.R, &ls.res, maxHeaderBytes)
			if ls.watch.Disarm() { // nobody to answer: not the application's failure
				_ = uc.C.Close()
				ls.tc.setUpstream(nil)
				ls.rm = nil // no response to count (the request was), as on the outbound side
				ls.i.log.Debug("inbound: the client left before the response", zap.String("app", ls.target))
				return 0, false, false
			}
		}
		if err == nil {
			err = ls.res.ParseResponse()
		}
		if err == nil {
			return ls.relay(uc)
		}
		_ = uc.C.Close()
		ls.tc.setUpstream(nil)
		if uc.Reused && !retried && len(ls.res.Raw) == 0 && ls.req.Idempotent() {
			// The pooled connection had been closed by the application: so, likely, have the
			// others that went idle with it (net/http's retry on a stale connection).
			ls.pool.CloseIdle(false)
			continue
		}
		return ls.appError(err)
	}
}

// appError answers a request the application did not answer: 504 for a timeout, else 502.
func (ls *h1session) appError(err error) (int, bool, bool) {
	status := http.StatusBadGateway
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	ls.i.log.Debug("inbound: forwarding failed", zap.String("app", ls.target), zap.Error(err))
	ls.record(status, true)
	werr := h1.WriteError(ls.bw, status, "connection to the application failed", ls.req.Close)
	return status, true, werr == nil && !ls.req.Close
}

// relay passes interim (1xx) responses on, then the final response's head and body. The
// upstream connection goes back to the pool when its exchange completed cleanly.
func (ls *h1session) relay(uc *h1.Conn) (status int, failed, keep bool) {
	r := &ls.res
	var err error
	interim := false
	for err == nil && r.Status < 200 && r.Status != http.StatusSwitchingProtocols {
		h1.WriteResponseHead(ls.bw, r, h1.NoBody, false)
		interim = true
		if err = ls.bw.Flush(); err == nil {
			if err = h1.ReadHead(uc.R, r, maxHeaderBytes); err == nil {
				err = r.ParseResponse()
			}
		}
	}
	kind, ferr := h1.ResponseBody(&ls.req, r)
	if err == nil {
		err = ferr
	}
	if err != nil && !interim { // nothing written yet: the client gets a 502
		_ = uc.C.Close()
		ls.tc.setUpstream(nil)
		return ls.appError(err)
	}
	closeClient := ls.req.Close || kind == h1.EOFBody || ls.i.lean.isDraining()
	if err == nil {
		h1.WriteResponseHead(ls.bw, r, kind, closeClient)
		err = h1.RelayBody(ls.bw, uc.R, kind, r.ContentLength)
		if err == nil {
			ls.record(r.Status, r.Status >= 500)
			err = ls.bw.Flush()
		}
	}
	ls.tc.setUpstream(nil)
	if err == nil && kind != h1.EOFBody && !r.Close {
		ls.pool.Put(uc, ls.i.now(), ls.i.cfg.MaxIdleConnsPerApp)
	} else {
		_ = uc.C.Close()
	}
	if err != nil {
		ls.i.log.Debug("inbound: http/1: response", zap.String("app", ls.target), zap.Error(err))
		return 0, true, false
	}
	return r.Status, r.Status >= 500, !closeClient
}

// poolIdleTimeout closes a pooled connection to the application idle for this long (as the
// net/http Transport's IdleConnTimeout).
const poolIdleTimeout = 90 * time.Second

// upstream returns an idle connection to the application, or dials one.
func (ls *h1session) upstream() (*h1.Conn, error) {
	now := ls.i.now()
	for {
		uc := ls.pool.Take(now, int64(poolIdleTimeout))
		if uc == nil {
			break
		}
		if now-uc.IdleAt < int64(h1.StaleAfter) || !uc.Stale() {
			return uc, nil
		}
		_ = uc.C.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), ls.i.cfg.ConnectTimeout)
	defer cancel()
	c, err := ls.i.dial(ctx, "tcp", ls.target)
	if err != nil {
		return nil, err
	}
	return h1.NewConn(c), nil
}

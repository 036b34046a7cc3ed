package outbound

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/balance"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// serveLean forwards the request the session read, as serveHTTP does for net/http's; it
// returns false when the client connection must close.
func (o *Outbound) serveLean(s *h1session) bool {
	if !o.requests.enter() {
		s.req.Close = true
		s.writeError(http.StatusServiceUnavailable, "proxy is shutting down")
		return false
	}
	defer o.requests.exit()
	start := time.Now()
	t, err := o.targets.acquire(o.ctx, s.authority)
	if err == nil && t.direct != nil && s.cc.transparent() && s.authority != s.cc.origAuth {
		t.release() // a Host discovery does not know: where the client sent it
		t, err = o.targets.acquire(o.ctx, s.cc.origAuth)
	}
	if err != nil {
		o.log.Debug("http/1: resolve", zap.String("authority", s.authority), zap.Error(err))
		s.writeError(http.StatusServiceUnavailable, "discovery: "+err.Error())
		return true
	}
	defer t.release()
	return o.forwardLean(s, t, start)
}

// forwardLean sends the request to t's direct address or to the endpoint P2C picks, once
// more to another endpoint when that one cannot be connected to.
func (o *Outbound) forwardLean(s *h1session, t *target, start time.Time) bool {
	var tried *balance.Endpoint[*endpoint]
	var lastErr error
	for attempt := 0; ; attempt++ {
		ep, be, h := t.direct, (*balance.Endpoint[*endpoint])(nil), balance.Handle{}
		if ep == nil {
			var err error
			if be, err = t.p2c.Pick(start); err != nil && lastErr == nil {
				s.writeError(http.StatusServiceUnavailable, "no endpoints for "+t.authority)
				return true
			}
			if be == tried && be != nil {
				be = otherThan(t.p2c.Endpoints(), tried)
			}
			if be == nil {
				return s.upstreamError(lastErr)
			}
			h = t.p2c.Start(be)
			ep = be.Value()
		}
		keep, err := o.exchange(s, ep, h, start)
		if err == nil {
			return keep
		}
		now := time.Now()
		if errors.Is(err, h1.ErrClientGone) { // not the endpoint's failure; nobody to answer
			h.Done(now, now.Sub(start), false)
			ep.afterRequest()
			ep.route.Request()
			o.log.Debug("http/1: the client left before the response", zap.String("authority", t.authority))
			return false
		}
		h.Done(now, now.Sub(start), true)
		ep.afterRequest()
		if attempt == 0 && be != nil && isConnectError(err) && otherThan(t.p2c.Endpoints(), be) != nil {
			o.log.Debug("http/1: connect failed, trying another endpoint", zap.String("authority", t.authority), zap.Error(err))
			tried, lastErr = be, err
			continue
		}
		ep.route.Request()
		ep.route.Response(0, "", true, now.Sub(start))
		return s.upstreamError(err)
	}
}

// upstreamError answers a request no endpoint answered: 504 for a timeout, else 502.
func (s *h1session) upstreamError(err error) bool {
	status := http.StatusBadGateway
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	s.writeError(status, "upstream: "+err.Error())
	return !s.req.Close
}

// exchange sends the request on a connection to ep and relays the response. An error means
// no response reached the client (a connection error, or the upstream failed before its
// response head), and nothing was written to it; once the response started, failures only
// decide keep (false: the client connection must close).
func (o *Outbound) exchange(s *h1session, ep *endpoint, h balance.Handle, start time.Time) (keep bool, err error) {
	for retried := false; ; retried = true {
		s.res.Raw = s.res.Raw[:0]
		uc, err := ep.leanConn(o.ctx)
		if err != nil {
			return false, err
		}
		if !o.conns.upstream(s.entry, uc.C) {
			return false, errStopping
		}
		err = s.writeRequest(uc.W)
		if err == nil {
			s.watch.Arm()
			err = h1.ReadHead(uc.R, &s.res, o.cfg.MaxHeaderBytes)
			if s.watch.Disarm() {
				_ = uc.C.Close()
				o.conns.upstream(s.entry, nil)
				return false, h1.ErrClientGone
			}
		}
		if err == nil {
			err = s.res.ParseResponse()
		}
		if err == nil {
			return o.relayResponse(s, ep, uc, h, start), nil
		}
		_ = uc.C.Close()
		o.conns.upstream(s.entry, nil)
		if uc.Reused && !retried && len(s.res.Raw) == 0 && s.req.Idempotent() {
			// The pooled connection had been closed by the upstream: so, likely, have the
			// others that went idle with it. This is net/http's retry of a request on a
			// stale keep-alive connection, on the same endpoint.
			ep.lean.CloseIdle(false)
			continue
		}
		return false, err
	}
}

// writeRequest writes the request upstream: origin-form, the authority as Host, the
// end-to-end fields as the client sent them, the body.
func (s *h1session) writeRequest(w *bufio.Writer) error {
	h1.WriteRequestHead(w, &s.req, s.path, s.hostBytes, nil)
	if n := s.req.ContentLength; n > 0 {
		_, _ = w.Write(s.body[:n])
	}
	return w.Flush()
}

// relayResponse passes interim (1xx) responses on, then the final response's head and body;
// it returns whether the client connection can stay open. The upstream connection goes back
// to the pool when its exchange completed cleanly.
func (o *Outbound) relayResponse(s *h1session, ep *endpoint, uc *h1.Conn, h balance.Handle, start time.Time) bool {
	r := &s.res
	var err error
	interim := false
	for err == nil && r.Status < 200 && r.Status != http.StatusSwitchingProtocols {
		h1.WriteResponseHead(s.bw, r, h1.NoBody, false)
		interim = true
		if err = s.bw.Flush(); err == nil {
			if err = h1.ReadHead(uc.R, r, o.cfg.MaxHeaderBytes); err == nil {
				err = r.ParseResponse()
			}
		}
	}
	kind, ferr := h1.ResponseBody(&s.req, r)
	if err == nil {
		err = ferr
	}
	now := time.Now()
	h.Done(now, now.Sub(start), err != nil || r.Status >= 500)
	ep.route.Request()
	if err != nil && !interim { // nothing written yet: the client gets a 502
		_ = uc.C.Close()
		o.conns.upstream(s.entry, nil)
		ep.route.Response(0, "", true, time.Since(start))
		ep.afterRequest()
		return s.upstreamError(err)
	}
	closeClient := s.req.Close || kind == h1.EOFBody || o.conns.isDraining()
	if err == nil {
		h1.WriteResponseHead(s.bw, r, kind, closeClient)
		err = h1.RelayBody(s.bw, uc.R, kind, r.ContentLength)
		if err == nil {
			err = s.bw.Flush()
		}
	}
	o.conns.upstream(s.entry, nil)
	if err == nil && kind != h1.EOFBody && !r.Close {
		ep.lean.Put(uc, o.targets.now(), o.cfg.MaxIdlePerEndpoint)
	} else {
		_ = uc.C.Close()
	}
	status := r.Status
	if err != nil {
		o.log.Debug("http/1: response", zap.String("authority", ep.authority), zap.Error(err))
		status = 0
	}
	ep.route.Response(status, "", err != nil || r.Status >= 500, time.Since(start))
	ep.afterRequest()
	return err == nil && !closeClient
}

// leanConn returns an idle connection to e, or dials a new one (a *connectError when that
// fails).
func (e *endpoint) leanConn(ctx context.Context) (*h1.Conn, error) {
	now := e.o.targets.now()
	for {
		uc := e.lean.Take(now, int64(e.o.cfg.PoolIdleTimeout))
		if uc == nil {
			break
		}
		if now-uc.IdleAt < int64(h1.StaleAfter) || !uc.Stale() {
			return uc, nil
		}
		_ = uc.C.Close()
	}
	c, err := e.dial(ctx, transportheader.HTTP1)
	if err != nil {
		return nil, err
	}
	return h1.NewConn(c), nil
}

package outbound

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/balance"
)

// serveLean forwards the request the session read, as serveHTTP does for net/http's; it
// returns false when the client connection must close.
func (o *Outbound) serveLean(s *h1session) bool {
	if !o.requests.enter() {
		s.req.close = true
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
	return !s.req.close
}

// exchange sends the request on a connection to ep and relays the response. An error means
// no response reached the client (a connection error, or the upstream failed before its
// response head), and nothing was written to it; once the response started, failures only
// decide keep (false: the client connection must close).
func (o *Outbound) exchange(s *h1session, ep *endpoint, h balance.Handle, start time.Time) (keep bool, err error) {
	for retried := false; ; retried = true {
		s.res.raw = s.res.raw[:0]
		uc, err := ep.leanConn(o.ctx)
		if err != nil {
			return false, err
		}
		if !o.conns.upstream(s.entry, uc.c) {
			return false, errStopping
		}
		err = s.writeRequest(uc.bw)
		if err == nil {
			err = readHead(uc.br, &s.res, o.cfg.MaxHeaderBytes)
		}
		if err == nil {
			err = s.res.parseResponse()
		}
		if err == nil {
			return o.relayResponse(s, ep, uc, h, start), nil
		}
		_ = uc.c.Close()
		o.conns.upstream(s.entry, nil)
		if uc.reused && !retried && len(s.res.raw) == 0 && s.idempotent() {
			// The pooled connection had been closed by the upstream: so, likely, have the
			// others that went idle with it. This is net/http's retry of a request on a
			// stale keep-alive connection, on the same endpoint.
			ep.lean.closeIdle(false)
			continue
		}
		return false, err
	}
}

// idempotent reports the methods net/http retries on a stale connection.
func (s *h1session) idempotent() bool {
	switch string(s.req.method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// writeRequest writes the request upstream: origin-form, the authority as Host, the
// end-to-end fields as the client sent them, the body.
func (s *h1session) writeRequest(w *bufio.Writer) error {
	r := &s.req
	_, _ = w.Write(r.method)
	_ = w.WriteByte(' ')
	if len(s.path) == 0 {
		_ = w.WriteByte('/')
	} else {
		_, _ = w.Write(s.path)
	}
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.Write(s.hostBytes)
	_, _ = w.WriteString("\r\n")
	for i := range r.fields {
		if f := &r.fields[i]; !f.hop && !fold(f.name, "host") {
			_, _ = w.Write(f.line)
		}
	}
	_, _ = w.WriteString("\r\n")
	if r.contentLength > 0 {
		_, _ = w.Write(s.body[:r.contentLength])
	}
	return w.Flush()
}

// bodyKind is how a response's body is delimited.
type bodyKind uint8

const (
	noBody bodyKind = iota
	lengthBody
	chunkedBody
	eofBody // until the upstream closes
)

// relayResponse passes interim (1xx) responses on, then the final response's head and body;
// it returns whether the client connection can stay open. The upstream connection goes back
// to the pool when its exchange completed cleanly.
func (o *Outbound) relayResponse(s *h1session, ep *endpoint, uc *upConn, h balance.Handle, start time.Time) bool {
	r := &s.res
	var err error
	interim := false
	for err == nil && r.status < 200 && r.status != http.StatusSwitchingProtocols {
		writeResponseHead(s.bw, r, noBody, false)
		interim = true
		if err = s.bw.Flush(); err == nil {
			if err = readHead(uc.br, r, o.cfg.MaxHeaderBytes); err == nil {
				err = r.parseResponse()
			}
		}
	}
	kind, ferr := responseBody(&s.req, r)
	if err == nil {
		err = ferr
	}
	now := time.Now()
	h.Done(now, now.Sub(start), err != nil || r.status >= 500)
	ep.route.Request()
	if err != nil && !interim { // nothing written yet: the client gets a 502
		_ = uc.c.Close()
		o.conns.upstream(s.entry, nil)
		ep.route.Response(0, "", true, time.Since(start))
		ep.afterRequest()
		return s.upstreamError(err)
	}
	closeClient := s.req.close || kind == eofBody || o.conns.isDraining()
	if err == nil {
		writeResponseHead(s.bw, r, kind, closeClient)
		switch kind {
		case lengthBody:
			err = relayN(s.bw, uc.br, r.contentLength)
		case chunkedBody:
			err = relayChunked(s.bw, uc.br)
		case eofBody:
			err = relayEOF(s.bw, uc.br)
		}
		if err == nil {
			err = s.bw.Flush()
		}
	}
	o.conns.upstream(s.entry, nil)
	if err == nil && kind != eofBody && !r.close {
		ep.lean.put(uc, o.targets.now(), o.cfg.MaxIdlePerEndpoint)
	} else {
		_ = uc.c.Close()
	}
	status := r.status
	if err != nil {
		o.log.Debug("http/1: response", zap.String("authority", ep.authority), zap.Error(err))
		status = 0
	}
	ep.route.Response(status, "", err != nil || r.status >= 500, time.Since(start))
	ep.afterRequest()
	return err == nil && !closeClient
}

// responseBody says how the response to req is delimited (RFC 9112, section 6.3).
func responseBody(req, res *h1head) (bodyKind, error) {
	switch {
	case res.status == http.StatusSwitchingProtocols:
		return noBody, errors.New("upstream switched protocols unasked")
	case string(req.method) == http.MethodHead || res.status < 200 || res.status == 204 || res.status == 304:
		return noBody, nil
	case res.hasTE && fold(res.te, "chunked"):
		return chunkedBody, nil
	case res.hasTE:
		return noBody, errors.New("upstream sent a transfer coding other than chunked")
	case res.contentLength >= 0:
		return lengthBody, nil
	}
	return eofBody, nil
}

// writeResponseHead writes the response's status line (as HTTP/1.1) and end-to-end fields,
// then the framing and connection fields the proxy sets.
func writeResponseHead(w *bufio.Writer, r *h1head, kind bodyKind, closeClient bool) {
	_, _ = w.WriteString("HTTP/1.1 ")
	line := r.raw[9 : 12+len(r.reason)+2] // "NNN reason\r\n" of the status line
	_, _ = w.Write(line)
	for i := range r.fields {
		f := &r.fields[i]
		if f.hop || kind == chunkedBody && fold(f.name, "content-length") {
			continue
		}
		_, _ = w.Write(f.line)
	}
	if kind == chunkedBody {
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if closeClient {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
}

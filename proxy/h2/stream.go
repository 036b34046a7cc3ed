package h2

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Stream is one stream of a connection. On a server connection it is a request the handler
// answers (Respond) or relays (its ServeStream returns the upstream connection); on a
// client connection, the upstream half of a relay. A relayed pair forwards in both
// directions from the two read loops: a frame read on one side is written on the other.
type Stream struct {
	c   *Conn
	id  uint32
	req Header // a server stream's request

	// fwd orders what the read loop forwards against the relay starting on another
	// goroutine: until the relay starts, the request's body is kept in early.
	fwd            sync.Mutex
	peer           *Stream // the other half of a relay (set once, under fwd)
	obs            Observer
	early          []byte
	earlyEnd       bool
	earlyTrailers  Header
	hasEarlyTrail  bool
	dead           bool      // lost before its relay started
	body           *bodyPipe // ServeHTTP's request body
	cancel         func()    // ends ServeHTTP's request context
	declared, rcvd int64     // content-length and the body bytes received (the read loop's)
	gotResponse    bool      // a client stream has its final response header (the read loop's)

	// Guarded by c.mu.
	sendWin, recvWin int64
	recvUnacked      int64
	pending          []byte // to send on this stream, waiting for the peer's window
	pendingEnd       bool
	trailers         Header // to send after pending
	hasTrailers      bool
	inBlocked        bool
	sentHeaders      bool
	sentEnd, recvEnd bool
	removed          bool

	finished atomic.Bool
}

// Observer follows one relayed exchange. Its methods run on read loops: they must not
// block, and must not keep h.
type Observer interface {
	// Header is called with the upstream's final response header, then with its trailers
	// (trailers true), as each arrives, before it is forwarded.
	Header(h *Header, trailers bool)
	// Done is called once, when the exchange ends: err is nil when the whole response
	// reached the client. When it fails before any response header was forwarded, Done may
	// answer the client itself with Stream.Respond; otherwise the stream is reset.
	Done(st *Stream, err error)
}

// Request is a server stream's request header. It is the stream's: valid while the stream
// lives, and not to be modified.
func (s *Stream) Request() *Header { return &s.req }

// Conn is the stream's connection.
func (s *Stream) Conn() *Conn { return s.c }

// errGone is a relay whose client stream went away before it started.
var errGone = errors.New("http2: the client reset the stream")

// credit is window to give back to a stream's connection once locks are released, or a
// stream whose response ended.
type credit struct {
	c     *Conn
	s     *Stream // nil: the connection's window only
	n     int64
	ended *Stream
}

// open opens a client stream on c carrying s's request (edited), and links the two. It
// takes a reservation made by Pool.Take.
func (c *Conn) open(s *Stream, edit *Edit, b *batch) (*Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserved > 0 {
		c.reserved--
	}
	if c.closed || c.goAway || c.nextID > maxWindow {
		return nil, ErrConnClosed
	}
	u := &Stream{c: c, id: c.nextID, peer: s, sendWin: c.peerInit, recvWin: int64(c.cfg.StreamWindow), declared: -1}
	c.nextID += 2
	end := s.earlyEnd && len(s.early) == 0 && !s.hasEarlyTrail
	c.writeHeadersLocked(u.id, c.enc.encode(&s.req, requestBlock, edit), end)
	u.sentHeaders, u.sentEnd = true, end
	c.streams[u.id] = u
	b.wrote(c)
	return u, nil
}

// relay starts relaying s (a server stream) to a new stream on x.
func (s *Stream) relay(x *Conn, edit *Edit, obs Observer, b *batch) {
	s.fwd.Lock()
	s.obs = obs
	if s.dead {
		s.fwd.Unlock()
		x.unreserve()
		s.finish(errGone)
		return
	}
	u, err := x.open(s, edit, b)
	if err != nil {
		s.fwd.Unlock()
		s.upstreamLost(err)
		return
	}
	s.peer = u
	var n int
	if !u.sentEnd {
		end := s.earlyEnd && !s.hasEarlyTrail
		if len(s.early) > 0 || end {
			n = x.send(u, s.early, end, b)
		}
		if s.hasEarlyTrail {
			x.sendTrailers(u, &s.earlyTrailers, b)
		}
	}
	s.early = nil
	s.fwd.Unlock()
	if n > 0 {
		s.c.credit(s, int64(n), b)
	}
}

// deliver passes body bytes received on s to its peer, or keeps them until the relay
// starts. Bytes passed on give their window back to the sender.
func (s *Stream) deliver(data []byte, end bool, b *batch) {
	s.fwd.Lock()
	peer := s.peer
	if s.body != nil {
		kept := s.body.write(data, end)
		s.fwd.Unlock()
		if !kept && len(data) > 0 {
			s.c.credit(nil, int64(len(data)), b)
		}
		return
	}
	if peer == nil {
		keep := !s.dead && !s.c.answered(s)
		if keep {
			s.early = append(s.early, data...)
			s.earlyEnd = s.earlyEnd || end
		}
		s.fwd.Unlock()
		if !keep && len(data) > 0 { // nobody will read it: the window goes back
			s.c.credit(nil, int64(len(data)), b)
		}
		return
	}
	n := peer.c.send(peer, data, end, b)
	s.fwd.Unlock()
	if n > 0 {
		s.c.credit(s, int64(n), b)
	}
}

// answered reports whether a response was sent on s (or s is gone).
func (c *Conn) answered(s *Stream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.sentHeaders || s.removed
}

// deliverTrailers passes trailers received on s (ending its body) to its peer.
func (s *Stream) deliverTrailers(h *Header, b *batch) {
	s.fwd.Lock()
	defer s.fwd.Unlock()
	if s.body != nil {
		s.body.write(nil, true) // ServeHTTP does not pass request trailers on
		return
	}
	if s.peer == nil {
		s.earlyTrailers.copyFrom(h)
		s.hasEarlyTrail = true
		return
	}
	s.peer.c.sendTrailers(s.peer, h, b)
}

// send writes data (then END_STREAM when end) on u, as far as the windows allow, and keeps
// the rest in u.pending. It returns how many bytes were written (or dropped, for a stream
// or connection that is gone): the window to give back to their sender.
func (c *Conn) send(u *Stream, data []byte, end bool, b *batch) int {
	c.mu.Lock()
	if u.removed || c.closed {
		c.mu.Unlock()
		return len(data)
	}
	if len(u.pending) > 0 || u.hasTrailers {
		u.pending = append(u.pending, data...)
		u.pendingEnd = u.pendingEnd || end
		c.mu.Unlock()
		return 0
	}
	wasEnded := u.sentEnd
	n := c.writeDataLocked(u, data, end)
	if n < len(data) {
		u.pending = append(u.pending[:0], data[n:]...)
		u.pendingEnd = end
		c.blockLocked(u)
	}
	b.wrote(c)
	ended := !wasEnded && u.sentEnd
	if ended {
		c.maybeRemoveLocked(u)
	}
	c.unlock()
	if ended && c.server {
		u.finish(nil)
	}
	return n
}

// sendHeaders writes a response header (or a 1xx) on the server stream d.
func (c *Conn) sendHeaders(d *Stream, h *Header, end bool, b *batch) {
	c.mu.Lock()
	if d.removed || c.closed {
		c.mu.Unlock()
		return
	}
	c.writeHeadersLocked(d.id, c.enc.encode(h, responseBlock, nil), end)
	if h.Status >= 200 {
		d.sentHeaders = true
	}
	d.sentEnd = d.sentEnd || end
	b.wrote(c)
	if end {
		c.maybeRemoveLocked(d)
	}
	c.unlock()
	if end && c.server {
		d.finish(nil)
	}
}

// sendTrailers writes trailers (ending the stream) on u, after whatever data is pending.
func (c *Conn) sendTrailers(u *Stream, h *Header, b *batch) {
	c.mu.Lock()
	if u.removed || c.closed || u.sentEnd {
		c.mu.Unlock()
		return
	}
	if len(u.pending) > 0 {
		u.trailers.copyFrom(h)
		u.hasTrailers = true
		c.mu.Unlock()
		return
	}
	c.writeHeadersLocked(u.id, c.enc.encode(h, trailersBlock, nil), true)
	u.sentEnd = true
	b.wrote(c)
	c.maybeRemoveLocked(u)
	c.unlock()
	if c.server {
		u.finish(nil)
	}
}

// writeDataLocked writes DATA frames of data on u within the windows and the peer's frame
// size, with END_STREAM on the last when end and all of data fits; it returns how many bytes
// it wrote.
func (c *Conn) writeDataLocked(u *Stream, data []byte, end bool) int {
	n := 0
	for n < len(data) {
		chunk := min(int64(len(data)-n), u.sendWin, c.sendWin, int64(c.peerFrame))
		if chunk <= 0 {
			return n
		}
		var flags uint8
		if end && n+int(chunk) == len(data) {
			flags, u.sentEnd = flagEndStream, true
		}
		writeFrameHeader(c.bw, int(chunk), frameData, flags, u.id)
		_, _ = c.bw.Write(data[n : n+int(chunk)])
		u.sendWin -= chunk
		c.sendWin -= chunk
		n += int(chunk)
	}
	if end && !u.sentEnd {
		writeFrameHeader(c.bw, 0, frameData, flagEndStream, u.id)
		u.sentEnd = true
	}
	return n
}

// writeHeadersLocked writes a header block as HEADERS and CONTINUATION frames.
func (c *Conn) writeHeadersLocked(id uint32, block []byte, end bool) {
	flags := uint8(0)
	if end {
		flags = flagEndStream
	}
	typ := uint8(frameHeaders)
	for first := true; first || len(block) > 0; first = false {
		chunk := block[:min(len(block), c.peerFrame)]
		block = block[len(chunk):]
		f := flags
		if len(block) == 0 {
			f |= flagEndHeaders
		}
		writeFrameHeader(c.bw, len(chunk), typ, f, id)
		_, _ = c.bw.Write(chunk)
		typ, flags = frameContinuation, 0
	}
}

// blockLocked notes that u waits for the connection's window.
func (c *Conn) blockLocked(u *Stream) {
	if c.sendWin <= 0 && !u.inBlocked {
		u.inBlocked = true
		c.blocked = append(c.blocked, u)
	}
}

// drainLocked writes what u has pending as far as the windows allow; the window to give
// back to the senders, and a response that ended, go to c.credits (the read loop's).
func (c *Conn) drainLocked(u *Stream) {
	if u.removed || len(u.pending) == 0 && !u.hasTrailers {
		return
	}
	wasEnded := u.sentEnd
	n := c.writeDataLocked(u, u.pending, u.pendingEnd && !u.hasTrailers)
	u.pending = u.pending[:copy(u.pending, u.pending[n:])]
	if len(u.pending) == 0 && u.hasTrailers && !u.sentEnd {
		c.writeHeadersLocked(u.id, c.enc.encode(&u.trailers, trailersBlock, nil), true)
		u.hasTrailers, u.sentEnd = false, true
	}
	if len(u.pending) > 0 {
		c.blockLocked(u)
	}
	c.batch.wrote(c)
	cr := credit{n: int64(n)}
	if u.peer != nil {
		cr.c, cr.s = u.peer.c, u.peer
	}
	if !wasEnded && u.sentEnd {
		c.maybeRemoveLocked(u)
		if c.server {
			cr.ended = u
		}
	}
	if cr.n > 0 && cr.c != nil || cr.ended != nil {
		c.credits = append(c.credits, cr)
	}
}

// drainAllLocked drains the streams waiting for the connection's window, or with all every
// stream with data pending (the peer's initial window grew).
func (c *Conn) drainAllLocked(all bool) {
	if all {
		for _, s := range c.streams {
			c.drainLocked(s)
		}
		return
	}
	blocked := c.blocked
	c.blocked = nil
	for _, s := range blocked {
		s.inBlocked = false
		c.drainLocked(s)
	}
}

// payCredits gives back the windows drained, and finishes the responses that ended (the
// read loop's, without locks held).
func (c *Conn) payCredits() {
	for i, cr := range c.credits {
		if cr.c != nil && cr.n > 0 {
			cr.c.credit(cr.s, cr.n, &c.batch)
		}
		if cr.ended != nil {
			cr.ended.finish(nil)
		}
		c.credits[i] = credit{}
	}
	c.credits = c.credits[:0]
}

// credit gives n bytes of window back to the sender of s (nil: the connection's only),
// once they add up to a quarter of the window.
func (c *Conn) credit(s *Stream, n int64, b *batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.recvUnacked += n
	wrote := false
	if c.recvUnacked >= int64(c.cfg.ConnWindow)/4 {
		writeWindowUpdate(c.bw, 0, uint32(c.recvUnacked))
		c.recvWin += c.recvUnacked
		c.recvUnacked, wrote = 0, true
	}
	if s != nil && !s.removed && !s.recvEnd {
		s.recvUnacked += n
		if s.recvUnacked >= int64(c.cfg.StreamWindow)/4 {
			writeWindowUpdate(c.bw, s.id, uint32(s.recvUnacked))
			s.recvWin += s.recvUnacked
			s.recvUnacked, wrote = 0, true
		}
	}
	if wrote {
		b.wrote(c)
	}
}

// maybeRemoveLocked removes a stream that is closed both ways.
func (c *Conn) maybeRemoveLocked(s *Stream) {
	if s.sentEnd && s.recvEnd {
		c.removeLocked(s)
	}
}

// removeLocked removes s from its connection. The window of data it still had pending goes
// back to the connection that sent it (its stream is gone too).
func (c *Conn) removeLocked(s *Stream) {
	if s.removed {
		return
	}
	s.removed = true
	delete(c.streams, s.id)
	c.cond.Broadcast()
	if n := len(s.pending); n > 0 && s.peer != nil {
		// The window goes back once c.mu is released (unlock): another connection's lock.
		c.owed = append(c.owed, credit{c: s.peer.c, n: int64(n)})
		s.pending = nil
	}
	if len(c.streams) == 0 {
		c.idleAt = time.Now()
		if c.goAway && (c.server || c.reserved == 0) {
			// Going away (this side's Shutdown, or the server's GOAWAY): the last stream
			// is done.
			c.flushLocked()
			c.failLocked(ErrConnClosed)
		}
	}
}

// unlock releases c.mu, then gives back the windows owed by streams removed meanwhile.
func (c *Conn) unlock() {
	owed := c.owed
	c.owed = nil
	c.mu.Unlock()
	for _, cr := range owed {
		cr.c.credit(nil, cr.n, nil)
	}
}

// resetLocked resets s (RST_STREAM) and removes it.
func (c *Conn) resetLocked(s *Stream, code ErrCode) {
	if s.removed {
		return
	}
	if !c.closed {
		writeRST(c.bw, s.id, code)
		c.batch.wrote(c)
	}
	c.removeLocked(s)
}

// reset resets s from outside its read loop.
func (c *Conn) reset(s *Stream, code ErrCode) {
	c.mu.Lock()
	defer c.unlock()
	if s.removed {
		return
	}
	if !c.closed {
		writeRST(c.bw, s.id, code)
		c.flushLocked()
	}
	c.removeLocked(s)
}

// lost ends s, removed from its connection (reset by the peer, the connection gone): the
// other half of its relay ends too.
func (s *Stream) lost(err error) {
	if s.c.server {
		s.fwd.Lock()
		s.dead = true
		peer, early, body, cancel := s.peer, len(s.early), s.body, s.cancel
		s.early = nil
		s.fwd.Unlock()
		if body != nil {
			body.fail(err)
		}
		if cancel != nil {
			cancel()
		}
		if peer != nil {
			peer.c.reset(peer, ErrCodeCancel)
		}
		if early > 0 { // the body kept for a relay that will not start
			s.c.credit(nil, int64(early), nil)
		}
		s.finish(err)
		return
	}
	if s.peer != nil {
		s.peer.upstreamLost(err)
	}
}

// upstreamLost ends the server stream d whose upstream half failed with err: Done may
// answer the client; a stream still open is reset (with the peer's code when it reset).
func (d *Stream) upstreamLost(err error) {
	d.finish(err)
	code := ErrCodeInternal
	var se StreamError
	switch {
	case errors.As(err, &se) && se.Code != ErrCodeRefusedStream:
		code = se.Code
	case errors.As(err, &se):
		code = ErrCodeRefusedStream
	}
	d.c.reset(d, code)
}

// finish tells the observer, once, that the exchange ended.
func (s *Stream) finish(err error) {
	if s.finished.CompareAndSwap(false, true) && s.obs != nil {
		s.obs.Done(s, err)
	}
}

// Respond answers the request with a whole response: status, fields and body. It returns
// false when the stream is gone or a response header was sent already. A request body the
// client still sends is refused (RST_STREAM NO_ERROR after the response). It may be called
// from any goroutine (not with a lock of the connection held: not from Observer.Header).
func (s *Stream) Respond(status int, fields []hpack.HeaderField, body []byte) bool {
	c := s.c
	c.mu.Lock()
	if s.removed || s.sentHeaders || c.closed {
		c.mu.Unlock()
		return false
	}
	h := Header{Status: status, Fields: fields}
	c.writeHeadersLocked(s.id, c.enc.encode(&h, responseBlock, nil), len(body) == 0)
	s.sentHeaders, s.sentEnd = true, len(body) == 0
	if len(body) > 0 {
		if n := c.writeDataLocked(s, body, true); n < len(body) {
			s.pending, s.pendingEnd = append(s.pending[:0], body[n:]...), true
			c.blockLocked(s)
		}
	}
	if s.sentEnd && !s.recvEnd {
		writeRST(c.bw, s.id, ErrCodeNo)
		c.removeLocked(s)
	} else {
		c.maybeRemoveLocked(s)
	}
	c.flushLocked()
	c.unlock()
	return true
}

// Relay relays the request to a new stream on up, on which Pool.Take reserved one; it may
// be called from any goroutine once ServeStream returned without an upstream. Observer
// follows the exchange.
func (s *Stream) Relay(up *Conn, edit *Edit, obs Observer) { s.relay(up, edit, obs, nil) }

// Reset resets the stream with code (and the upstream half of its relay).
func (s *Stream) Reset(code ErrCode) {
	s.c.reset(s, code)
	s.lost(StreamError{Code: code})
}

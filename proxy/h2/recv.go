package h2

// The read loop's handling of the frames that carry a stream's header blocks and body.

func (c *Conn) onHeaders(h frameHeader, p []byte) error {
	if h.stream == 0 {
		return ConnError{ErrCodeProtocol, "HEADERS on stream 0"}
	}
	p, _, err := stripPadding(h, p)
	if err != nil {
		return err
	}
	if h.has(flagPriority) {
		if len(p) < 5 {
			return ConnError{ErrCodeProtocol, "HEADERS too short for its priority"}
		}
		p = p[5:]
	}
	if !h.has(flagEndHeaders) {
		c.block = append(c.block[:0], p...)
		c.inBlock, c.blockStream, c.blockFlags = true, h.stream, h.flags
		return c.checkBlock()
	}
	return c.onBlock(h.stream, h.flags, p)
}

func (c *Conn) onContinuation(h frameHeader, p []byte) error {
	if !c.inBlock {
		return ConnError{ErrCodeProtocol, "CONTINUATION without a header block"}
	}
	c.block = append(c.block, p...)
	if err := c.checkBlock(); err != nil {
		return err
	}
	if !h.has(flagEndHeaders) {
		return nil
	}
	c.inBlock = false
	return c.onBlock(c.blockStream, c.blockFlags, c.block)
}

// checkBlock bounds a header block being collected (compressed, it may not be larger than
// its decoded bound).
func (c *Conn) checkBlock() error {
	if len(c.block) > int(c.cfg.MaxHeaderListSize) {
		return ConnError{ErrCodeEnhanceYourCalm, "header block too large"}
	}
	return nil
}

// onBlock handles a complete header block of stream id.
func (c *Conn) onBlock(id uint32, flags uint8, block []byte) error {
	end := flags&flagEndStream != 0
	if c.server {
		return c.onServerBlock(id, end, block)
	}
	return c.onClientBlock(id, end, block)
}

// onServerBlock handles a request header block, or request trailers.
func (c *Conn) onServerBlock(id uint32, end bool, block []byte) error {
	c.mu.Lock()
	s := c.streams[id]
	known := id <= c.lastPeer
	c.mu.Unlock()
	if s != nil || known { // trailers (or a block on a stream that is closed)
		if err := c.dec.decode(block, trailersBlock, &c.hdr); err != nil {
			if ce, ok := err.(ConnError); ok {
				return ce
			}
			if s != nil {
				s.Reset(ErrCodeProtocol)
			}
			return nil
		}
		switch {
		case s == nil:
			return nil // closed: ignored
		case !end || s.recvEndSeen():
			s.Reset(ErrCodeProtocol)
			return nil
		}
		c.markRecvEnd(s)
		s.deliverTrailers(&c.hdr, &c.batch)
		return nil
	}
	if id%2 == 0 {
		return ConnError{ErrCodeProtocol, "a client opened an even stream"}
	}
	err := c.dec.decode(block, requestBlock, &c.hdr)
	if ce, ok := err.(ConnError); ok {
		return ce
	}
	c.mu.Lock()
	c.lastPeer = id
	refuse := ErrCode(0)
	switch {
	case err != nil || end && c.hdr.ContentLength > 0:
		refuse = ErrCodeProtocol
	case c.goAway || c.closed || uint32(len(c.streams)) >= c.cfg.MaxConcurrentStreams:
		refuse = ErrCodeRefusedStream
	}
	if refuse != 0 {
		writeRST(c.bw, id, refuse)
		c.batch.wrote(c)
		c.mu.Unlock()
		return nil
	}
	s = &Stream{c: c, id: id, sendWin: c.peerInit, recvWin: int64(c.cfg.StreamWindow), declared: c.hdr.ContentLength,
		recvEnd: end, earlyEnd: end}
	s.req.copyFrom(&c.hdr)
	c.streams[id] = s
	c.mu.Unlock()
	if up, edit, obs := c.h.ServeStream(s); up != nil {
		s.relay(up, edit, obs, &c.batch)
	}
	return nil
}

// onClientBlock handles a response header block (a 1xx, the final one, or trailers).
func (c *Conn) onClientBlock(id uint32, end bool, block []byte) error {
	c.mu.Lock()
	s := c.streams[id]
	idle := id >= c.nextID || id%2 == 0
	c.mu.Unlock()
	kind := responseBlock
	if s != nil && s.gotResponse {
		kind = trailersBlock
	}
	err := c.dec.decode(block, kind, &c.hdr)
	if ce, ok := err.(ConnError); ok {
		return ce
	}
	if s == nil {
		if idle {
			return ConnError{ErrCodeProtocol, "a response on a stream never opened"}
		}
		return nil // a stream this side reset
	}
	if err != nil || kind == trailersBlock && !end || kind == responseBlock && c.hdr.Status < 200 && end || c.hdr.Status == 101 {
		c.reset(s, ErrCodeProtocol)
		s.lost(errBadResponse)
		return nil
	}
	d := s.peer
	if kind == trailersBlock {
		if obs := d.obs; obs != nil {
			obs.Header(&c.hdr, true)
		}
		c.markRecvEnd(s)
		s.deliverTrailers(&c.hdr, &c.batch)
		return nil
	}
	if c.hdr.Status >= 200 {
		s.gotResponse = true
		s.declared = c.hdr.ContentLength
		if obs := d.obs; obs != nil {
			obs.Header(&c.hdr, false)
		}
	}
	if end {
		c.markRecvEnd(s)
	}
	d.c.sendHeaders(d, &c.hdr, end, &c.batch)
	return nil
}

// errBadResponse is an upstream response that breaks HTTP/2's rules.
var errBadResponse = StreamError{Code: ErrCodeProtocol, Remote: true}

// recvEndSeen reports whether the peer ended s.
func (s *Stream) recvEndSeen() bool {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.recvEnd
}

// markRecvEnd notes that the peer ended s, removing it when this side ended it too.
func (c *Conn) markRecvEnd(s *Stream) {
	c.mu.Lock()
	s.recvEnd = true
	c.maybeRemoveLocked(s)
	c.unlock()
}

func (c *Conn) onData(h frameHeader, p []byte) error {
	if h.stream == 0 {
		return ConnError{ErrCodeProtocol, "DATA on stream 0"}
	}
	data, pad, err := stripPadding(h, p)
	if err != nil {
		return err
	}
	n := int64(h.length)
	end := h.has(flagEndStream)
	c.mu.Lock()
	c.recvWin -= n
	if c.recvWin < 0 {
		c.mu.Unlock()
		return ConnError{ErrCodeFlowControl, "DATA beyond the connection's window"}
	}
	s := c.streams[h.stream]
	var problem ErrCode
	switch {
	case s == nil:
	case s.recvEnd:
		problem = ErrCodeStreamClosed
	default:
		s.recvWin -= n
		if s.recvWin < 0 {
			problem = ErrCodeFlowControl
		}
	}
	if s == nil || problem != 0 {
		if problem != 0 {
			c.resetLocked(s, problem)
		}
		c.unlock()
		c.credit(nil, n, &c.batch) // dropped: the connection's window goes back
		if s == nil && c.idleStream(h.stream) {
			return ConnError{ErrCodeProtocol, "DATA on an idle stream"}
		}
		if problem != 0 {
			s.lost(StreamError{Code: problem})
		}
		return nil
	}
	c.mu.Unlock()
	if pad > 0 {
		c.credit(s, int64(pad), &c.batch)
	}
	s.rcvd += int64(len(data))
	if s.declared >= 0 && (s.rcvd > s.declared || end && c.server && s.rcvd != s.declared) {
		s.Reset(ErrCodeProtocol) // the body does not match its content-length
		c.credit(nil, int64(len(data)), &c.batch)
		return nil
	}
	if end {
		c.markRecvEnd(s)
	}
	s.deliver(data, end, &c.batch)
	return nil
}

package h2

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Config tunes a connection; the zero value of a field means its default.
type Config struct {
	// MaxConcurrentStreams: on a server connection, the streams a client may have open at
	// once (250, as net/http); on a client connection, the cap before the server's
	// SETTINGS say otherwise (100).
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a header block, decoded (64 KiB).
	MaxHeaderListSize uint32
	// StreamWindow and ConnWindow are the receive windows this side grants a stream and the
	// whole connection (256 KiB and 1 MiB): they bound what it buffers for a peer that reads
	// slower than the sender sends.
	StreamWindow, ConnWindow uint32
	// WriteTimeout bounds a write to the socket (10 s): a peer that does not read for that
	// long fails its connection rather than stall the connections relaying to it.
	WriteTimeout time.Duration
	// PrefaceTimeout bounds a client's preface on a server connection (10 s).
	PrefaceTimeout time.Duration
}

func (c Config) withDefaults(server bool) Config {
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = 100
		if server {
			c.MaxConcurrentStreams = 250
		}
	}
	if c.MaxHeaderListSize == 0 {
		c.MaxHeaderListSize = 64 << 10
	}
	if c.StreamWindow < defaultWindow {
		c.StreamWindow = 256 << 10
	}
	if c.ConnWindow < defaultWindow {
		c.ConnWindow = 1 << 20
	}
	c.StreamWindow, c.ConnWindow = min(c.StreamWindow, maxWindow), min(c.ConnWindow, maxWindow)
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.PrefaceTimeout <= 0 {
		c.PrefaceTimeout = 10 * time.Second
	}
	return c
}

// Conn is one HTTP/2 connection: a client's to this proxy (NewServerConn) or this proxy's
// to an upstream (NewClientConn). One goroutine, the caller of Serve or Run, reads it (the
// read loop); writes come from it, from the read loops of the connections it relays to,
// and from handlers, under mu.
type Conn struct {
	nc     net.Conn
	cfg    Config
	server bool
	h      Handler // server connections
	br     *bufio.Reader

	// The read loop's own.
	dec         *decoder
	hdr         Header // the header block last decoded
	block       []byte // fragments of a header block split over CONTINUATION frames
	inBlock     bool
	blockStream uint32
	blockFlags  uint8
	gotSettings bool
	batch       batch
	credits     []credit

	mu          sync.Mutex
	cond        sync.Cond // on mu: the windows grew, a stream or the connection ended
	bw          *bufio.Writer
	enc         *encoder
	streams     map[uint32]*Stream
	nextID      uint32 // client: the next stream's identifier
	reserved    int    // client: streams reserved with Pool.Take, not yet opened
	sendWin     int64  // the peer's connection window
	recvWin     int64  // what the peer may still send on the connection
	recvUnacked int64  // bytes passed on whose window was not yet given back
	peerInit    int64  // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame   int    // the peer's SETTINGS_MAX_FRAME_SIZE
	peerStreams uint32 // client: the peer's SETTINGS_MAX_CONCURRENT_STREAMS
	blocked     []*Stream
	owed        []credit // windows to give back once mu is released (see unlock)
	lastPeer    uint32   // server: the highest stream the client opened
	goAway      bool     // no new streams: a GOAWAY was sent (server) or received (client)
	closed      bool
	err         error
	idleAt      time.Time // when the connection last had no stream
	onClose     func(*Conn)
	done        chan struct{}
}

func newConn(nc net.Conn, cfg Config, server bool) *Conn {
	cfg = cfg.withDefaults(server)
	c := &Conn{nc: nc, cfg: cfg, server: server,
		br: bufio.NewReaderSize(nc, 2*maxFrameSize), bw: bufio.NewWriterSize(nc, maxFrameSize),
		dec: newDecoder(cfg.MaxHeaderListSize), enc: newEncoder(), streams: map[uint32]*Stream{},
		sendWin: defaultWindow, recvWin: int64(cfg.ConnWindow), peerInit: defaultWindow, peerFrame: maxFrameSize,
		peerStreams: cfg.MaxConcurrentStreams, nextID: 1, idleAt: time.Now(), done: make(chan struct{})}
	c.cond.L = &c.mu
	return c
}

// writeSettingsLocked writes this side's SETTINGS and the connection window's increase.
func (c *Conn) writeSettingsLocked() {
	s := []setting{{settingMaxHeaderListSize, c.cfg.MaxHeaderListSize}, {settingInitialWindowSize, c.cfg.StreamWindow}}
	if c.server {
		s = append(s, setting{settingMaxConcurrentStreams, c.cfg.MaxConcurrentStreams})
	} else {
		s = append(s, setting{settingEnablePush, 0})
	}
	writeSettings(c.bw, s...)
	if inc := c.cfg.ConnWindow - defaultWindow; inc > 0 {
		writeWindowUpdate(c.bw, 0, inc)
	}
}

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Done is closed once the connection has ended and every stream on it was failed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection at once; its streams fail.
func (c *Conn) Close() { c.fail(ErrConnClosed) }

// fail closes the connection with err (the first error wins).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(err)
}

func (c *Conn) failLocked(err error) {
	if c.closed {
		return
	}
	c.closed, c.err = true, err
	c.cond.Broadcast()
	var ce ConnError
	if errors.As(err, &ce) {
		writeGoAway(c.bw, c.lastPeer, ce.Code, ce.Reason)
		c.flushLocked()
	}
	_ = c.nc.Close()
}

// Err is why the connection ended (nil while it runs).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// flushLocked flushes the writer within WriteTimeout; a failure closes the connection.
func (c *Conn) flushLocked() {
	if c.bw.Buffered() == 0 {
		return
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	if err := c.bw.Flush(); err != nil && !c.closed {
		c.closed, c.err = true, fmt.Errorf("http2: write: %w", err)
		c.cond.Broadcast()
		_ = c.nc.Close()
	}
}

// batch is the connections a read loop wrote to without flushing: it flushes them before
// it waits for more input, so that the frames one read produced leave in one write each.
type batch struct{ dirty []*Conn }

// wrote notes that c has unflushed frames (c.mu held); with no batch it flushes at once.
func (b *batch) wrote(c *Conn) {
	if b == nil {
		c.flushLocked()
		return
	}
	for _, d := range b.dirty {
		if d == c {
			return
		}
	}
	b.dirty = append(b.dirty, c)
}

func (b *batch) flush() {
	for i, c := range b.dirty {
		c.mu.Lock()
		c.flushLocked()
		c.mu.Unlock()
		b.dirty[i] = nil
	}
	b.dirty = b.dirty[:0]
}

// readLoop reads and handles frames until the connection fails; it returns why.
func (c *Conn) readLoop() error {
	for {
		if !frameBuffered(c.br) {
			c.batch.flush()
		}
		h, p, err := readFrame(c.br)
		if err != nil {
			return err
		}
		err = c.frame(h, p)
		if _, derr := c.br.Discard(int(h.length)); err == nil {
			err = derr
		}
		if err != nil {
			return err
		}
	}
}

// endLoop ends the connection after its read loop: every stream fails with the reason.
func (c *Conn) endLoop(err error) {
	c.batch.flush()
	c.mu.Lock()
	c.failLocked(err)
	err = c.err
	streams := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		streams = append(streams, s)
	}
	clear(c.streams)
	c.blocked = nil
	onClose := c.onClose
	c.unlock()
	for _, s := range streams {
		s.lost(err)
	}
	if onClose != nil {
		onClose(c)
	}
	close(c.done)
}

// frame handles one frame; an error ends the connection.
func (c *Conn) frame(h frameHeader, p []byte) error {
	if c.inBlock && (h.typ != frameContinuation || h.stream != c.blockStream) {
		return ConnError{ErrCodeProtocol, "a header block was interrupted"}
	}
	if !c.gotSettings && h.typ != frameSettings {
		return ConnError{ErrCodeProtocol, "the first frame is not SETTINGS"}
	}
	switch h.typ {
	case frameData:
		return c.onData(h, p)
	case frameHeaders:
		return c.onHeaders(h, p)
	case frameContinuation:
		return c.onContinuation(h, p)
	case frameRSTStream:
		return c.onRST(h, p)
	case frameSettings:
		return c.onSettings(h, p)
	case framePing:
		return c.onPing(h, p)
	case frameGoAway:
		return c.onGoAway(h, p)
	case frameWindowUpdate:
		return c.onWindowUpdate(h, p)
	case framePriority:
		if h.stream == 0 || len(p) != 5 {
			return ConnError{ErrCodeProtocol, "malformed PRIORITY"}
		}
	case framePushPromise:
		return ConnError{ErrCodeProtocol, "PUSH_PROMISE (push is disabled)"}
	}
	return nil // PRIORITY and unknown frame types are ignored
}

func (c *Conn) onSettings(h frameHeader, p []byte) error {
	if h.stream != 0 {
		return ConnError{ErrCodeProtocol, "SETTINGS on a stream"}
	}
	if h.has(flagAck) {
		if len(p) != 0 {
			return ConnError{ErrCodeFrameSize, "SETTINGS ACK with a payload"}
		}
		return nil
	}
	if len(p)%6 != 0 {
		return ConnError{ErrCodeFrameSize, "SETTINGS of a bad length"}
	}
	c.gotSettings = true
	c.mu.Lock()
	var grew bool
	for ; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case settingHeaderTableSize:
			c.enc.enc.SetMaxDynamicTableSizeLimit(min(v, 4096))
		case settingEnablePush:
			if v > 1 {
				c.mu.Unlock()
				return ConnError{ErrCodeProtocol, "bad SETTINGS_ENABLE_PUSH"}
			}
		case settingMaxConcurrentStreams:
			c.peerStreams = min(v, 1000)
		case settingInitialWindowSize:
			if v > maxWindow {
				c.mu.Unlock()
				return ConnError{ErrCodeFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE too large"}
			}
			delta := int64(v) - c.peerInit
			c.peerInit = int64(v)
			for _, s := range c.streams {
				s.sendWin += delta
			}
			grew = grew || delta > 0
		case settingMaxFrameSize:
			if v < maxFrameSize || v > 1<<24-1 {
				c.mu.Unlock()
				return ConnError{ErrCodeProtocol, "bad SETTINGS_MAX_FRAME_SIZE"}
			}
			c.peerFrame = int(min(v, 1<<20))
		}
	}
	writeFrameHeader(c.bw, 0, frameSettings, flagAck, 0)
	c.batch.wrote(c)
	if grew {
		c.cond.Broadcast()
		c.drainAllLocked(true)
	}
	c.unlock()
	c.payCredits()
	return nil
}

func (c *Conn) onPing(h frameHeader, p []byte) error {
	if h.stream != 0 || len(p) != 8 {
		return ConnError{ErrCodeProtocol, "malformed PING"}
	}
	if h.has(flagAck) {
		return nil
	}
	c.mu.Lock()
	writeFrameHeader(c.bw, 8, framePing, flagAck, 0)
	_, _ = c.bw.Write(p)
	c.batch.wrote(c)
	c.mu.Unlock()
	return nil
}

func (c *Conn) onGoAway(h frameHeader, p []byte) error {
	if h.stream != 0 || len(p) < 8 {
		return ConnError{ErrCodeProtocol, "malformed GOAWAY"}
	}
	last := binary.BigEndian.Uint32(p) & (1<<31 - 1)
	c.mu.Lock()
	c.goAway = true
	var refused []*Stream
	if !c.server {
		for id, s := range c.streams {
			if id > last { // never processed: the request may go elsewhere
				refused = append(refused, s)
			}
		}
	}
	closeNow := len(c.streams) == len(refused)
	c.mu.Unlock()
	for _, s := range refused {
		s.lost(StreamError{Code: ErrCodeRefusedStream, Remote: true})
	}
	if closeNow && !c.server {
		return ErrConnClosed // nothing left to wait for
	}
	return nil
}

func (c *Conn) onWindowUpdate(h frameHeader, p []byte) error {
	if len(p) != 4 {
		return ConnError{ErrCodeFrameSize, "WINDOW_UPDATE of a bad length"}
	}
	inc := int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
	c.mu.Lock()
	if h.stream == 0 {
		if inc == 0 || c.sendWin+inc > maxWindow {
			c.mu.Unlock()
			return ConnError{ErrCodeFlowControl, "bad connection WINDOW_UPDATE"}
		}
		c.sendWin += inc
		c.cond.Broadcast()
		c.drainAllLocked(false)
		c.unlock()
		c.payCredits()
		return nil
	}
	s := c.streams[h.stream]
	if s == nil {
		c.mu.Unlock()
		if c.idleStream(h.stream) {
			return ConnError{ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil // a closed stream
	}
	if inc == 0 || s.sendWin+inc > maxWindow {
		c.resetLocked(s, ErrCodeFlowControl)
		c.unlock()
		s.lost(StreamError{Code: ErrCodeFlowControl})
		return nil
	}
	s.sendWin += inc
	c.cond.Broadcast()
	c.drainLocked(s)
	c.unlock()
	c.payCredits()
	return nil
}

func (c *Conn) onRST(h frameHeader, p []byte) error {
	if h.stream == 0 || len(p) != 4 {
		return ConnError{ErrCodeProtocol, "malformed RST_STREAM"}
	}
	code := ErrCode(binary.BigEndian.Uint32(p))
	c.mu.Lock()
	s := c.streams[h.stream]
	if s == nil {
		c.mu.Unlock()
		if c.idleStream(h.stream) {
			return ConnError{ErrCodeProtocol, "RST_STREAM on an idle stream"}
		}
		return nil
	}
	c.removeLocked(s)
	c.unlock()
	s.lost(StreamError{Code: code, Remote: true})
	return nil
}

// idleStream reports whether id names a stream that was never opened (the read loop's).
func (c *Conn) idleStream(id uint32) bool {
	if c.server {
		return id > c.lastPeer
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return id >= c.nextID
}

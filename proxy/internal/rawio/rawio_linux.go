package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// maxRW bounds one read or write call, as internal/poll does (some kernels refuse more).
const maxRW = 1 << 30

// errFile is File's error: the descriptor File duplicates shares the socket's flags, and
// os.File's Fd makes it blocking, which a raw call would then block on while it holds its
// processor (a stop-the-world would wait for it).
var errFile = errors.New("rawio: File is not supported: it would make the socket blocking")

// Conn is a *net.TCPConn whose Read and Write are raw system calls (the package comment).
// Every other method, deadlines and Close included, is the TCPConn's; NetConn returns it.
// Like net.Conn's, its methods may be called from several goroutines at once.
//
// ReadFrom and WriteTo are the TCPConn's too: io.Copy to or from a Conn uses them, and its
// ordinary system calls (or splice between two *net.TCPConn). The proxy's relays copy with
// Read and Write.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// ordinary: Read and Write are the TCPConn's from now on (Ordinary).
	ordinary atomic.Bool

	// One Read at a time: its buffer and result, for readFn (a method value made once, so
	// that a Read allocates nothing).
	rmu    sync.Mutex
	rbuf   []byte
	rn     int
	rerr   error
	readFn func(fd uintptr) bool

	// One Write at a time, likewise.
	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

// Wrap returns c as a Conn when it is a *net.TCPConn, and c itself otherwise.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rw := &Conn{TCPConn: tc, rc: rc}
	rw.readFn, rw.writeFn = rw.rawRead, rw.rawWrite
	return rw
}

// NetConn returns the wrapped connection (for what needs the *net.TCPConn itself: the
// original destination, SO_LINGER).
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Ordinary makes the Conn under c, if any, read and write with the TCPConn's ordinary calls
// from now on (HTTP/2 connections: the package comment). It looks through c's NetConn
// methods (*tls.Conn and the proxy's wrappers have one) and reports whether it found a Conn.
func Ordinary(c net.Conn) bool {
	for c != nil {
		if rc, ok := c.(*Conn); ok {
			rc.ordinary.Store(true)
			return true
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = u.NetConn()
	}
	return false
}

// File refuses (errFile).
func (c *Conn) File() (*os.File, error) { return nil, errFile }

// state is an empty Read's or Write's result: the connection's state through the poller (a
// deadline, a close), as net.Conn's reports it, with no system call.
func (c *Conn) state(op string, through func(func(uintptr) bool) error) error {
	if err := through(func(uintptr) bool { return true }); err != nil {
		return c.opError(op, err)
	}
	return nil
}

// Read reads as net.Conn's Read does: at least one byte, or an error (io.EOF at the end).
func (c *Conn) Read(b []byte) (int, error) {
	if c.ordinary.Load() {
		return c.TCPConn.Read(b)
	}
	if len(b) == 0 {
		return 0, c.state("read", c.rc.Read)
	}
	c.rmu.Lock()
	c.rbuf, c.rn, c.rerr = b[:min(len(b), maxRW)], 0, nil
	err := c.rc.Read(c.readFn) // the poller's error (a deadline, a close), else the call's
	if err == nil {
		err = c.rerr
	}
	n := c.rn
	c.rbuf, c.rerr = nil, nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// rawRead is one attempt of Read: false when the socket has nothing yet (the poller waits).
func (c *Conn) rawRead(fd uintptr) bool {
	for {
		n, errno := sysRead(fd, c.rbuf)
		switch errno {
		case 0:
			c.rn = n
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.rerr = os.NewSyscallError("read", errno)
		}
		return true
	}
}

// Write writes all of b, as net.Conn's Write does, or returns how much it wrote and why it
// stopped.
func (c *Conn) Write(b []byte) (int, error) {
	if c.ordinary.Load() {
		return c.TCPConn.Write(b)
	}
	if len(b) == 0 {
		return 0, c.state("write", c.rc.Write)
	}
	c.wmu.Lock()
	c.wbuf, c.wn, c.werr = b, 0, nil
	err := c.rc.Write(c.writeFn) // likewise
	if err == nil {
		err = c.werr
	}
	n := c.wn
	c.wbuf, c.werr = nil, nil
	c.wmu.Unlock()
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// rawWrite writes what is left of wbuf: false when the socket is full (the poller waits).
func (c *Conn) rawWrite(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		chunk := c.wbuf[c.wn:min(len(c.wbuf), c.wn+maxRW)]
		n, errno := sysWrite(fd, chunk)
		switch {
		case errno == syscall.EINTR:
		case errno == syscall.EAGAIN:
			return false
		case errno != 0:
			c.werr = os.NewSyscallError("write", errno)
			return true
		case n > len(chunk):
			panic("rawio: invalid return from write: got " + strconv.Itoa(n) + " from a write of " + strconv.Itoa(len(chunk)))
		case n == 0: // as internal/poll: a write that wrote nothing and failed not
			c.werr = io.ErrUnexpectedEOF
			return true
		default:
			c.wn += n
		}
	}
	return true
}

// opError is the error net.Conn's Read and Write return for err.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok { // the poller's (a deadline, a closed connection)
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

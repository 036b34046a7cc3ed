package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn read and written with raw system calls (see the package comment).
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// The read in progress: its buffer and outcome, and the method value rc.Read calls
	// (made once, so that a Read allocates nothing); rmu serializes Reads, which share them.
	rmu    sync.Mutex
	rbuf   []byte
	rn     int
	rerr   syscall.Errno
	readFn func(uintptr) bool

	// The write in progress, likewise.
	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werr    syscall.Errno
	writeFn func(uintptr) bool
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
	w := &Conn{TCPConn: tc, rc: rc}
	w.readFn, w.writeFn = w.doRead, w.doWrite
	return w
}

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Read reads into p as (*net.TCPConn).Read does: it waits for data, the peer's end of stream
// (io.EOF) or the read deadline.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rbuf, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerr
	c.rbuf = nil
	c.rmu.Unlock()
	switch {
	case err != nil: // closed, or the deadline passed (an *net.OpError from the RawConn)
		return 0, err
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *Conn) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case 0:
			c.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait until the socket is readable
		default:
			c.rerr = e
			return true
		}
	}
}

// Write writes all of p as (*net.TCPConn).Write does, waiting for room in the socket's
// buffer as long as the write deadline allows.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	c.wbuf, c.wn, c.werr = p, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werr
	c.wbuf = nil
	c.wmu.Unlock()
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, c.opError("write", errno)
	}
	return n, nil
}

func (c *Conn) doWrite(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])), uintptr(len(c.wbuf)-c.wn))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait until the socket is writable
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// opError wraps errno as the net package does: errors.Is(err, syscall.ECONNRESET) holds.
func (c *Conn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

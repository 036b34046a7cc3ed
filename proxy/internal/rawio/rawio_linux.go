package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// maxRW bounds one read or write call, as internal/poll does (some kernels refuse more).
const maxRW = 1 << 30

// Conn is a *net.TCPConn whose Read and Write are raw system calls (the package comment).
// Every other method, deadlines and Close included, is the TCPConn's; NetConn returns it.
// Like net.Conn's, its methods may be called from several goroutines at once.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// One Read at a time: its buffer and result, for readFn (a method value made once, so
	// that a Read allocates nothing).
	rmu    sync.Mutex
	rbuf   []byte
	rn     uintptr
	rerrno syscall.Errno
	readFn func(fd uintptr) bool

	// One Write at a time, likewise.
	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werrno  syscall.Errno
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

// Read reads as net.Conn's Read does: at least one byte, or an error (io.EOF at the end).
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rbuf, c.rn, c.rerrno = b[:min(len(b), maxRW)], 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := int(c.rn), c.rerrno
	c.rbuf = nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	raceWrite(b[:n])
	return n, nil
}

// rawRead is one attempt of Read: false when the socket has nothing yet (the poller waits).
func (c *Conn) rawRead(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rn, c.rerrno = n, errno
		return true
	}
}

// Write writes all of b, as net.Conn's Write does, or returns how much it wrote and why it
// stopped.
func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	c.wbuf, c.wn, c.werrno = b, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werrno
	c.wbuf = nil
	c.wmu.Unlock()
	raceRead(b[:n])
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// rawWrite writes what is left of wbuf: false when the socket is full (the poller waits).
func (c *Conn) rawWrite(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		chunk := c.wbuf[c.wn:min(len(c.wbuf), c.wn+maxRW)]
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk)))
		switch errno {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werrno = errno
			return true
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

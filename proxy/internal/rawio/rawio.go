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
	read, write op
}

// op is the read or the write in progress on a Conn: its buffer and outcome, made by sys
// (read(2) or write(2)) inside wait (the RawConn's Read or Write, which waits for readiness).
// The method values are made once, so that an operation allocates nothing; mu serializes the
// operations, which share the fields.
type op struct {
	mu    sync.Mutex
	sys   uintptr
	wait  func(func(uintptr) bool) error
	try   func(uintptr) bool
	all   bool // write: until buf is done; read: once
	buf   []byte
	n     int
	errno syscall.Errno
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
	w := &Conn{TCPConn: tc}
	w.read = op{sys: syscall.SYS_READ, wait: rc.Read}
	w.write = op{sys: syscall.SYS_WRITE, wait: rc.Write, all: true}
	w.read.try, w.write.try = w.read.attempt, w.write.attempt
	return w
}

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.TCPConn }

// Read reads into p as (*net.TCPConn).Read does: it waits for data, the peer's end of stream
// (io.EOF) or the read deadline.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.do(&c.read, "read", p)
	if err == nil && n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, err
}

// Write writes all of p as (*net.TCPConn).Write does, waiting for room in the socket's
// buffer as long as the write deadline allows.
func (c *Conn) Write(p []byte) (int, error) { return c.do(&c.write, "write", p) }

// do runs o on p. Its errors are the net package's: the RawConn's (closed, deadline) as they
// are, an errno wrapped so that errors.Is(err, syscall.ECONNRESET) holds.
func (c *Conn) do(o *op, name string, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	o.mu.Lock()
	o.buf, o.n, o.errno = p, 0, 0
	err := o.wait(o.try)
	n, errno := o.n, o.errno
	o.buf = nil
	o.mu.Unlock()
	switch {
	case err != nil:
	case errno != 0:
		err = &net.OpError{Op: name, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(name, errno)}
	case o.all && n < len(p): // write(2) wrote nothing and said no more
		err = io.ErrShortWrite
	}
	return n, err
}

// attempt makes the system call on fd; false asks the poller to wait until fd is ready (the
// non-blocking socket answered EAGAIN).
func (o *op) attempt(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(o.sys, fd, uintptr(unsafe.Pointer(&o.buf[o.n])), uintptr(len(o.buf)-o.n))
		switch e {
		case 0:
			o.n += int(n)
			if !o.all || o.n == len(o.buf) || n == 0 {
				return true
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			o.errno = e
			return true
		}
	}
}

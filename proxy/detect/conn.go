package detect

import (
	"errors"
	"io"
	"net"
)

// Conn is a net.Conn that first replays the bytes detection read and then reads on from the
// connection. Like any net.Conn it has one reader at a time; writes go straight through.
type Conn struct {
	net.Conn
	prefix []byte // not yet replayed
}

// NewConn returns a Conn that replays prefix before reading from c (for a caller that read
// the first bytes itself). It takes ownership of prefix.
func NewConn(c net.Conn, prefix []byte) *Conn { return &Conn{Conn: c, prefix: prefix} }

// Peeked returns the bytes that have not been replayed yet. The slice must not be modified.
func (c *Conn) Peeked() []byte { return c.prefix }

// Read replays the peeked bytes first, then reads from the connection.
func (c *Conn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		if len(c.prefix) == 0 {
			c.prefix = nil // let the buffer go
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// WriteTo writes the peeked bytes to w and then copies the connection to it, so that
// io.Copy from a Conn to a *net.TCPConn still uses the kernel's splice path.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if len(c.prefix) > 0 {
		n, err := w.Write(c.prefix)
		total += int64(n)
		c.prefix = c.prefix[n:]
		if err != nil {
			return total, err
		}
		c.prefix = nil
	}
	n, err := io.Copy(w, c.Conn)
	return total + n, err
}

// CloseWrite half-closes the connection when it supports that (TCP, TLS), so a TCP
// forwarder can pass an end of stream on; otherwise it returns errors.ErrUnsupported.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// NetConn returns the wrapped connection (after Peeked is drained, reading it directly is
// equivalent to reading the Conn).
func (c *Conn) NetConn() net.Conn { return c.Conn }

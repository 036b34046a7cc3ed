package transportheader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	// ALPN is the TLS application protocol of a connection that carries a transport header.
	ALPN = "transport.l5d.io/v1"
	// Preface starts every transport header.
	Preface = ALPN + "\r\n\r\n"
	// MaxLen is the longest header message Read accepts.
	MaxLen = 64 << 10
)

// SessionProtocol is the protocol the connection carries after the header.
type SessionProtocol uint8

const (
	// Opaque means no session protocol was named: the connection is proxied as TCP.
	Opaque SessionProtocol = iota
	// HTTP1 is SessionProtocol.http1.
	HTTP1
	// HTTP2 is SessionProtocol.http2.
	HTTP2
)

func (p SessionProtocol) String() string {
	switch p {
	case Opaque:
		return "opaque"
	case HTTP1:
		return "http/1"
	case HTTP2:
		return "h2"
	}
	return fmt.Sprintf("SessionProtocol(%d)", uint8(p))
}

// Header is a transport header.
type Header struct {
	// Port is the target port on the pod.
	Port uint16
	// Name is the logical name of the target, if known (empty otherwise).
	Name string
	// Protocol is the session protocol; Opaque when none is known.
	Protocol SessionProtocol
}

// The errors Read returns wrap one of these (test with errors.Is).
var (
	// ErrBadPreface: the connection does not start with a transport header.
	ErrBadPreface = errors.New("transport header: connection does not start with the transport.l5d.io/v1 preface")
	// ErrTooLong: the length prefix is over MaxLen.
	ErrTooLong = errors.New("transport header: message too long")
	// ErrMalformed: the message is not valid protobuf for Header.
	ErrMalformed = errors.New("transport header: malformed message")
	// ErrBadPort: the port is missing, negative or over 65535.
	ErrBadPort = errors.New("transport header: invalid port")
	// ErrBadName: the name is not a DNS name.
	ErrBadName = errors.New("transport header: invalid name")
	// ErrBadProtocol: Validate found a SessionProtocol value that has no encoding.
	ErrBadProtocol = errors.New("transport header: invalid session protocol")
)

// Validate reports whether h can be sent and read back: a non-zero port, an empty or valid
// DNS name, and a known protocol.
func (h Header) Validate() error {
	if h.Port == 0 {
		return fmt.Errorf("%w: 0", ErrBadPort)
	}
	if h.Name != "" && !validName(h.Name) {
		return fmt.Errorf("%w: %q", ErrBadName, short(h.Name))
	}
	if h.Protocol > HTTP2 {
		return fmt.Errorf("%w: %d", ErrBadProtocol, h.Protocol)
	}
	return nil
}

// Encode returns h as it goes on the wire: preface, length, message. It does not validate
// h (see Validate); a header Validate accepts reads back equal, its name lowercased.
func Encode(h Header) []byte {
	return Append(make([]byte, 0, len(Preface)+4+16+len(h.Name)), h)
}

// Append appends the encoding of h to dst and returns the extended slice.
func Append(dst []byte, h Header) []byte {
	dst = append(dst, Preface...)
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if h.Port != 0 {
		dst = protowire.AppendTag(dst, 1, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.Port))
	}
	if h.Name != "" {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, h.Name)
	}
	if h.Protocol == HTTP1 || h.Protocol == HTTP2 {
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendVarint(dst, 2) // the kind: a tag and an empty message
		dst = protowire.AppendTag(dst, protowire.Number(h.Protocol), protowire.BytesType)
		dst = protowire.AppendVarint(dst, 0)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}

// Read reads one transport header from r, consuming exactly its bytes. It returns io.EOF
// when r ends before the first byte, an error wrapping io.ErrUnexpectedEOF when it ends
// inside the header, and errors wrapping ErrBadPreface, ErrTooLong, ErrMalformed, ErrBadPort
// or ErrBadName for a bad header; any other read error is returned wrapped.
func Read(r io.Reader) (Header, error) {
	const preLen = len(Preface) + 4
	buf := make([]byte, preLen, preLen+112) // one allocation for the preface and a usual message
	pre := buf[:preLen]
	n, err := io.ReadFull(r, pre)
	if k := min(n, len(Preface)); string(pre[:k]) != Preface[:k] {
		return Header{}, fmt.Errorf("%w (starts %q)", ErrBadPreface, pre[:min(n, 16)])
	}
	switch {
	case errors.Is(err, io.EOF):
		return Header{}, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Header{}, fmt.Errorf("transport header: %w after %d bytes of preface and length", err, n)
	case err != nil:
		return Header{}, fmt.Errorf("transport header: read preface: %w", err)
	}
	size := binary.BigEndian.Uint32(pre[len(Preface):])
	if size > MaxLen {
		return Header{}, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLong, size, MaxLen)
	}
	var msg []byte
	if int(size) <= cap(buf)-preLen {
		msg = buf[preLen : preLen+int(size)]
	} else {
		msg = make([]byte, size)
	}
	if n, err := io.ReadFull(r, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, fmt.Errorf("transport header: message of %d bytes: read %d: %w", size, n, err)
	}
	return decode(msg)
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

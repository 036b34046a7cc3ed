package h2

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types and flags (RFC 9113, section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// Settings (RFC 9113, section 6.5.2).
const (
	settingHeaderTableSize      = 0x1
	settingEnablePush           = 0x2
	settingMaxConcurrentStreams = 0x3
	settingInitialWindowSize    = 0x4
	settingMaxFrameSize         = 0x5
	settingMaxHeaderListSize    = 0x6
)

// ErrCode is an HTTP/2 error code (RFC 9113, section 7).
type ErrCode uint32

// The error codes.
const (
	ErrCodeNo                 ErrCode = 0x0
	ErrCodeProtocol           ErrCode = 0x1
	ErrCodeInternal           ErrCode = 0x2
	ErrCodeFlowControl        ErrCode = 0x3
	ErrCodeStreamClosed       ErrCode = 0x5
	ErrCodeFrameSize          ErrCode = 0x6
	ErrCodeRefusedStream      ErrCode = 0x7
	ErrCodeCancel             ErrCode = 0x8
	ErrCodeCompression        ErrCode = 0x9
	ErrCodeEnhanceYourCalm    ErrCode = 0xb
	ErrCodeInadequateSecurity ErrCode = 0xc
)

func (e ErrCode) String() string {
	switch e {
	case ErrCodeNo:
		return "NO_ERROR"
	case ErrCodeProtocol:
		return "PROTOCOL_ERROR"
	case ErrCodeInternal:
		return "INTERNAL_ERROR"
	case ErrCodeFlowControl:
		return "FLOW_CONTROL_ERROR"
	case ErrCodeStreamClosed:
		return "STREAM_CLOSED"
	case ErrCodeFrameSize:
		return "FRAME_SIZE_ERROR"
	case ErrCodeRefusedStream:
		return "REFUSED_STREAM"
	case ErrCodeCancel:
		return "CANCEL"
	case ErrCodeCompression:
		return "COMPRESSION_ERROR"
	case ErrCodeEnhanceYourCalm:
		return "ENHANCE_YOUR_CALM"
	}
	return fmt.Sprintf("error code 0x%x", uint32(e))
}

// ConnError is a connection error: the connection is closed after a GOAWAY with Code.
type ConnError struct {
	Code   ErrCode
	Reason string
}

func (e ConnError) Error() string {
	return "http2: connection error: " + e.Code.String() + ": " + e.Reason
}

// StreamError is a stream that was reset, by the peer or by this side.
type StreamError struct {
	Code   ErrCode
	Remote bool // the peer reset it
}

func (e StreamError) Error() string {
	if e.Remote {
		return "http2: stream reset by the peer: " + e.Code.String()
	}
	return "http2: stream reset: " + e.Code.String()
}

// ErrConnClosed is the error of streams whose connection ended without saying why.
var ErrConnClosed = errors.New("http2: connection closed")

const (
	frameHeaderLen = 9
	// maxFrameSize is the largest frame this side accepts: the default of
	// SETTINGS_MAX_FRAME_SIZE, which it never raises.
	maxFrameSize = 16384
	// defaultWindow is the initial flow-control window of every stream and connection.
	defaultWindow = 65535
	maxWindow     = 1<<31 - 1
)

// clientPreface is what every HTTP/2 client connection starts with.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// frameHeader is the 9-byte header of a frame.
type frameHeader struct {
	length uint32
	typ    uint8
	flags  uint8
	stream uint32
}

func (h frameHeader) has(f uint8) bool { return h.flags&f != 0 }

// readFrame reads the next frame from br, without copying: the payload is valid until the
// next read from br. A frame over maxFrameSize is a connection error.
func readFrame(br *bufio.Reader) (frameHeader, []byte, error) {
	b, err := br.Peek(frameHeaderLen)
	if err != nil {
		if errors.Is(err, io.EOF) && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return frameHeader{}, nil, err
	}
	h := frameHeader{
		length: uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		typ:    b[3],
		flags:  b[4],
		stream: binary.BigEndian.Uint32(b[5:9]) & (1<<31 - 1),
	}
	if h.length > maxFrameSize {
		return h, nil, ConnError{ErrCodeFrameSize, fmt.Sprintf("frame of %d bytes (at most %d)", h.length, maxFrameSize)}
	}
	if _, err := br.Discard(frameHeaderLen); err != nil {
		return h, nil, err
	}
	p, err := br.Peek(int(h.length))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	return h, p, nil
}

// frameBuffered reports whether a whole frame is already buffered in br: reading it will not
// wait for the network.
func frameBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n < frameHeaderLen {
		return false
	}
	b, _ := br.Peek(frameHeaderLen)
	return n >= frameHeaderLen+int(uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2]))
}

// stripPadding returns the payload of a PADDED frame without its padding, and the padding's
// length (the pad-length byte included).
func stripPadding(h frameHeader, p []byte) ([]byte, int, error) {
	if !h.has(flagPadded) {
		return p, 0, nil
	}
	if len(p) < 1 || int(p[0]) > len(p)-1 {
		return nil, 0, ConnError{ErrCodeProtocol, "padding longer than the frame"}
	}
	pad := int(p[0])
	return p[1 : len(p)-pad], pad + 1, nil
}

// writeFrameHeader appends a frame header to bw (in its buffer: nothing escapes).
func writeFrameHeader(bw *bufio.Writer, length int, typ, flags uint8, stream uint32) {
	b := bw.AvailableBuffer()
	b = append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream))
	_, _ = bw.Write(b)
}

// writeUint32 appends v, big-endian.
func writeUint32(bw *bufio.Writer, v uint32) {
	_, _ = bw.Write(binary.BigEndian.AppendUint32(bw.AvailableBuffer(), v))
}

func writeWindowUpdate(bw *bufio.Writer, stream uint32, inc uint32) {
	writeFrameHeader(bw, 4, frameWindowUpdate, 0, stream)
	writeUint32(bw, inc)
}

func writeRST(bw *bufio.Writer, stream uint32, code ErrCode) {
	writeFrameHeader(bw, 4, frameRSTStream, 0, stream)
	writeUint32(bw, uint32(code))
}

func writeGoAway(bw *bufio.Writer, last uint32, code ErrCode, debug string) {
	if len(debug) > 256 {
		debug = debug[:256]
	}
	writeFrameHeader(bw, 8+len(debug), frameGoAway, 0, 0)
	writeUint32(bw, last)
	writeUint32(bw, uint32(code))
	_, _ = bw.WriteString(debug)
}

// setting is one SETTINGS parameter.
type setting struct {
	id  uint16
	val uint32
}

func writeSettings(bw *bufio.Writer, s ...setting) {
	writeFrameHeader(bw, 6*len(s), frameSettings, 0, 0)
	for _, st := range s {
		_, _ = bw.Write(binary.BigEndian.AppendUint16(bw.AvailableBuffer(), st.id))
		writeUint32(bw, st.val)
	}
}

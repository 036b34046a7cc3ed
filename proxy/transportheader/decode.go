package transportheader

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// decode parses a Header message and checks it as linkerd2-proxy does.
func decode(b []byte) (Header, error) {
	var (
		port  int32
		name  []byte
		proto SessionProtocol
	)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Header{}, fmt.Errorf("%w: tag: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1: // int32 port
			if typ != protowire.VarintType {
				return Header{}, wireTypeError("port", typ)
			}
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return Header{}, fmt.Errorf("%w: port: %v", ErrMalformed, protowire.ParseError(n))
			}
			port, b = int32(v), b[n:] // int32 fields truncate, as protobuf specifies
		case 2: // string name
			v, n, err := consumeBytes("name", typ, b)
			if err != nil {
				return Header{}, err
			}
			name, b = v, b[n:]
		case 3: // SessionProtocol session_protocol: repeated occurrences merge
			v, n, err := consumeBytes("session_protocol", typ, b)
			if err != nil {
				return Header{}, err
			}
			if proto, err = decodeSession(v, proto); err != nil {
				return Header{}, err
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return Header{}, fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	if port <= 0 || port > 65535 {
		return Header{}, fmt.Errorf("%w: %d", ErrBadPort, port)
	}
	h := Header{Port: uint16(port), Protocol: proto}
	if len(name) > 0 {
		s := string(name)
		if !validName(s) {
			return Header{}, fmt.Errorf("%w: %q", ErrBadName, short(s))
		}
		h.Name = strings.ToLower(s) // no copy when already lowercase
	}
	return h, nil
}

// decodeSession merges a SessionProtocol message into cur: the last kind present wins.
func decodeSession(b []byte, cur SessionProtocol) (SessionProtocol, error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, fmt.Errorf("%w: session_protocol tag: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1, 2: // Http1 http1, Http2 http2: empty messages, whose own fields are unknown
			v, n, err := consumeBytes("session_protocol kind", typ, b)
			if err != nil {
				return 0, err
			}
			if err := skipAll(v); err != nil {
				return 0, err
			}
			cur, b = SessionProtocol(num), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, fmt.Errorf("%w: session_protocol field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return cur, nil
}

// skipAll checks that b is a well-formed sequence of (unknown) fields.
func skipAll(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: nested tag: %v", ErrMalformed, protowire.ParseError(n))
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return fmt.Errorf("%w: nested field %d: %v", ErrMalformed, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return nil
}

func consumeBytes(field string, typ protowire.Type, b []byte) ([]byte, int, error) {
	if typ != protowire.BytesType {
		return nil, 0, wireTypeError(field, typ)
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, 0, fmt.Errorf("%w: %s: %v", ErrMalformed, field, protowire.ParseError(n))
	}
	return v, n, nil
}

func wireTypeError(field string, typ protowire.Type) error {
	return fmt.Errorf("%w: %s has wire type %d", ErrMalformed, field, typ)
}

// validName reports whether s is a DNS name by linkerd2-proxy's rules (those of its dns-name
// crate: RFC 5280 section 7.2 reference identifiers, plus underscores): at most 253 bytes;
// labels of 1 to 63 letters, digits, hyphens and underscores, not starting or ending with a
// hyphen; an optional trailing dot; and a last label that is not all digits (so no IPv4).
func validName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	s = strings.TrimSuffix(s, ".")
	last := ""
	for label := range strings.SplitSeq(s, ".") {
		if !validLabel(label) {
			return false
		}
		last = label
	}
	return strings.Trim(last, "0123456789") != ""
}

func validLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		switch c := l[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

package inbound

import "encoding/binary"

// TLS record and handshake constants (RFC 8446).
const (
	recordHeaderLen = 5
	maxRecordLen    = 1<<14 + 2048 // a TLSCiphertext's bound; a ClientHello record is smaller
	handshakeHello  = 1
	extServerName   = 0
	sniHostName     = 0
)

// recordLen returns the length of the TLS record that b starts (header included), once b
// holds the header; ok is false before that or when the length is over the bound.
func recordLen(b []byte) (n int, ok bool) {
	if len(b) < recordHeaderLen {
		return 0, false
	}
	l := int(binary.BigEndian.Uint16(b[3:5]))
	if l > maxRecordLen {
		return 0, false
	}
	return recordHeaderLen + l, true
}

// serverName returns the server_name (SNI) of the ClientHello in the first TLS record of b.
// ok is false when b does not hold a whole record with a parseable ClientHello (one split
// over several records, or not a ClientHello); a ClientHello without SNI gives "", true.
// It only reads b.
func serverName(b []byte) (name string, ok bool) {
	n, ok := recordLen(b)
	if !ok || len(b) < n || b[0] != 0x16 {
		return "", false
	}
	p := parser(b[recordHeaderLen:n])
	typ, ok := p.u8()
	if !ok || typ != handshakeHello {
		return "", false
	}
	body, ok := p.bytes(3)
	if !ok {
		return "", false // the hello continues in another record
	}
	h := parser(body)
	if !h.skip(2+32) || !h.skipVec(1) || !h.skipVec(2) || !h.skipVec(1) { // version, random, session id, suites, compression
		return "", false
	}
	if len(h) == 0 {
		return "", true // no extensions
	}
	exts, ok := h.bytes(2)
	if !ok {
		return "", false
	}
	e := parser(exts)
	for len(e) > 0 {
		typ, ok1 := e.u16()
		data, ok2 := e.bytes(2)
		if !ok1 || !ok2 {
			return "", false
		}
		if typ != extServerName {
			continue
		}
		d := parser(data)
		list, ok := d.bytes(2)
		if !ok {
			return "", false
		}
		l := parser(list)
		for len(l) > 0 {
			nt, ok1 := l.u8()
			host, ok2 := l.bytes(2)
			if !ok1 || !ok2 {
				return "", false
			}
			if nt == sniHostName {
				return string(host), true
			}
		}
		return "", true
	}
	return "", true
}

// parser reads big-endian fields off the front of a byte slice.
type parser []byte

func (p *parser) u8() (uint8, bool) {
	if len(*p) < 1 {
		return 0, false
	}
	v := (*p)[0]
	*p = (*p)[1:]
	return v, true
}

func (p *parser) u16() (uint16, bool) {
	if len(*p) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*p)
	*p = (*p)[2:]
	return v, true
}

func (p *parser) skip(n int) bool {
	if len(*p) < n {
		return false
	}
	*p = (*p)[n:]
	return true
}

// bytes reads a vector with a lenBytes-byte length prefix.
func (p *parser) bytes(lenBytes int) ([]byte, bool) {
	if len(*p) < lenBytes {
		return nil, false
	}
	n := 0
	for i := 0; i < lenBytes; i++ {
		n = n<<8 | int((*p)[i])
	}
	if len(*p) < lenBytes+n {
		return nil, false
	}
	v := (*p)[lenBytes : lenBytes+n]
	*p = (*p)[lenBytes+n:]
	return v, true
}

func (p *parser) skipVec(lenBytes int) bool { _, ok := p.bytes(lenBytes); return ok }

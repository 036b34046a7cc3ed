package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"

	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of the proxy API's destination messages that ScanUpdate reads
// (io.linkerd.proxy.destination and io.linkerd.proxy.net, v0.20).
const (
	fieldUpdateAdd         = 1 // Update.add (WeightedAddrSet)
	fieldUpdateRemove      = 2 // Update.remove (AddrSet)
	fieldUpdateNoEndpoints = 3 // Update.no_endpoints (NoEndpoints)
	fieldSetAddrs          = 1 // WeightedAddrSet.addrs and AddrSet.addrs
	fieldWeightedAddrAddr  = 1 // WeightedAddr.addr (TcpAddress)
	fieldTCPIP             = 1 // TcpAddress.ip (IPAddress)
	fieldTCPPort           = 2 // TcpAddress.port
	fieldIPv4              = 1 // IPAddress.ipv4 (fixed32)
	fieldIPv6              = 2 // IPAddress.ipv6 (IPv6)
	fieldIPv6First         = 1 // IPv6.first (fixed64)
	fieldIPv6Last          = 2 // IPv6.last (fixed64)
	fieldNoEndpointsExists = 1 // NoEndpoints.exists
)

// UpdateKind is the kind of a destination Update.
type UpdateKind uint8

const (
	UpdateNone        UpdateKind = iota // no kind: an empty or unreadable update
	UpdateAdd                           // Update.add
	UpdateRemove                        // Update.remove
	UpdateNoEndpoints                   // Update.no_endpoints
)

// ErrNonCanonical is returned by ScanUpdate for an update that is valid protobuf but not in
// the form a Go encoder writes once per field (a oneof or a singular message field given
// twice, which a decoder merges): decode such an update instead.
var ErrNonCanonical = errors.New("update is not canonically encoded")

// ScanUpdate reads an encoded io.linkerd.proxy.destination.Update without decoding it into
// messages, in one pass, and allocates nothing: it returns the update's kind and, for
// NoEndpoints, whether the service exists, and calls each for every address of an Add or a
// Remove, in order, with (for an Add) the encoded WeightedAddr it came in. An error of each
// ends the scan and is returned. each is called as the scan reaches an address, so when
// ScanUpdate returns an error each may already have had some of the addresses: collect what
// it is given, and use it only when ScanUpdate succeeds.
func ScanUpdate(b []byte, each func(k AddrKey, weightedAddr []byte) error) (kind UpdateKind, exists bool, err error) {
	seen := false // one of the oneof
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return kind, exists, err
		}
		b = b[n:]
		if num < fieldUpdateAdd || num > fieldUpdateNoEndpoints {
			continue // unknown to this version of the API: a decoder keeps it aside too
		}
		if err := singular("update", num, typ, protowire.BytesType, &seen); err != nil {
			return kind, exists, err
		}
		kind = UpdateKind(num)
		switch num {
		case fieldUpdateAdd:
			err = scanAddrs(v, true, each)
		case fieldUpdateRemove:
			err = scanAddrs(v, false, each)
		default:
			exists, err = scanExists(v)
		}
		if err != nil {
			return kind, exists, err
		}
	}
	return kind, exists, nil
}

// scanAddrs reads a WeightedAddrSet (weighted) or an AddrSet.
func scanAddrs(b []byte, weighted bool, each func(AddrKey, []byte) error) error {
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if num != fieldSetAddrs {
			continue // the set's labels, or unknown
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("address set field %d has wire type %d", num, typ)
		}
		tcp, wa := v, []byte(nil)
		if weighted {
			if tcp, err = weightedAddrTCP(v); err != nil {
				return err
			}
			wa = v
		}
		k, err := scanTCPAddr(tcp)
		if err != nil {
			return err
		}
		if each != nil {
			if err := each(k, wa); err != nil {
				return err
			}
		}
	}
	return nil
}

// weightedAddrTCP returns the encoded TcpAddress of an encoded WeightedAddr.
func weightedAddrTCP(b []byte) ([]byte, error) {
	var tcp []byte
	found := false
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		if num != fieldWeightedAddrAddr {
			continue
		}
		if err := singular("weighted address", num, typ, protowire.BytesType, &found); err != nil {
			return nil, err
		}
		tcp = v
	}
	if !found {
		return nil, errors.New("weighted address without an address")
	}
	return tcp, nil
}

// scanTCPAddr reads an encoded TcpAddress into its key.
func scanTCPAddr(b []byte) (AddrKey, error) {
	var k AddrKey
	var port uint64
	seenIP, seenPort := false, false
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return k, err
		}
		b = b[n:]
		switch num {
		case fieldTCPIP:
			if err := singular("address", num, typ, protowire.BytesType, &seenIP); err != nil {
				return k, err
			}
			if err := scanIP(v, &k); err != nil {
				return k, err
			}
		case fieldTCPPort:
			if err := singular("address", num, typ, protowire.VarintType, &seenPort); err != nil {
				return k, err
			}
			port, _ = protowire.ConsumeVarint(v) // field checked it
		}
	}
	switch {
	case !seenIP:
		return k, errors.New("address has no IP")
	case port > 65535:
		return k, fmt.Errorf("port %d out of range", port)
	}
	k[16], k[17] = byte(port>>8), byte(port)
	return k, nil
}

// scanIP reads an encoded IPAddress into k's address bytes (and its IPv4 mark).
func scanIP(b []byte, k *AddrKey) error {
	seen := false // one of the oneof
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch num {
		case fieldIPv4:
			if err := singular("ip", num, typ, protowire.Fixed32Type, &seen); err != nil {
				return err
			}
			ip, _ := protowire.ConsumeFixed32(v)
			k[10], k[11] = 0xff, 0xff // the IPv4-mapped form KeyOf keeps
			binary.BigEndian.PutUint32(k[12:16], ip)
			k[18] = 4
		case fieldIPv6:
			if err := singular("ip", num, typ, protowire.BytesType, &seen); err != nil {
				return err
			}
			if err := scanIPv6(v, k); err != nil {
				return err
			}
		}
	}
	if !seen {
		return errors.New("address has no IP")
	}
	return nil
}

// scanIPv6 reads an encoded IPv6 into k's address bytes.
func scanIPv6(b []byte, k *AddrKey) error {
	var first, last bool
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
		if num != fieldIPv6First && num != fieldIPv6Last {
			continue
		}
		seen, at := &first, 0
		if num == fieldIPv6Last {
			seen, at = &last, 8
		}
		if err := singular("ipv6", num, typ, protowire.Fixed64Type, seen); err != nil {
			return err
		}
		x, _ := protowire.ConsumeFixed64(v)
		binary.BigEndian.PutUint64(k[at:at+8], x)
	}
	return nil
}

// scanExists reads NoEndpoints.exists.
func scanExists(b []byte) (bool, error) {
	exists, seen := false, false
	for len(b) > 0 {
		num, typ, v, n, err := field(b)
		if err != nil {
			return false, err
		}
		b = b[n:]
		if num != fieldNoEndpointsExists {
			continue
		}
		if err := singular("no_endpoints", num, typ, protowire.VarintType, &seen); err != nil {
			return false, err
		}
		x, _ := protowire.ConsumeVarint(v) // field checked it
		exists = x != 0
	}
	return exists, nil
}

// singular checks a field that a canonical encoding writes once (a singular field, or one
// member of a oneof, which shares seen with the others): that its wire type is want, and that
// seen was not set yet. It sets seen.
func singular(msg string, num protowire.Number, typ, want protowire.Type, seen *bool) error {
	if typ != want {
		return fmt.Errorf("%s field %d has wire type %d", msg, num, typ)
	}
	if *seen {
		return ErrNonCanonical
	}
	*seen = true
	return nil
}

// CheckFraming returns an error unless b is a sequence of well-formed protobuf fields at its
// top level (no groups, which the proxy API has none of): what a relay checks of a message it
// passes on without decoding it.
func CheckFraming(b []byte) error {
	for len(b) > 0 {
		_, _, _, n, err := field(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// field reads the field at the start of b: its number, wire type and value (for a bytes
// field, the bytes; else the encoded value), and n, the bytes it takes up in b. Groups are
// refused. The scanners loop over it rather than take a callback: a call through a function
// value for every field cost more than the reading itself.
func field(b []byte) (num protowire.Number, typ protowire.Type, v []byte, n int, err error) {
	if len(b) > 0 && b[0] < 0x80 && b[0] >= 1<<3 {
		// The common case, a one-byte tag: read the value here.
		num, typ = protowire.Number(b[0]>>3), protowire.Type(b[0]&7)
		rest := b[1:]
		switch typ {
		case protowire.BytesType:
			if len(rest) > 0 && rest[0] < 0x80 {
				if end := 1 + int(rest[0]); end <= len(rest) {
					return num, typ, rest[1:end], 1 + end, nil
				}
			}
		case protowire.VarintType:
			if _, m := protowire.ConsumeVarint(rest); m > 0 {
				return num, typ, rest[:m], 1 + m, nil
			}
		case protowire.Fixed32Type:
			if len(rest) >= 4 {
				return num, typ, rest[:4], 5, nil
			}
		case protowire.Fixed64Type:
			if len(rest) >= 8 {
				return num, typ, rest[:8], 9, nil
			}
		}
	}
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, 0, protowire.ParseError(n)
	}
	rest := b[n:]
	if typ == protowire.BytesType {
		v, m := protowire.ConsumeBytes(rest)
		if m < 0 {
			return 0, 0, nil, 0, protowire.ParseError(m)
		}
		return num, typ, v, n + m, nil
	}
	if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
		return 0, 0, nil, 0, fmt.Errorf("field %d is a group, which the proxy API has none of", num)
	}
	m := protowire.ConsumeFieldValue(num, typ, rest)
	if m < 0 {
		return 0, 0, nil, 0, protowire.ParseError(m)
	}
	return num, typ, rest[:m], n + m, nil
}

var fingerprintSeed = maphash.MakeSeed()

// Fingerprint identifies the content of an encoded WeightedAddr within this process: two
// encodings of equal messages have equal fingerprints, whatever order their metric labels
// (a map) were written in. It hashes each top-level field and sums the hashes; none of the
// WeightedAddr's nested messages holds a map. It allocates nothing.
func Fingerprint(weightedAddr []byte) uint64 {
	var sum uint64
	b := weightedAddr
	for len(b) > 0 {
		_, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return sum + maphash.Bytes(fingerprintSeed, b) // malformed: the rest as one field
		}
		sum += maphash.Bytes(fingerprintSeed, b[:n])
		b = b[n:]
	}
	return sum
}

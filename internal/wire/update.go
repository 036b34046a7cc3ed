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
// messages, and allocates nothing: it returns the update's kind and, for NoEndpoints, whether
// the service exists, and calls each for every address of an Add or a Remove, in order, with
// (for an Add) the encoded WeightedAddr it came in. The whole update is checked before each
// is first called. An error of each ends the scan and is returned.
func ScanUpdate(b []byte, each func(k AddrKey, weightedAddr []byte) error) (UpdateKind, bool, error) {
	kind, exists, err := scanUpdate(b, nil)
	if err != nil || each == nil {
		return kind, exists, err
	}
	return scanUpdate(b, each)
}

// scanUpdate is one pass of ScanUpdate; with a nil each it only checks.
func scanUpdate(b []byte, each func(AddrKey, []byte) error) (kind UpdateKind, exists bool, err error) {
	seen := false // one of the oneof
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num < fieldUpdateAdd || num > fieldUpdateNoEndpoints {
			return nil // unknown to this version of the API: a decoder keeps it aside too
		}
		if err := singular("update", num, typ, protowire.BytesType, &seen); err != nil {
			return err
		}
		kind = UpdateKind(num)
		switch num {
		case fieldUpdateAdd:
			return scanAddrs(v, true, each)
		case fieldUpdateRemove:
			return scanAddrs(v, false, each)
		default:
			exists, err = scanExists(v)
			return err
		}
	})
	return kind, exists, err
}

// scanAddrs reads a WeightedAddrSet (weighted) or an AddrSet.
func scanAddrs(b []byte, weighted bool, each func(AddrKey, []byte) error) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldSetAddrs {
			return nil // the set's labels, or unknown
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("address set field %d has wire type %d", num, typ)
		}
		tcp, wa := v, []byte(nil)
		if weighted {
			var err error
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
			return each(k, wa)
		}
		return nil
	})
}

// weightedAddrTCP returns the encoded TcpAddress of an encoded WeightedAddr.
func weightedAddrTCP(b []byte) ([]byte, error) {
	var tcp []byte
	found := false
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldWeightedAddrAddr {
			return nil
		}
		tcp = v
		return singular("weighted address", num, typ, protowire.BytesType, &found)
	})
	if err == nil && !found {
		err = errors.New("weighted address without an address")
	}
	return tcp, err
}

// scanTCPAddr reads an encoded TcpAddress into its key.
func scanTCPAddr(b []byte) (AddrKey, error) {
	var k AddrKey
	var port uint64
	seenIP, seenPort := false, false
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case fieldTCPIP:
			if err := singular("address", num, typ, protowire.BytesType, &seenIP); err != nil {
				return err
			}
			return scanIP(v, &k)
		case fieldTCPPort:
			if err := singular("address", num, typ, protowire.VarintType, &seenPort); err != nil {
				return err
			}
			var n int
			if port, n = protowire.ConsumeVarint(v); n < 0 {
				return protowire.ParseError(n)
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return k, err
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
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
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
			return scanIPv6(v, k)
		}
		return nil
	})
	if err == nil && !seen {
		err = errors.New("address has no IP")
	}
	return err
}

// scanIPv6 reads an encoded IPv6 into k's address bytes.
func scanIPv6(b []byte, k *AddrKey) error {
	var first, last bool
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldIPv6First && num != fieldIPv6Last {
			return nil
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
		return nil
	})
}

// scanExists reads NoEndpoints.exists.
func scanExists(b []byte) (bool, error) {
	exists, seen := false, false
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldNoEndpointsExists {
			return nil
		}
		if err := singular("no_endpoints", num, typ, protowire.VarintType, &seen); err != nil {
			return err
		}
		x, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		exists = x != 0
		return nil
	})
	return exists, err
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
	return fields(b, func(protowire.Number, protowire.Type, []byte) error { return nil })
}

// fields calls f with each field of the encoded message b: its number, wire type and value
// (for a bytes field, the bytes; else the encoded value). Groups are refused.
func fields(b []byte, f func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			var m int
			if v, m = protowire.ConsumeBytes(b); m < 0 {
				return protowire.ParseError(m)
			}
			n = m
		} else {
			if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
				return fmt.Errorf("field %d is a group, which the proxy API has none of", num)
			}
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return protowire.ParseError(n)
			}
			v = b[:n]
		}
		b = b[n:]
		if err := f(num, typ, v); err != nil {
			return err
		}
	}
	return nil
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

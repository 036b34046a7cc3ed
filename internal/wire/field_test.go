package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// refField is field as protowire reads it, without field's one-byte-tag shortcut.
func refField(b []byte) (protowire.Number, protowire.Type, []byte, int, bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || typ == protowire.StartGroupType || typ == protowire.EndGroupType {
		return 0, 0, nil, 0, false
	}
	m := protowire.ConsumeFieldValue(num, typ, b[n:])
	if m < 0 {
		return 0, 0, nil, 0, false
	}
	v := b[n : n+m]
	if typ == protowire.BytesType {
		v, _ = protowire.ConsumeBytes(v)
	}
	return num, typ, v, n + m, true
}

// FuzzField checks field against protowire, field by field: the same number, type, value
// and length, and an error exactly where protowire finds the bytes malformed.
func FuzzField(f *testing.F) {
	for _, s := range [][]byte{
		{0x0a, 0x02, 0x08, 0x01}, {0x08, 0x90, 0x4e}, {0x0d, 1, 2, 3, 4}, {0x11, 1, 2, 3, 4, 5, 6, 7, 8},
		{0x0a, 0x05, 'a'}, {0x08, 0xff, 0xff}, {0x0f}, {0x08}, {0x0b, 0x0c}, {0x80}, {0x00, 0x01},
		{0x82, 0x01, 0x01, 'x'}, {0x0a, 0x80, 0x01}, {0x0d, 1, 2},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			num, typ, v, n, err := field(b)
			rnum, rtyp, rv, rn, ok := refField(b)
			if (err == nil) != ok {
				t.Fatalf("% x: field error %v, protowire ok %v", b[:min(len(b), 16)], err, ok)
			}
			if !ok {
				return
			}
			if num != rnum || typ != rtyp || n != rn || !bytes.Equal(v, rv) {
				t.Fatalf("% x: field %d/%d %x (%d bytes), protowire %d/%d %x (%d bytes)", b[:min(len(b), 16)], num, typ, v, n, rnum, rtyp, rv, rn)
			}
			b = b[n:]
		}
	})
}

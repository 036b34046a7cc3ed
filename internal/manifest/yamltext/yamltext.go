package yamltext

import (
	"bytes"
	"encoding/binary"
	"unicode/utf16"
)

// UTF16 decodes b when it starts with a UTF-16 byte order mark, big or little endian (an odd
// last byte is dropped, as the YAML decoder drops it); false, and b unread, otherwise.
func UTF16(b []byte) (string, bool) {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	default:
		return "", false
	}
	units := make([]uint16, 0, len(b)/2)
	for i := 2; i+1 < len(b); i += 2 {
		units = append(units, order.Uint16(b[i:]))
	}
	return string(utf16.Decode(units)), true
}

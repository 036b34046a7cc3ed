package yamltext

import "testing"

func TestUTF16(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"\xfe\xff\x00a\x00\n\x00b", "a\nb", true},
		{"\xff\xfea\x00\n\x00b\x00x", "a\nb", true}, // the odd last byte dropped
		{"\xfe\xff\x20\x29", "\u2029", true},
		{"a\nb", "", false},
	} {
		if got, ok := UTF16([]byte(tc.in)); got != tc.want || ok != tc.ok {
			t.Errorf("UTF16(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

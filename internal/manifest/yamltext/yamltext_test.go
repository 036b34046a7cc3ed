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

func TestBreaks(t *testing.T) {
	for s, want := range map[string]int{
		"a": 0, "a\nb": 1, "a\r\nb": 1, "a\rb": 1, "a\u0085b\u2028c\u2029d": 3, "a\n\n": 2,
	} {
		if got := Breaks(s); got != want {
			t.Errorf("Breaks(%q) = %d, want %d", s, got, want)
		}
	}
	if got := TrimBreaks("a\r\n\u2029"); got != "a" {
		t.Errorf("TrimBreaks = %q", got)
	}
}

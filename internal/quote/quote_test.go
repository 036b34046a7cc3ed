package quote

import (
	"flag"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"web", `"web"`},
		{"wéb", `"wéb"`},
		{"日本", `"日本"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"a'b", `"a'b"`},
		{"tab\tnl\n", `"tab\tnl\n"`},
		{"\x00", `"\x00"`},
		{"bad\xffbyte", `"bad\xffbyte"`},
		{"w\xc3b", `"w\xc3b"`}, // a cut 'é': the byte, escaped, not "Ã"
		{"\ufffd", `"` + "\ufffd" + `"`},
		{long, `"` + strings.Repeat("a", Max) + `"... (1048576 bytes)`},
		{strings.Repeat("\x00", 1<<20), `"` + strings.Repeat(`\x00`, Max/4) + `"... (1048576 bytes)`},
		{strings.Repeat("é", 200), `"` + strings.Repeat("é", Max/2) + `"... (400 bytes)`},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%.40q) = %.300q, want %.300q", c.in, got, c.want)
		}
	}
	if got := Bytes([]byte("wéb")); got != `"wéb"` {
		t.Errorf("Bytes = %s", got)
	}
	if got := Prefix("abcdef", 3); got != `"abc"... (6 bytes)` {
		t.Errorf("Prefix = %s", got)
	}
}

func TestMessage(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{`json: unknown field "web"`, `json: unknown field "web"`},
		{`a\b wéb`, `a\b wéb`},
		{"line\nbreak\x00", `line\nbreak\x00`},
		{"bad\xffbyte", `bad\xffbyte`},
		{`field "` + strings.Repeat("A", 1000) + `"`, `field "` + strings.Repeat("A", Max-7) + `... (1008 bytes)`},
	} {
		if got := Message(c.in); got != c.want {
			t.Errorf("Message(%.40q) = %.300q, want %.300q", c.in, got, c.want)
		}
	}
}

// FuzzString checks the bounds: the quoted part is at most Max bytes, valid UTF-8, a prefix of
// what strconv.Quote writes, and all of it when that fits.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "web", "wéb", "\x00\xff", strings.Repeat("é", 300), "\"'\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		full := strconv.Quote(s)
		if !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q is not valid UTF-8", s, got)
		}
		if len(full)-2 <= Max {
			if got != full {
				t.Fatalf("String(%q) = %s, want %s", s, got, full)
			}
			return
		}
		body, _, ok := strings.Cut(got[1:], `"... (`)
		if !ok || len(body) > Max || !strings.HasPrefix(full, `"`+body) || !strings.HasSuffix(got, "("+strconv.Itoa(len(s))+" bytes)") {
			t.Fatalf("String(%.60q) = %.400s", s, got)
		}
	})
}

func TestMessagePrefix(t *testing.T) {
	long := "metadata.name: Invalid value: \"" + strings.Repeat("x", 3000) + "\""
	got := MessagePrefix(long, 1024)
	if want := long[:1024] + "... (3032 bytes)"; got != want {
		t.Errorf("MessagePrefix = %.80q...%q, want it clipped at 1024 bytes", got, got[max(0, len(got)-40):])
	}
	if got := MessagePrefix("short\n", 1024); got != `short\n` {
		t.Errorf("MessagePrefix(short) = %q", got)
	}
}

// TestFlagError: the flag package's error for a long value keeps the flag's name and reason
// and shows a short prefix of the value; other errors are cut as Message cuts them.
func TestFlagError(t *testing.T) {
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("replicas", 0, "")
	long := strings.Repeat("x", 100_000)
	err := fs.Parse([]string{"-replicas", long})
	if err == nil || len(err.Error()) < 100_000 {
		t.Fatalf("the flag package no longer quotes the value whole: %.100v", err)
	}
	got := FlagError(err)
	if want := `invalid value "` + strings.Repeat("x", 64) + `"... (100000 bytes) for flag -replicas: parse error`; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := FlagError(fs.Parse([]string{"-replicas", "3x"})); got != `invalid value "3x" for flag -replicas: parse error` {
		t.Errorf("a short value: %q", got)
	}
	if got := FlagError(fs.Parse([]string{"-" + long})); len(got) > 2*Max || !strings.HasPrefix(got, "flag provided but not defined") {
		t.Errorf("an unknown flag: %d bytes: %.100s", len(got), got)
	}
}

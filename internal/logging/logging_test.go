package logging

import (
	"strings"
	"testing"
)

// TestBadValuesQuotedByPrefix: a bad level or format is named by a short prefix (zap's own
// error repeated a 2,000-byte value whole, three times over in the proxy's message).
func TestBadValuesQuotedByPrefix(t *testing.T) {
	long := strings.Repeat("x", 2000)
	for _, c := range []struct{ level, format, want string }{
		{long, "json", "want debug, info, warn or error"},
		{"info", long, "want json or console"},
	} {
		_, err := New(c.level, c.format)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if len(msg) == 0 || len(msg) > 400 || !strings.Contains(msg, c.want) {
			t.Errorf("New(%.10q..., %.10q...) = %.100q (%d bytes), want a short error saying %q", c.level, c.format, msg, len(msg), c.want)
		}
	}
	if _, err := New("warn", "console"); err != nil {
		t.Fatal(err)
	}
}

func TestProxyFilterLevel(t *testing.T) {
	for filter, want := range map[string]string{
		"warn,linkerd=info":                  "info",
		"linkerd=debug,warn":                 "debug",
		"warn":                               "warn",
		"":                                   "info",
		"linkerd2_proxy=trace,info":          "debug",
		"off":                                "error",
		"hyper=warn,linkerd_proxy_http=warn": "warn",
	} {
		if got := ProxyFilterLevel(filter); got != want {
			t.Errorf("ProxyFilterLevel(%q) = %q, want %q", filter, got, want)
		}
	}
	for _, bad := range []string{"verbose", "linkerd=inf"} {
		if CheckProxyFilter(bad) == nil {
			t.Errorf("CheckProxyFilter(%q) = nil, want an error", bad)
		}
	}
}

package proxy

import "testing"

func TestLogLevel(t *testing.T) {
	for filter, want := range map[string]string{
		"warn,linkerd=info":                  "info",
		"linkerd=debug,warn":                 "debug",
		"warn":                               "warn",
		"":                                   "info",
		"linkerd2_proxy=trace,info":          "debug",
		"off":                                "error",
		"hyper=warn,linkerd_proxy_http=warn": "warn",
	} {
		if got := LogLevel(filter); got != want {
			t.Errorf("LogLevel(%q) = %q, want %q", filter, got, want)
		}
	}
}

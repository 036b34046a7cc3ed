package h1

import (
	"bytes"
	"net/http"
	"net/netip"
)

// Simple reports whether a parsed request is one the lean path forwards exactly: HTTP/1.1
// with one Host, no transfer coding, no upgrade, no Expect, not gRPC, not CONNECT, and at
// most maxBody bytes of Content-Length body. Anything else is for net/http.
func (h *Head) Simple(maxBody int64) bool {
	return h.Minor == 1 && h.Hosts == 1 && !h.HasTE && !h.Upgrade && !h.Expect && !h.GRPC &&
		h.ContentLength <= maxBody && string(h.Method) != http.MethodConnect
}

// SplitTarget splits a request's target. Origin-form ("/path?query", or "*") gives the Host
// field's value as authority and the target as path; absolute-form with the http scheme
// ("http://authority/path?query") gives its authority and the rest ("" for none). ok is
// false for every other form, for a fragment, and for an authority that is not a plain
// host[:port] (a name of letters, digits and "-._~", or a bracketed IPv6 address; digits
// for the port): those are for net/http.
func (h *Head) SplitTarget() (authority, path []byte, absolute, ok bool) {
	t := h.Target
	switch {
	case len(t) > 0 && t[0] == '/' || string(t) == "*":
		return h.Host, t, false, true
	case len(t) > 7 && Fold(t[:7], "http://"):
		rest := t[7:]
		end := bytes.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if !plainAuthority(rest[:end]) || bytes.IndexByte(rest, '#') >= 0 {
			return nil, nil, false, false
		}
		return rest[:end], rest[end:], true, true
	}
	return nil, nil, false, false
}

// plainAuthority reports whether a is host[:port] with a plain host: a name of letters,
// digits and "-._~", or a bracketed IPv6 address without zone.
func plainAuthority(a []byte) bool {
	host, port := a, []byte(nil)
	if len(a) > 0 && a[0] == '[' {
		end := bytes.IndexByte(a, ']')
		if end < 0 {
			return false
		}
		ip, err := netip.ParseAddr(string(a[1:end]))
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return false
		}
		host, port = nil, a[end+1:]
	} else if i := bytes.IndexByte(a, ':'); i >= 0 {
		host, port = a[:i], a[i:]
	}
	if host != nil {
		if len(host) == 0 {
			return false
		}
		for _, c := range host {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
				return false
			}
		}
	}
	if len(port) == 0 {
		return true
	}
	if port[0] != ':' {
		return false
	}
	for _, c := range port[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Drop marks every field called name (lowercase) as not to be forwarded.
func (h *Head) Drop(name string) {
	for i := range h.Fields {
		if Fold(h.Fields[i].Name, name) {
			h.Fields[i].Hop = true
		}
	}
}

// Idempotent reports the methods net/http retries on a stale keep-alive connection.
func (h *Head) Idempotent() bool {
	switch string(h.Method) {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

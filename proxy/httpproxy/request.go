package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Form is the form of a request's target (RFC 9112, section 3.2).
type Form uint8

const (
	// AbsoluteForm is a request to a proxy: GET http://host:port/path HTTP/1.1.
	AbsoluteForm Form = iota + 1
	// AuthorityForm is a tunnel: CONNECT host:port HTTP/1.1.
	AuthorityForm
	// OriginForm is a request addressed to the server itself: GET /path HTTP/1.1, routed by
	// the connection's original destination or else its Host header.
	OriginForm
)

func (f Form) String() string {
	switch f {
	case AbsoluteForm:
		return "absolute-form"
	case AuthorityForm:
		return "authority-form"
	case OriginForm:
		return "origin-form"
	}
	return "Form(" + strconv.Itoa(int(f)) + ")"
}

// ConnectEstablished is the answer to an accepted CONNECT; the tunnel starts after it.
const ConnectEstablished = "HTTP/1.1 200 Connection established\r\n\r\n"

// Request is one request a client sent to the outbound listener, classified.
type Request struct {
	Form Form
	// Target is where the request goes: the absolute-form URI's or CONNECT's authority (port
	// 80 by default for http), or for origin-form the original destination when known and
	// otherwise the Host header.
	Target Authority
	// HTTP is the request. For AbsoluteForm it is rewritten for forwarding: its URL and
	// RequestURI are in origin-form (path and query), Host is the authority the client named,
	// and the headers addressed to the proxy (Proxy-Connection, Proxy-Authorization) are
	// removed; the other hop-by-hop headers are the forwarder's to handle. For AuthorityForm
	// it is the CONNECT request, which has no body.
	HTTP *http.Request
}

// Error is a request the proxy refuses; the caller answers it with WriteResponse and closes
// the connection.
type Error struct {
	// Status is http.StatusBadRequest, or http.StatusRequestHeaderFieldsTooLarge for a head
	// over the bound.
	Status int
	// Reason says what is wrong, quoting at most a short part of the request.
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("http proxy: %d: %s", e.Status, e.Reason) }

// WriteResponse writes e as a plain-text HTTP/1.1 response that closes the connection.
func (e *Error) WriteResponse(w io.Writer) error {
	_, err := fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		e.Status, http.StatusText(e.Status), len(e.Reason)+1, e.Reason)
	return err
}

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Reason: fmt.Sprintf(format, args...)}
}

// Classify classifies a request net/http has read (http.ReadRequest, or an http.Server's
// handler) and, for absolute-form, rewrites it in place for forwarding (see Request.HTTP).
// origDst is the connection's original destination (SO_ORIGINAL_DST), or the zero value
// when none is known. It returns an *Error for a request the proxy cannot route. It is
// safe for concurrent use on different requests.
func Classify(req *http.Request, origDst netip.AddrPort) (*Request, error) {
	if req.ProtoMajor != 1 {
		return nil, badRequest("unsupported protocol %s", quote(req.Proto))
	}
	u := req.URL
	switch {
	case req.Method == http.MethodConnect:
		if u == nil || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			return nil, badRequest("CONNECT needs host:port, got %s", quote(req.RequestURI))
		}
		a, err := ParseAuthority(u.Host, 0)
		if err != nil {
			return nil, badRequest("CONNECT target: %v", err)
		}
		return &Request{Form: AuthorityForm, Target: a, HTTP: req}, nil
	case u != nil && u.IsAbs():
		return absolute(req)
	case u != nil && u.Opaque == "" && u.Host == "" && (strings.HasPrefix(u.Path, "/") || req.RequestURI == "*"):
		return origin(req, origDst)
	}
	return nil, badRequest("request target %s is not absolute-form, authority-form or origin-form", quote(req.RequestURI))
}

// absolute routes GET http://host:port/path and rewrites the request to origin-form.
func absolute(req *http.Request) (*Request, error) {
	u := req.URL
	switch {
	case u.Scheme == "https":
		return nil, badRequest("an https:// target must be requested with CONNECT")
	case u.Scheme != "http":
		return nil, badRequest("unsupported scheme %s", quote(u.Scheme))
	case u.Opaque != "":
		return nil, badRequest("request target %s has no authority", quote(req.RequestURI))
	case u.User != nil:
		return nil, badRequest("request target must not carry userinfo")
	case u.Host == "":
		return nil, badRequest("request target %s has no host", quote(req.RequestURI))
	}
	a, err := ParseAuthority(u.Host, 80)
	if err != nil {
		return nil, badRequest("request target: %v", err)
	}
	// net/http already set req.Host from the URI, which RFC 9112 section 3.2.2 puts above a
	// Host header. The URL keeps only what origin-form carries.
	req.Host = u.Host
	u.Scheme, u.Host, u.Fragment, u.RawFragment = "", "", "", ""
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	req.RequestURI = u.RequestURI()
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	return &Request{Form: AbsoluteForm, Target: a, HTTP: req}, nil
}

// origin routes GET /path by the original destination, or by Host when there is none.
func origin(req *http.Request, origDst netip.AddrPort) (*Request, error) {
	if origDst.IsValid() && origDst.Port() != 0 {
		a := Authority{Host: origDst.Addr().Unmap().WithZone("").String(), Port: origDst.Port()}
		return &Request{Form: OriginForm, Target: a, HTTP: req}, nil
	}
	if req.Host == "" {
		return nil, badRequest("origin-form request without Host, and no original destination")
	}
	a, err := ParseAuthority(req.Host, 80)
	if err != nil {
		return nil, badRequest("Host: %v", err)
	}
	return &Request{Form: OriginForm, Target: a, HTTP: req}, nil
}

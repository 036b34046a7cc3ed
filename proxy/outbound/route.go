package outbound

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/meridian-mesh/meridian/proxy/httpproxy"
)

// route says where a request goes: the explicit-proxy target (absolute-form, CONNECT, or an
// origin-form or HTTP/2 request routed by its Host), or for a transparent connection the
// Host when it is a cluster name and else the original destination. It returns the
// classified request for CONNECT, and an *httpproxy.Error for a request it cannot route.
func (o *Outbound) route(cc *clientConn, req *http.Request) (authority string, connect *httpproxy.Request, err error) {
	if req.Method == http.MethodConnect {
		pr, err := httpproxy.Classify(req, netip.AddrPort{})
		if err != nil {
			return "", nil, err
		}
		return pr.Target.String(), pr, nil
	}
	if req.ProtoMajor == 1 && req.URL != nil && req.URL.IsAbs() { // proxy-form, either way in
		pr, err := httpproxy.Classify(req, netip.AddrPort{})
		if err != nil {
			return "", nil, err
		}
		return pr.Target.String(), nil, nil
	}
	if req.ProtoMajor == 1 && !originForm(req) { // Classify says what is wrong with it
		if _, err := httpproxy.Classify(req, cc.origDst); err != nil {
			return "", nil, err
		}
	}
	if !cc.transparent() {
		if req.Host == "" {
			return "", nil, &httpproxy.Error{Status: http.StatusBadRequest, Reason: "request without Host (:authority)"}
		}
		return o.hostAuthority(cc, req.Host, 80)
	}
	if req.Host != "" && o.isClusterName(req.Host) {
		return o.hostAuthority(cc, req.Host, cc.origDst.Port())
	}
	return cc.origAuth, nil, nil
}

// originForm reports whether the request target is origin-form (/path, or * for OPTIONS),
// as httpproxy.Classify defines it.
func originForm(req *http.Request) bool {
	u := req.URL
	return u != nil && u.Opaque == "" && u.Host == "" && (strings.HasPrefix(u.Path, "/") || req.RequestURI == "*")
}

// hostAuthority normalises a Host into host:port, remembering the last answer per
// connection (a keep-alive connection's requests name the same Host).
func (o *Outbound) hostAuthority(cc *clientConn, host string, defaultPort uint16) (string, *httpproxy.Request, error) {
	if m := cc.memo.Load(); m != nil && m.host == host {
		return m.authority, nil, nil
	}
	a, err := httpproxy.ParseAuthority(host, defaultPort)
	if err != nil {
		return "", nil, &httpproxy.Error{Status: http.StatusBadRequest, Reason: "Host: " + err.Error()}
	}
	auth := a.String()
	cc.memo.Store(&hostMemo{host: host, authority: auth})
	return auth, nil, nil
}

// isClusterName reports whether a Host (with or without a port) is a DNS name under one of
// Config.ClusterSuffixes. An IP address is never one.
func (o *Outbound) isClusterName(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" || strings.HasPrefix(host, "[") {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	for _, s := range o.suffixes {
		if hasSuffixFold(host, s) {
			return true
		}
	}
	return false
}

// hasSuffixFold reports whether name is suffix or ends with "."+suffix, ignoring ASCII case;
// the empty suffix (from ".") matches every name.
func hasSuffixFold(name, suffix string) bool {
	if suffix == "" {
		return true
	}
	if len(name) == len(suffix) {
		return strings.EqualFold(name, suffix)
	}
	return len(name) > len(suffix) && name[len(name)-len(suffix)-1] == '.' &&
		strings.EqualFold(name[len(name)-len(suffix):], suffix)
}

package translator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Target is what a Get or GetProfile path names: a Service port, or one pod of it by
// hostname (<hostname>.<service>.<namespace>.svc.<cluster-domain>).
type Target struct {
	Service, Namespace string
	// Hostname is the endpoint hostname when the path names a single pod; else "".
	Hostname string
	Port     uint32
}

// DefaultPort is the port of a path without one.
const DefaultPort = 80

// maxHostLen is the longest DNS name.
const maxHostLen = 253

// ErrIPAddress is wrapped by the error ParseAuthority returns for an IP address host.
var ErrIPAddress = errors.New("is an IP address; Get needs a Service name")

// ParseAuthority parses the path of a GetDestination request, "host[:port]" with host
// "<service>.<namespace>.svc.<cluster-domain>" or
// "<hostname>.<service>.<namespace>.svc.<cluster-domain>" (a trailing dot is allowed, case
// does not matter and names are returned lower-cased). The port is 80 when absent and must be
// 1..65535. The error says what is wrong in words a person can act on; an IP address host
// gives an error wrapping ErrIPAddress.
func ParseAuthority(cfg Config, path string) (Target, error) {
	if strings.TrimSpace(path) == "" {
		return Target{}, fmt.Errorf("empty authority: want <service>.<namespace>.svc.%s[:port]", cfg.ClusterDomain)
	}
	host, portStr, hasPort, err := splitHostPort(path)
	if err != nil {
		return Target{}, err
	}
	port := uint32(DefaultPort)
	if hasPort {
		if port, err = parsePort(portStr); err != nil {
			return Target{}, fmt.Errorf("authority %q: %w", path, err)
		}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return Target{}, fmt.Errorf("authority %q: host %q %w", path, host, ErrIPAddress)
	}
	t, err := parseHost(cfg, host)
	if err != nil {
		return Target{}, fmt.Errorf("authority %q: %w", path, err)
	}
	t.Port = port
	return t, nil
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port".
func splitHostPort(path string) (host, port string, hasPort bool, err error) {
	if strings.HasPrefix(path, "[") {
		end := strings.IndexByte(path, ']')
		if end < 0 {
			return "", "", false, fmt.Errorf("authority %q: missing ']' after an IPv6 address", path)
		}
		host, rest := path[1:end], path[end+1:]
		if _, perr := netip.ParseAddr(host); perr == nil {
			return "", "", false, fmt.Errorf("authority %q: host %q %w", path, host, ErrIPAddress)
		}
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", false, fmt.Errorf("authority %q: unexpected %q after ']'", path, rest)
		}
		return "", "", false, fmt.Errorf("authority %q: %q in brackets is not an IPv6 address", path, host)
	}
	switch strings.Count(path, ":") {
	case 0:
		return path, "", false, nil
	case 1:
		i := strings.IndexByte(path, ':')
		return path[:i], path[i+1:], true, nil
	default:
		if _, perr := netip.ParseAddr(path); perr == nil {
			return "", "", false, fmt.Errorf("authority %q: host %q %w", path, path, ErrIPAddress)
		}
		return "", "", false, fmt.Errorf("authority %q: too many ':'; want host[:port]", path)
	}
}

func parsePort(s string) (uint32, error) {
	if s == "" {
		return 0, errors.New("empty port after ':'")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q is not a number", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range 1-65535", s)
	}
	return uint32(n), nil
}

// parseHost parses a Service or pod DNS name in the cluster domain.
func parseHost(cfg Config, host string) (Target, error) {
	want := "<service>.<namespace>.svc." + cfg.ClusterDomain
	if host == "" {
		return Target{}, fmt.Errorf("empty host: want %s", want)
	}
	if len(host) > maxHostLen+1 {
		return Target{}, fmt.Errorf("host is %d characters long, longer than a DNS name (%d)", len(host), maxHostLen)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	domain := strings.ToLower(strings.Trim(cfg.ClusterDomain, "."))
	suffix := ".svc." + domain
	if domain == "" {
		suffix = ".svc"
	}
	if !strings.HasSuffix(name, suffix) {
		if strings.Contains(name, ".svc.") || strings.HasSuffix(name, ".svc") {
			return Target{}, fmt.Errorf("host %q is not in the cluster domain %q: want %s", host, cfg.ClusterDomain, want)
		}
		return Target{}, fmt.Errorf("host %q is not a Service name: want %s", host, want)
	}
	labels := strings.Split(strings.TrimSuffix(name, suffix), ".")
	var t Target
	switch len(labels) {
	case 2:
		t.Service, t.Namespace = labels[0], labels[1]
	case 3:
		t.Hostname, t.Service, t.Namespace = labels[0], labels[1], labels[2]
		if err := checkLabel("hostname", t.Hostname); err != nil {
			return Target{}, fmt.Errorf("host %q: %w", host, err)
		}
	default:
		return Target{}, fmt.Errorf("host %q has %d name(s) before .svc.%s: want %s or <hostname>.<service>.<namespace>.svc.%s",
			host, len(labels), cfg.ClusterDomain, want, cfg.ClusterDomain)
	}
	if err := checkLabel("service name", t.Service); err != nil {
		return Target{}, fmt.Errorf("host %q: %w", host, err)
	}
	if err := checkLabel("namespace", t.Namespace); err != nil {
		return Target{}, fmt.Errorf("host %q: %w", host, err)
	}
	return t, nil
}

// checkLabel reports whether s is an RFC 1123 DNS label (what Kubernetes requires of
// namespace names, Service names and endpoint hostnames), lower-case already.
func checkLabel(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > 63 {
		return fmt.Errorf("%s %q is longer than 63 characters", what, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if i == 0 || i == len(s)-1 {
				return fmt.Errorf("%s %q must start and end with a letter or digit", what, s)
			}
		default:
			return fmt.Errorf("%s %q has %q: only letters, digits and '-' are allowed", what, s, string(rune(c)))
		}
	}
	return nil
}

// ContextToken is what a proxy says about itself in GetDestination.context_token.
type ContextToken struct {
	Namespace string `json:"ns"`
	NodeName  string `json:"nodeName"`
	Pod       string `json:"pod"`
}

// ParseContextToken parses a context token: JSON {"ns","nodeName","pod"}, or the legacy form
// "ns:<namespace>". Anything else gives the empty token, as in Linkerd (a bad token is not an
// error: it only loses the client's locality).
func ParseContextToken(s string) ContextToken {
	if s == "" {
		return ContextToken{}
	}
	var t ContextToken
	if err := json.Unmarshal([]byte(s), &t); err == nil {
		return t
	}
	if ns, ok := strings.CutPrefix(s, "ns:"); ok && !strings.Contains(ns, ":") {
		return ContextToken{Namespace: ns}
	}
	return ContextToken{}
}

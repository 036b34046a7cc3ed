package translator

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/meridian-mesh/meridian/internal/quote"
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
			return Target{}, fmt.Errorf("authority %s: %w", quote.String(path), err)
		}
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return Target{}, fmt.Errorf("authority %s: host %s %w", quote.String(path), quote.String(host), ErrIPAddress)
	}
	t, err := parseHost(cfg, host)
	if err != nil {
		return Target{}, fmt.Errorf("authority %s: %w", quote.String(path), err)
	}
	t.Port = port
	return t, nil
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port".
func splitHostPort(path string) (host, port string, hasPort bool, err error) {
	if strings.HasPrefix(path, "[") {
		end := strings.IndexByte(path, ']')
		if end < 0 {
			return "", "", false, fmt.Errorf("authority %s: missing ']' after an IPv6 address", quote.String(path))
		}
		host, rest := path[1:end], path[end+1:]
		if _, perr := netip.ParseAddr(host); perr == nil {
			return "", "", false, fmt.Errorf("authority %s: host %s %w", quote.String(path), quote.String(host), ErrIPAddress)
		}
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", "", false, fmt.Errorf("authority %s: unexpected %s after ']'", quote.String(path), quote.String(rest))
		}
		return "", "", false, fmt.Errorf("authority %s: %s in brackets is not an IPv6 address", quote.String(path), quote.String(host))
	}
	switch strings.Count(path, ":") {
	case 0:
		return path, "", false, nil
	case 1:
		i := strings.IndexByte(path, ':')
		return path[:i], path[i+1:], true, nil
	default:
		if _, perr := netip.ParseAddr(path); perr == nil {
			return "", "", false, fmt.Errorf("authority %s: host %s %w", quote.String(path), quote.String(path), ErrIPAddress)
		}
		return "", "", false, fmt.Errorf("authority %s: too many ':'; want host[:port]", quote.String(path))
	}
}

func parsePort(s string) (uint32, error) {
	if s == "" {
		return 0, errors.New("empty port after ':'")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %s is not a number", quote.String(s))
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range 1-65535", quote.String(s))
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
	// DNS names compare ASCII case-insensitively: only A-Z is folded, so that a non-ASCII
	// character is reported as sent (and the Kelvin sign does not become a 'k').
	name := asciiLower(strings.TrimSuffix(host, "."))
	domain := strings.ToLower(strings.Trim(cfg.ClusterDomain, "."))
	suffix := ".svc." + domain
	if domain == "" {
		suffix = ".svc"
	}
	if !strings.HasSuffix(name, suffix) {
		if strings.Contains(name, ".svc.") || strings.HasSuffix(name, ".svc") {
			return Target{}, fmt.Errorf("host %s is not in the cluster domain %q: want %s", quote.String(host), cfg.ClusterDomain, want)
		}
		return Target{}, fmt.Errorf("host %s is not a Service name: want %s", quote.String(host), want)
	}
	labels := strings.Split(strings.TrimSuffix(name, suffix), ".")
	var t Target
	switch len(labels) {
	case 2:
		t.Service, t.Namespace = labels[0], labels[1]
	case 3:
		t.Hostname, t.Service, t.Namespace = labels[0], labels[1], labels[2]
		if err := checkLabel("hostname", t.Hostname); err != nil {
			return Target{}, fmt.Errorf("host %s: %w", quote.String(host), err)
		}
	default:
		return Target{}, fmt.Errorf("host %s has %d name(s) before .svc.%s: want %s or <hostname>.<service>.<namespace>.svc.%s",
			quote.String(host), len(labels), cfg.ClusterDomain, want, cfg.ClusterDomain)
	}
	if err := checkLabel("service name", t.Service); err != nil {
		return Target{}, fmt.Errorf("host %s: %w", quote.String(host), err)
	}
	if err := checkLabel("namespace", t.Namespace); err != nil {
		return Target{}, fmt.Errorf("host %s: %w", quote.String(host), err)
	}
	return t, nil
}

// asciiLower maps A-Z to a-z and leaves every other byte as it is.
func asciiLower(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// checkLabel reports whether s is an RFC 1123 DNS label (what Kubernetes requires of
// namespace names, Service names and endpoint hostnames), lower-case already.
func checkLabel(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > 63 {
		return fmt.Errorf("%s %s is longer than 63 characters", what, quote.String(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if i == 0 || i == len(s)-1 {
				return fmt.Errorf("%s %s must start and end with a letter or digit", what, quote.String(s))
			}
		default:
			// Name the character, not its first byte ("wéb" has 'é', not 'Ã').
			_, size := utf8.DecodeRuneInString(s[i:])
			bad := s[i : i+size]
			return fmt.Errorf("%s %s has %s: only letters, digits and '-' are allowed", what, quote.String(s), quote.String(bad))
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

package httpproxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Authority is a normalised host and port: the host lowercased, without a trailing dot and,
// for an IP address, in its canonical form without brackets (net/netip's String).
type Authority struct {
	Host string
	Port uint16
}

// String returns host:port, with brackets around an IPv6 host: the form a destination
// lookup (GetDestination.path) and a dial take.
func (a Authority) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))) }

// Addr returns the host as an IP address, when it is one.
func (a Authority) Addr() (netip.Addr, bool) {
	ip, err := netip.ParseAddr(a.Host)
	return ip, err == nil
}

// ParseAuthority normalises host[:port] (RFC 3986's authority without userinfo). A missing
// or empty port means defaultPort; with defaultPort 0 the port is required. The host is a
// DNS name (letters, digits, '-', '_' and '.', labels of 1 to 63 bytes, at most 253 bytes),
// a dotted IPv4 address, or an IPv6 address in brackets (without a zone).
func ParseAuthority(s string, defaultPort uint16) (Authority, error) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return Authority{}, fmt.Errorf("authority %s: %w", quote(s), err)
	}
	a := Authority{Port: defaultPort}
	if port != "" {
		if a.Port, err = parsePort(port); err != nil {
			return Authority{}, fmt.Errorf("authority %s: %w", quote(s), err)
		}
	} else if defaultPort == 0 {
		return Authority{}, fmt.Errorf("authority %s: %w", quote(s), errNoPort)
	}
	if a.Host, err = normaliseHost(host); err != nil {
		return Authority{}, fmt.Errorf("authority %s: %w", quote(s), err)
	}
	return a, nil
}

var errNoPort = errors.New("no port")

// splitHostPort splits s at the port's colon; an IPv6 host keeps its brackets.
func splitHostPort(s string) (host, port string, err error) {
	if s == "" {
		return "", "", errors.New("empty")
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", errors.New("missing ']'")
		}
		host, rest := s[:end+1], s[end+1:]
		switch {
		case rest == "":
			return host, "", nil
		case rest[0] != ':':
			return "", "", errors.New("text after ']'")
		}
		return host, rest[1:], nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, "", nil
	}
	if strings.IndexByte(s[:i], ':') >= 0 {
		return "", "", errors.New("an IPv6 address must be in brackets")
	}
	return s[:i], s[i+1:], nil
}

// parsePort accepts 1 to 65535 in plain decimal digits.
func parsePort(p string) (uint16, error) {
	if len(p) > 5 || strings.Trim(p, "0123456789") != "" {
		return 0, errors.New("bad port: not decimal digits")
	}
	n, _ := strconv.Atoi(p)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d out of range", n)
	}
	return uint16(n), nil
}

// normaliseHost checks host and returns its normal form.
func normaliseHost(host string) (string, error) {
	if strings.HasPrefix(host, "[") {
		ip, err := netip.ParseAddr(strings.TrimSuffix(host[1:], "]"))
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", errors.New("bad IPv6 address")
		}
		return ip.String(), nil
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return "", errors.New("empty host")
	}
	if strings.Trim(host, "0123456789.") == "" { // digits and dots: must be an IPv4 address
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is4() {
			return "", errors.New("bad IPv4 address")
		}
		return ip.String(), nil
	}
	if len(host) > 253 {
		return "", errors.New("host longer than 253 bytes")
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) == 0 || len(label) > 63 {
			return "", errors.New("bad host: labels must be 1 to 63 bytes")
		}
		for i := 0; i < len(label); i++ {
			switch c := label[i]; {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return "", fmt.Errorf("bad host: byte %q", c)
			}
		}
	}
	return host, nil
}

// quote quotes bad input for an error message, at most 64 bytes of it.
func quote(s string) string {
	q := strconv.Quote(s)
	if len(q) > 64 {
		q = q[:60] + `..."`
	}
	return q
}

package proxyinit

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Chain names, as Linkerd's.
const (
	ChainRedirect = "PROXY_INIT_REDIRECT"
	ChainOutput   = "PROXY_INIT_OUTPUT"
)

// maxMultiport is how many port slots one -m multiport match takes (a range counts two).
const maxMultiport = 15

// Config describes the capture. Build it with DefaultConfig.
type Config struct {
	IncomingProxyPort int   // 4143
	OutgoingProxyPort int   // 4140
	ProxyUID          int64 // 2102
	ProxyGID          int64 // -1: no GID bypass
	// InboundPortsToIgnore and OutboundPortsToIgnore are ports ("25") or inclusive ranges
	// ("8000-9000"). Inbound traffic to the proxy's own admin and control ports must be in
	// InboundPortsToIgnore (the injector puts 4190 and 4191 there).
	InboundPortsToIgnore  []string
	OutboundPortsToIgnore []string
	// SubnetsToIgnore are outbound destination CIDRs that bypass the proxy.
	SubnetsToIgnore []string
}

// DefaultConfig returns Linkerd's defaults.
func DefaultConfig() Config {
	return Config{
		IncomingProxyPort:    4143,
		OutgoingProxyPort:    4140,
		ProxyUID:             2102,
		ProxyGID:             -1,
		InboundPortsToIgnore: []string{"4190", "4191"},
	}
}

// portSpec is a validated port or range in iptables syntax ("25" or "8000:9000") and the
// number of multiport slots it takes.
type portSpec struct {
	text  string
	slots int
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want an integer in [1, 65535]", s)
	}
	return n, nil
}

// ParsePorts validates ports and ranges and turns them into iptables multiport syntax.
// Each element may itself be a comma-separated list.
func ParsePorts(list []string) ([]portSpec, error) {
	var out []portSpec
	seen := map[string]bool{}
	for _, item := range list {
		for _, f := range strings.Split(item, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			lo, hi, isRange := strings.Cut(f, "-")
			a, err := parsePort(lo)
			if err != nil {
				return nil, err
			}
			ps := portSpec{text: strconv.Itoa(a), slots: 1}
			if isRange {
				b, err := parsePort(hi)
				if err != nil {
					return nil, err
				}
				if b < a {
					return nil, fmt.Errorf("port range %q ends below its start", f)
				}
				if b > a {
					ps = portSpec{text: fmt.Sprintf("%d:%d", a, b), slots: 2}
				}
			}
			if !seen[ps.text] {
				seen[ps.text] = true
				out = append(out, ps)
			}
		}
	}
	return out, nil
}

// multiport groups ports into -m multiport --dports lists of at most maxMultiport slots.
func multiport(ports []portSpec) []string {
	var groups []string
	var cur []string
	slots := 0
	for _, p := range ports {
		if slots+p.slots > maxMultiport {
			groups = append(groups, strings.Join(cur, ","))
			cur, slots = nil, 0
		}
		cur = append(cur, p.text)
		slots += p.slots
	}
	if len(cur) > 0 {
		groups = append(groups, strings.Join(cur, ","))
	}
	return groups
}

// Rules returns the iptables-restore input (nat table, --noflush semantics: only the two
// chains are created, PREROUTING and OUTPUT each get one jump) for c.
func Rules(c Config) (string, error) {
	for _, p := range []int{c.IncomingProxyPort, c.OutgoingProxyPort} {
		if p < 1 || p > 65535 {
			return "", fmt.Errorf("proxy port %d out of range", p)
		}
	}
	if c.IncomingProxyPort == c.OutgoingProxyPort {
		return "", fmt.Errorf("incoming and outgoing proxy ports are both %d", c.IncomingProxyPort)
	}
	if c.ProxyUID < 0 {
		return "", fmt.Errorf("proxy uid %d is negative", c.ProxyUID)
	}
	in, err := ParsePorts(c.InboundPortsToIgnore)
	if err != nil {
		return "", fmt.Errorf("inbound ports to ignore: %w", err)
	}
	out, err := ParsePorts(c.OutboundPortsToIgnore)
	if err != nil {
		return "", fmt.Errorf("outbound ports to ignore: %w", err)
	}
	var subnets []string
	for _, s := range c.SubnetsToIgnore {
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return "", fmt.Errorf("subnet to ignore %q: %w", f, err)
			}
			if !p.Addr().Is4() {
				return "", fmt.Errorf("subnet to ignore %q: only IPv4 subnets go to iptables", f)
			}
			subnets = append(subnets, p.Masked().String())
		}
	}

	var b strings.Builder
	rule := func(chain, match, comment, target string) {
		fmt.Fprintf(&b, "-A %s", chain)
		if match != "" {
			fmt.Fprintf(&b, " %s", match)
		}
		fmt.Fprintf(&b, " -m comment --comment \"proxy-init/%s\" -j %s\n", comment, target)
	}
	b.WriteString("*nat\n")
	fmt.Fprintf(&b, ":%s - [0:0]\n:%s - [0:0]\n", ChainRedirect, ChainOutput)

	// Inbound: ignored ports return, everything else TCP goes to the inbound port.
	for _, g := range multiport(in) {
		rule(ChainRedirect, "-p tcp -m multiport --dports "+g, "ignore-inbound-ports", "RETURN")
	}
	rule(ChainRedirect, "-p tcp", "redirect-all-incoming-to-proxy-port", fmt.Sprintf("REDIRECT --to-ports %d", c.IncomingProxyPort))
	rule("PREROUTING", "", "install-proxy-init-prerouting", ChainRedirect)

	// Outbound: the proxy's own traffic first (before anything can redirect), loopback,
	// ignored ports and subnets, then the redirect.
	rule(ChainOutput, fmt.Sprintf("-m owner --uid-owner %d", c.ProxyUID), "ignore-proxy-user-id", "RETURN")
	if c.ProxyGID >= 0 {
		rule(ChainOutput, fmt.Sprintf("-m owner --gid-owner %d", c.ProxyGID), "ignore-proxy-group-id", "RETURN")
	}
	rule(ChainOutput, "-o lo", "ignore-loopback", "RETURN")
	for _, g := range multiport(out) {
		rule(ChainOutput, "-p tcp -m multiport --dports "+g, "ignore-outbound-ports", "RETURN")
	}
	for _, s := range subnets {
		rule(ChainOutput, "-d "+s, "ignore-subnet", "RETURN")
	}
	rule(ChainOutput, "-p tcp", "redirect-all-outgoing-to-proxy-port", fmt.Sprintf("REDIRECT --to-ports %d", c.OutgoingProxyPort))
	rule("OUTPUT", "", "install-proxy-init-output", ChainOutput)
	b.WriteString("COMMIT\n")
	return b.String(), nil
}

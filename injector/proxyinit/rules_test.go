package proxyinit

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// ruleIndex returns the index of the first line containing every part, or -1.
func ruleIndex(lines []string, parts ...string) int {
	for i, l := range lines {
		ok := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// checkOrder verifies the capture's invariants on iptables-restore or iptables-save text.
func checkOrder(t *testing.T, text string, c Config) {
	t.Helper()
	lines := strings.Split(text, "\n")
	uid := ruleIndex(lines, "-A "+ChainOutput, "--uid-owner "+itoa(c.ProxyUID), "-j RETURN")
	lo := ruleIndex(lines, "-A "+ChainOutput, "-o lo", "-j RETURN")
	outRedirect := ruleIndex(lines, "-A "+ChainOutput, "-j REDIRECT", "--to-ports "+itoa(int64(c.OutgoingProxyPort)))
	inRedirect := ruleIndex(lines, "-A "+ChainRedirect, "-j REDIRECT", "--to-ports "+itoa(int64(c.IncomingProxyPort)))
	jumpIn := ruleIndex(lines, "-A PREROUTING", "-j "+ChainRedirect)
	jumpOut := ruleIndex(lines, "-A OUTPUT", "-j "+ChainOutput)
	for name, i := range map[string]int{"uid bypass": uid, "loopback": lo, "outbound redirect": outRedirect, "inbound redirect": inRedirect, "PREROUTING jump": jumpIn, "OUTPUT jump": jumpOut} {
		if i < 0 {
			t.Fatalf("no %s rule in:\n%s", name, text)
		}
	}
	if uid > outRedirect || lo > outRedirect {
		t.Errorf("proxy-uid bypass (%d) and loopback (%d) must come before the outbound redirect (%d):\n%s", uid, lo, outRedirect, text)
	}
	// Every RETURN in a chain precedes that chain's REDIRECT.
	for i, l := range lines {
		if strings.HasPrefix(l, "-A "+ChainOutput) && strings.Contains(l, "-j RETURN") && i > outRedirect {
			t.Errorf("outbound RETURN after the redirect: %s", l)
		}
		if strings.HasPrefix(l, "-A "+ChainRedirect) && strings.Contains(l, "-j RETURN") && i > inRedirect {
			t.Errorf("inbound RETURN after the redirect: %s", l)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRulesOrder(t *testing.T) {
	c := DefaultConfig()
	c.OutboundPortsToIgnore = []string{"443", "3306,6000-6100"}
	c.InboundPortsToIgnore = append(c.InboundPortsToIgnore, "25")
	c.SubnetsToIgnore = []string{"10.0.0.0/8"}
	c.ProxyGID = 2102
	rules, err := Rules(c)
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, rules, c)
	for _, want := range []string{
		"*nat\n:PROXY_INIT_REDIRECT - [0:0]\n:PROXY_INIT_OUTPUT - [0:0]\n",
		"-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 4190,4191,25 -m comment",
		"-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 443,3306,6000:6100 -m comment",
		"-A PROXY_INIT_OUTPUT -m owner --gid-owner 2102",
		"-A PROXY_INIT_OUTPUT -d 10.0.0.0/8",
		"COMMIT\n",
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules lack %q:\n%s", want, rules)
		}
	}
}

func TestRulesMultiportChunks(t *testing.T) {
	c := DefaultConfig()
	var ports []string
	for p := 1000; p < 1020; p++ {
		ports = append(ports, strconv.Itoa(p))
	}
	c.OutboundPortsToIgnore = ports
	rules, err := Rules(c)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(rules, "ignore-outbound-ports"); n != 2 {
		t.Errorf("20 ports in %d multiport rules, want 2:\n%s", n, rules)
	}
}

func TestRulesRejects(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"bad port":       func(c *Config) { c.OutboundPortsToIgnore = []string{"http"} },
		"range reversed": func(c *Config) { c.InboundPortsToIgnore = []string{"9-3"} },
		"port zero":      func(c *Config) { c.IncomingProxyPort = 0 },
		"same ports":     func(c *Config) { c.OutgoingProxyPort = c.IncomingProxyPort },
		"bad subnet":     func(c *Config) { c.SubnetsToIgnore = []string{"10.0.0.0/33"} },
		"v6 subnet":      func(c *Config) { c.SubnetsToIgnore = []string{"fd00::/8"} },
		"negative uid":   func(c *Config) { c.ProxyUID = -1 },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := Rules(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzParsePorts(f *testing.F) {
	for _, s := range []string{"25", "8000-9000", "1,2,3", " 443 , 80-80", "9-3", "", "65536", "-", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ports, err := ParsePorts([]string{s})
		if err != nil {
			return
		}
		c := DefaultConfig()
		c.OutboundPortsToIgnore = []string{s}
		rules, err := Rules(c)
		if err != nil {
			t.Fatalf("ParsePorts accepted %q (%v) but Rules failed: %v", s, ports, err)
		}
		checkOrder(t, rules, c)
	})
}

package config

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// The environment the injector writes (linkerd2's chart names and formats).
var injected = map[string]string{
	"LINKERD2_PROXY_LOG":                      "warn,linkerd=info",
	"LINKERD2_PROXY_DESTINATION_SVC_ADDR":     "linkerd-dst-headless.linkerd.svc.cluster.local.:8086",
	"LINKERD2_PROXY_DESTINATION_SVC_NAME":     "linkerd-destination.linkerd.serviceaccount.identity.linkerd.cluster.local",
	"LINKERD2_PROXY_DESTINATION_CONTEXT":      `{"ns":"shop","nodeName":"n1","pod":"web-0"}`,
	"LINKERD2_PROXY_POLICY_WORKLOAD":          `{"ns":"shop","pod":"web-0"}`,
	"LINKERD2_PROXY_INBOUND_DEFAULT_POLICY":   "all-authenticated",
	"LINKERD2_PROXY_INBOUND_PORTS":            "8080,9000-9002",
	"LINKERD2_PROXY_INBOUND_IPS":              "10.0.0.5,fd00::5",
	"LINKERD2_PROXY_OUTBOUND_CONNECT_TIMEOUT": "3s",
	"LINKERD2_PROXY_INBOUND_LISTEN_ADDR":      "[::]:4143",
	"LINKERD2_PROXY_IDENTITY_SVC_ADDR":        "linkerd-identity-headless.linkerd.svc.cluster.local.:8080",
	"LINKERD2_PROXY_IDENTITY_SVC_NAME":        "linkerd-identity.linkerd.serviceaccount.identity.linkerd.cluster.local",
	"LINKERD2_PROXY_IDENTITY_LOCAL_NAME":      "web.shop.serviceaccount.identity.linkerd.cluster.local",
	"LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS":   "-----BEGIN CERTIFICATE-----\n...",
	"LINKERD2_PROXY_IDENTITY_TOKEN_FILE":      "/var/run/secrets/tokens/linkerd-identity-token",
	"LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD":    "30",
}

func TestFromEnv(t *testing.T) {
	c, err := FromEnv(env(injected))
	if err != nil {
		t.Fatal(err)
	}
	if c.InboundDefaultPolicy != "all-authenticated" || c.OutboundConnectTimeout != 3*time.Second || c.ShutdownGracePeriod != 30*time.Second {
		t.Errorf("parsed %+v", c)
	}
	if !slices.Equal(c.InboundPorts, []uint16{8080, 9000, 9001, 9002}) || len(c.InboundIPs) != 2 || c.InboundIPs[1].String() != "fd00::5" {
		t.Errorf("ports %v ips %v", c.InboundPorts, c.InboundIPs)
	}
	if c.OutboundAddr != "127.0.0.1:4140" || c.AdminAddr != "0.0.0.0:4191" || c.InboundAddr != "[::]:4143" {
		t.Errorf("listeners %s %s %s", c.InboundAddr, c.OutboundAddr, c.AdminAddr)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	long := strings.Repeat("x", 1000)
	_, err := FromEnv(env(map[string]string{
		"LINKERD2_PROXY_INBOUND_DEFAULT_POLICY":   "allow",
		"LINKERD2_PROXY_INBOUND_PORTS":            "80,99999",
		"LINKERD2_PROXY_OUTBOUND_CONNECT_TIMEOUT": long,
	}))
	if err == nil {
		t.Fatal("bad values accepted")
	}
	for _, want := range []string{"LINKERD2_PROXY_INBOUND_DEFAULT_POLICY=\"allow\"", "LINKERD2_PROXY_INBOUND_PORTS", "\"99999\" is not a port", "LINKERD2_PROXY_OUTBOUND_CONNECT_TIMEOUT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(err.Error()) > 600 {
		t.Errorf("error quotes too much of the input: %d bytes", len(err.Error()))
	}
}

func TestFlagsOverrideTheEnvironment(t *testing.T) {
	c, _ := FromEnv(env(injected))
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	c.Flags(fs)
	if err := fs.Parse([]string{"--inbound-listen-addr", "127.0.0.2:4143", "--identity-disabled", "--enable-pprof"}); err != nil {
		t.Fatal(err)
	}
	if c.InboundAddr != "127.0.0.2:4143" || !c.IdentityDisabled || !c.EnablePprof || c.DestinationContext != injected["LINKERD2_PROXY_DESTINATION_CONTEXT"] {
		t.Errorf("after flags %+v", c)
	}
	if err := fs.Parse([]string{"--inbound-ports", "0"}); err == nil {
		t.Error("a bad flag value was accepted")
	}
}

func TestValidateSaysWhatIsMissing(t *testing.T) {
	err := Default().Validate()
	for _, want := range []string{"DESTINATION_SVC_ADDR", "IDENTITY_SVC_ADDR", "IDENTITY_LOCAL_NAME", "IDENTITY_TRUST_ANCHORS", "IDENTITY_TOKEN_FILE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate of the defaults = %v, want it to name %s", err, want)
		}
	}
	c := Default()
	c.DestinationAddr, c.IdentityDisabled = "127.0.0.1:8086", true
	if err := c.Validate(); err != nil {
		t.Errorf("identity disabled: %v", err)
	}
	c.InboundAddr, c.OutboundAddr, c.AdminAddr = "127.0.0.1:0", "[::1]:0", ":0" // ports the kernel picks
	if err := c.Validate(); err != nil {
		t.Errorf("listeners on port 0: %v", err)
	}
	c.AdminAddr = "127.0.0.1:65536"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "LINKERD2_PROXY_ADMIN_LISTEN_ADDR (--admin-listen-addr)") {
		t.Errorf("admin on port 65536: %v, want it to name the variable and its flag", err)
	}
}

// TestValidateControlAddresses: a control-plane address that names no host or port is
// refused at start, naming its variable and flag (the proxy started and retried it for
// good); a name with a trailing dot, as the injector writes, an IP, or [IPv6] pass.
func TestValidateControlAddresses(t *testing.T) {
	base := Default()
	base.IdentityDisabled = true
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"linkerd-dst-headless.linkerd.svc.cluster.local.:8086", true}, {"127.0.0.1:8086", true}, {"[::1]:8086", true},
		{"nonsense", false}, {"nohostport", false}, {":8086", false}, {"dst:0", false}, {"dst:http", false}, {"dst:70000", false},
	} {
		for _, which := range []string{"DESTINATION_SVC_ADDR", "POLICY_SVC_ADDR"} {
			cfg := base
			cfg.DestinationAddr = "127.0.0.1:8086"
			if which == "DESTINATION_SVC_ADDR" {
				cfg.DestinationAddr = c.addr
			} else {
				cfg.PolicyAddr = c.addr
			}
			err := cfg.Validate()
			if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "LINKERD2_PROXY_"+which+" (--"+FlagName(which)+")") {
				t.Errorf("%s=%q: %v, want accepted %v (an error naming the variable and its flag)", which, c.addr, err, c.ok)
			}
		}
	}
	cfg := base
	cfg.DestinationAddr, cfg.IdentityDisabled, cfg.IdentityAddr = "127.0.0.1:8086", false, "identity"
	cfg.LocalName, cfg.TrustAnchors, cfg.TokenFile = "x", "x", "x"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "LINKERD2_PROXY_IDENTITY_SVC_ADDR (--identity-svc-addr)") {
		t.Errorf("IDENTITY_SVC_ADDR=identity: %v", err)
	}
}

func FuzzParsePorts(f *testing.F) {
	for _, s := range []string{"", "80", "1-65535", "80, 443", "5-3", "x", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64 {
			return // a range of 65535 ports is the largest answer; keep runs fast
		}
		ps, err := ParsePorts(s)
		if err != nil {
			return
		}
		for _, p := range ps {
			if p == 0 {
				t.Fatalf("ParsePorts(%q) gave port 0", s)
			}
		}
	})
}

// TestClusterNetworks: LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS, which the injector writes from
// the chart's clusterNetworks, gives the networks of the cluster-* default policies.
func TestClusterNetworks(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS": "10.1.2.3/16, fd00::/8"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.ClusterNetworks); got != "[10.1.0.0/16 fd00::/8]" {
		t.Errorf("cluster networks %s", got)
	}
	if c, _ := FromEnv(env(nil)); c.ClusterNetworks != nil {
		t.Errorf("unset: %v, want nil (the inbound proxy's defaults)", c.ClusterNetworks)
	}
	if _, err := FromEnv(env(map[string]string{"LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS": "10.0.0.0/8,everything"})); err == nil ||
		!strings.Contains(err.Error(), `"everything" is not a CIDR`) {
		t.Errorf("a bad network: %v", err)
	}
}

// TestFlagReplacesABadVariable: a bad variable is an error unless a flag replaced it.
func TestFlagReplacesABadVariable(t *testing.T) {
	bad := env(map[string]string{"LINKERD2_PROXY_INBOUND_PORTS": "99999", "LINKERD2_PROXY_LOG_FORMAT": "json"})
	for _, c := range []struct {
		args []string
		want string // "" for no error
	}{
		{nil, "LINKERD2_PROXY_INBOUND_PORTS"},
		{[]string{"--log-format", "plain"}, "LINKERD2_PROXY_INBOUND_PORTS"},
		{[]string{"--inbound-ports", "8080"}, ""},
	} {
		cfg, envErr := FromEnv(bad)
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		cfg.Flags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := Unoverridden(envErr, fs)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// TestControlPlaneOffHostNeedsItsName: a control-plane address off this host without its
// identity name is refused, as linkerd2-proxy refuses it: the connection would be
// plaintext, the ServiceAccount token to identity included. Loopback and a proxy without
// identity go without.
func TestControlPlaneOffHostNeedsItsName(t *testing.T) {
	for _, c := range []struct {
		name, addr string
		disabled   bool
		ok         bool
	}{
		{"IDENTITY_SVC", "linkerd-identity-headless.linkerd.svc.cluster.local.:8080", false, false},
		{"DESTINATION_SVC", "10.0.0.3:8086", false, false},
		{"POLICY_SVC", "[fd00::3]:8090", false, false},
		{"IDENTITY_SVC", "127.0.0.1:8080", false, true},
		{"DESTINATION_SVC", "127.3.0.1:8086", false, true},
		{"POLICY_SVC", "[::1]:8090", false, true},
		{"IDENTITY_SVC", "localhost:8080", false, true},
		{"DESTINATION_SVC", "10.0.0.3:8086", true, true},
	} {
		env := maps.Clone(injected)
		delete(env, "LINKERD2_PROXY_"+c.name+"_NAME")
		env["LINKERD2_PROXY_"+c.name+"_ADDR"] = c.addr
		if c.disabled {
			env["LINKERD2_PROXY_IDENTITY_DISABLED"] = "true"
		}
		cfg, err := FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.name+"_NAME must be set")) {
			t.Errorf("%s_ADDR=%s without its name (identity disabled %v): %v, want accepted %v", c.name, c.addr, c.disabled, err, c.ok)
		}
	}
}

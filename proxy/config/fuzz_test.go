package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fuzzEnv reads lines "NAME=value" (NAME without the prefix, or MERIDIAN_PROXY_ENABLE_PPROF)
// into an environment.
func fuzzEnv(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, "=")
		if k != "MERIDIAN_PROXY_ENABLE_PPROF" {
			k = Prefix + k
		}
		m[k] = v
	}
	return m
}

// FuzzFromEnv feeds FromEnv arbitrary environments. It never panics; an error names the
// variables at fault and quotes a bounded prefix of each value; what it accepts is within
// range (durations not negative, ports not 0, a known default policy) and comes back the
// same from the environment its own values make (the round trip a restarted proxy relies on).
func FuzzFromEnv(f *testing.F) {
	var b strings.Builder
	for k, v := range injected {
		b.WriteString(strings.TrimPrefix(k, Prefix) + "=" + v + "\n")
	}
	f.Add(b.String())
	for _, s := range []string{
		"", "INBOUND_PORTS=80,443-445", "INBOUND_PORTS=0", "INBOUND_PORTS=5-3", "INBOUND_IPS=10.0.0.1, fe80::1%eth0",
		"INBOUND_IPS=x", "DETECT_PROTOCOL_TIMEOUT=1.5", "DETECT_PROTOCOL_TIMEOUT=-1", "DETECT_PROTOCOL_TIMEOUT=1e300",
		"SHUTDOWN_GRACE_PERIOD=Inf", "SHUTDOWN_GRACE_PERIOD=9300000000", "INBOUND_CONNECT_TIMEOUT=1h2m",
		"IDENTITY_DISABLED=true", "IDENTITY_DISABLED= 1 ", "IDENTITY_DISABLED=yes", "MERIDIAN_PROXY_ENABLE_PPROF=true",
		"MERIDIAN_PROXY_ENABLE_PPROF=x", "INBOUND_DEFAULT_POLICY=deny", "INBOUND_DEFAULT_POLICY=allow",
		"DESTINATION_PROFILE_SUFFIXES=svc.cluster.local., ,.", "LOG=" + strings.Repeat("\xff", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := FromEnv(env(fuzzEnv(s)))
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if len(line) > 1024 {
					t.Fatalf("a %d-byte error line: %.200q...", len(line), line)
				}
			}
			return
		}
		for _, d := range []struct {
			name string
			v    int64
		}{{"inbound connect", int64(c.InboundConnectTimeout)}, {"outbound connect", int64(c.OutboundConnectTimeout)},
			{"inbound idle", int64(c.InboundDiscoveryIdleTimeout)}, {"outbound idle", int64(c.OutboundDiscoveryIdleTimeout)},
			{"detect", int64(c.DetectTimeout)}, {"shutdown", int64(c.ShutdownGracePeriod)}} {
			if d.v < 0 {
				t.Fatalf("%s timeout %d from %q", d.name, d.v, s)
			}
		}
		if slices.Contains(c.InboundPorts, 0) || slices.Contains(c.InboundOpaquePorts, 0) {
			t.Fatalf("port 0 from %q", s)
		}
		if !slices.Contains(DefaultPolicies, c.InboundDefaultPolicy) {
			t.Fatalf("default policy %q", c.InboundDefaultPolicy)
		}
		if len(c.InboundPorts)+len(c.InboundOpaquePorts) > 4096 {
			return // the round trip of a huge range is slow and adds nothing
		}
		again := map[string]string{"MERIDIAN_PROXY_ENABLE_PPROF": strconv.FormatBool(c.EnablePprof)}
		for _, v := range variables {
			again[Prefix+v.name] = v.get(&c)
		}
		c2, err := FromEnv(env(again))
		if err != nil {
			t.Fatalf("the environment of an accepted config fails: %v", err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip of %q:\n%+v\n%+v", s, c, c2)
		}
	})
}

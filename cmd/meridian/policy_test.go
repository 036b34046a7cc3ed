package main

import (
	"net/netip"
	"testing"

	"github.com/meridian-mesh/meridian/policy/compute"
)

func TestPolicyFlags(t *testing.T) {
	pc, err := policyFlags([]string{
		"--source", "dir:deploy/examples", "--cluster-default-policy", "deny",
		"--cluster-networks", "10.0.0.0/8, fd00::/8", "--probe-networks", "", "--log-level", "debug", "--plaintext",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, level := pc.cfg, pc.log.level
	if cfg.Source != "dir:deploy/examples" || cfg.Compute.DefaultPolicy != compute.Deny || level != "debug" {
		t.Errorf("cfg = %+v", cfg)
	}
	if len(cfg.Compute.ClusterNetworks) != 2 || cfg.Compute.ClusterNetworks[1] != netip.MustParsePrefix("fd00::/8") || len(cfg.Compute.ProbeNetworks) != 0 {
		t.Errorf("networks = %v / %v", cfg.Compute.ClusterNetworks, cfg.Compute.ProbeNetworks)
	}
	if pc.grpcAddr != ":8090" || pc.adminAddr != ":9997" {
		t.Errorf("addresses = %s %s", pc.grpcAddr, pc.adminAddr)
	}
	for _, bad := range [][]string{
		{"--cluster-default-policy", "allow"},
		{"--cluster-networks", "10.0.0.0/33"},
		{"extra"},
		// Proxies refuse a detect timeout that is not positive: every port sent it would
		// have an invalid policy, which authorizes nothing.
		{"--default-detect-timeout", "-1s"},
		{"--default-detect-timeout", "0s"},
		{"--shutdown-grace", "-5s"},
	} {
		if _, err := policyFlags(append([]string{"--plaintext"}, bad...)); err == nil {
			t.Errorf("policyFlags(%q) succeeded", bad)
		}
	}
}

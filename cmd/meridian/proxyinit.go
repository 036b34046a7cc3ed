package main

import (
	"context"
	"fmt"

	"github.com/meridian-mesh/meridian/injector/proxyinit"
)

func init() {
	register(&command{
		name:    "proxy-init",
		summary: "set up a meshed pod's iptables capture (the linkerd-init container)",
		run:     runProxyInit,
	})
}

func runProxyInit(ctx context.Context, args []string) error {
	cfg := proxyinit.DefaultConfig()
	fs := newFlagSet("proxy-init")
	fs.IntVar(&cfg.IncomingProxyPort, "incoming-proxy-port", cfg.IncomingProxyPort, "port the proxy accepts inbound traffic on")
	fs.IntVar(&cfg.OutgoingProxyPort, "outgoing-proxy-port", cfg.OutgoingProxyPort, "port the proxy accepts outbound traffic on")
	fs.Int64Var(&cfg.ProxyUID, "proxy-uid", cfg.ProxyUID, "UID the proxy runs as; its traffic is never redirected")
	fs.Int64Var(&cfg.ProxyGID, "proxy-gid", cfg.ProxyGID, "GID the proxy runs as; its traffic is never redirected (-1: none)")
	in := listFlag(nil)
	out := listFlag(nil)
	subnets := listFlag(nil)
	fs.Var(&in, "inbound-ports-to-ignore", "inbound ports or ranges not redirected (comma-separated, repeatable)")
	fs.Var(&out, "outbound-ports-to-ignore", "outbound ports or ranges not redirected (comma-separated, repeatable)")
	fs.Var(&subnets, "subnets-to-ignore", "outbound IPv4 CIDRs not redirected (comma-separated, repeatable)")
	mode := fs.String("iptables-mode", "default", "iptables backend: default, legacy or nft")
	dryRun := fs.Bool("dry-run", false, "print the iptables-restore input and exit without applying it")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if len(in) > 0 {
		cfg.InboundPortsToIgnore = in
	}
	cfg.OutboundPortsToIgnore = out
	cfg.SubnetsToIgnore = subnets
	bins, err := proxyinit.BinariesFor(*mode) // checked first, so that --dry-run checks it too
	if err != nil {
		return fmt.Errorf("%w: --iptables-mode: %v", errUsage, err)
	}
	rules, err := proxyinit.Rules(cfg) // the flags' values, checked before anything is applied
	if err != nil {
		return usageError(err)
	}
	if *dryRun {
		fmt.Fprint(stdout, rules)
		return nil
	}
	res, err := proxyinit.Apply(ctx, cfg, bins, proxyinit.ExecRunner{})
	if err != nil {
		return err
	}
	if res.AlreadyConfigured {
		fmt.Fprintln(stderr, "meridian proxy-init: PROXY_INIT chains already present; rules left unchanged")
	}
	fmt.Fprint(stdout, res.After)
	return nil
}

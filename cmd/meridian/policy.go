package main

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/policy"
	"github.com/meridian-mesh/meridian/policy/compute"
	proxyconfig "github.com/meridian-mesh/meridian/proxy/config"
)

func init() {
	register(&command{name: "policy", summary: "serve inbound policy (Linkerd's policy.linkerd.io resources) to proxies", run: runPolicy})
}

// policyCommand is what `meridian policy`'s flags say.
type policyCommand struct {
	cfg                 policy.Config
	grpcAddr, adminAddr string
	pprof               bool
	grace               time.Duration
	log                 *logOptions
	tls                 *tlsFlags
}

// policyFlags fills a policy.Config and the process's settings from the command line.
func policyFlags(args []string) (policyCommand, error) {
	pc := policyCommand{cfg: policy.DefaultConfig()}
	cfg := &pc.cfg
	fs := newFlagSet("policy")
	fs.StringVar(&pc.grpcAddr, "grpc-addr", ":8090", "InboundServerPolicies gRPC address")
	fs.StringVar(&pc.adminAddr, "admin-addr", ":9997", adminUsage)
	pprofFlag(fs, &pc.pprof)
	fs.StringVar(&cfg.Source, "source", cfg.Source, "where pods and policy resources come from: kubernetes, or dir:PATH (a directory of YAML manifests, watched)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", kube.KubeconfigUsage)
	defaultPolicy := fs.String("cluster-default-policy", cfg.Compute.DefaultPolicy.String(),
		"default inbound policy for pods without config.linkerd.io/default-inbound-policy: all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny or audit")
	clusterNets := fs.String("cluster-networks", prefixList(cfg.Compute.ClusterNetworks), "comma-separated pod networks of the cluster (for cluster-* policies and ServerAuthorizations without networks)")
	probeNets := fs.String("probe-networks", prefixList(cfg.Compute.ProbeNetworks), "comma-separated networks kubelet probes come from (empty: no probe authorization)")
	fs.StringVar(&cfg.Compute.ControlPlaneNamespace, "control-plane-namespace", cfg.Compute.ControlPlaneNamespace, "control plane namespace, part of mesh identities")
	fs.StringVar(&cfg.Compute.IdentityDomain, "identity-trust-domain", cfg.Compute.IdentityDomain, "identity trust domain, the suffix of mesh identities")
	fs.DurationVar(&cfg.Compute.DetectTimeout, "default-detect-timeout", cfg.Compute.DetectTimeout, "protocol detection timeout sent to proxies")
	fs.DurationVar(&pc.grace, "shutdown-grace", 5*time.Second, "how long in-flight calls may run at shutdown")
	pc.log = serverLogFlags(fs, "log level: debug, info, warn, error")
	pc.tls = addTLSFlags(fs, "policy", false)
	if err := parseNoArgs(fs, args); err != nil {
		return pc, err
	}
	err := usageError(pc.check(*defaultPolicy, *clusterNets, *probeNets)) // before pc is copied out
	return pc, err
}

// check validates the parsed flags' values and fills pc.cfg from those given as text.
func (pc *policyCommand) check(defaultPolicy, clusterNets, probeNets string) error {
	cfg := &pc.cfg
	if _, _, err := sourceSpec[struct{}](cfg.Source, nil); err != nil {
		return err
	}
	// A detect timeout a proxy refuses would leave every port it is sent for with an invalid
	// policy, which authorizes nothing.
	if cfg.Compute.DetectTimeout <= 0 {
		return fmt.Errorf("--default-detect-timeout %v: want a positive duration", cfg.Compute.DetectTimeout)
	}
	if pc.grace < 0 {
		return fmt.Errorf("--shutdown-grace %v: want zero or more", pc.grace)
	}
	if err := pc.tls.resolve(cfg.Compute.ControlPlaneNamespace, cfg.Compute.IdentityDomain); err != nil {
		return err
	}
	p, err := compute.ParseDefaultPolicy(defaultPolicy)
	if err != nil {
		return fmt.Errorf("--cluster-default-policy: %w", err)
	}
	cfg.Compute.DefaultPolicy = p
	if cfg.Compute.ClusterNetworks, err = proxyconfig.ParsePrefixes(clusterNets); err != nil {
		return fmt.Errorf("--cluster-networks: %w", err)
	}
	if cfg.Compute.ProbeNetworks, err = proxyconfig.ParsePrefixes(probeNets); err != nil {
		return fmt.Errorf("--probe-networks: %w", err)
	}
	return nil
}

func runPolicy(ctx context.Context, args []string) error {
	pc, err := policyFlags(args)
	if err != nil {
		return err
	}
	srv, syncLog, err := newProcess(pc.log, pc.adminAddr)
	if err != nil {
		return err
	}
	defer syncLog()
	srv.Pprof = pc.pprof
	srv.Grace = pc.grace
	ctrl, err := policy.New(pc.cfg, policy.Deps{Registerer: srv.Registry, Logger: srv.Log})
	if err != nil {
		return err
	}
	id, err := pc.tls.identity(srv.Log)
	if err != nil {
		return err
	}
	defer id.Close()
	srv.Group.Add("tls", id)
	gs, err := srv.WithGRPCConfig(pc.tls.grpc(pc.grpcAddr, id, true))
	if err != nil {
		return fmt.Errorf("--local-addr: %w", err)
	}
	ctrl.Register(gs)
	srv.Group.Add("policy", ctrl)
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx)
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

package main

import (
	"errors"
	"flag"
	"fmt"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/cptls"
	"github.com/meridian-mesh/meridian/internal/serve"
)

// tlsFlags are the control-plane TLS flags, the same for every server command: destination
// and policy get their certificate from the identity service (--identity-*), the identity
// service issues its own (it has only --identity-name); each may add a plaintext listener on
// loopback for tools (--local-addr), and --plaintext turns TLS off for a local mesh or tests.
type tlsFlags struct {
	cfg cptls.Config
	// local is --local-addr.
	local string
	// component is the server (destination, policy, identity); its ServiceAccount is
	// linkerd-<component>, as in the chart.
	component  string
	selfIssued bool
}

// addTLSFlags registers the TLS flags of component's server on fs; selfIssued is for the
// identity service, whose certificate does not come from the identity service.
func addTLSFlags(fs *flag.FlagSet, component string, selfIssued bool) *tlsFlags {
	f := &tlsFlags{cfg: cptls.DefaultConfig(), component: component, selfIssued: selfIssued}
	fs.BoolVar(&f.cfg.Plaintext, "plaintext", false, "serve (and call) gRPC without TLS: for a local mesh and tests only; logged as a warning and listed in /ready's warnings")
	fs.StringVar(&f.cfg.Name, "identity-name", "", "this server's identity, the name in its certificate (default linkerd-"+component+".NS.serviceaccount.identity.NS.TRUST-DOMAIN, NS the control-plane namespace)")
	fs.StringVar(&f.local, "local-addr", "", "also serve the gRPC API in plaintext on this loopback address (127.0.0.1:PORT), for tools such as `meridian endpoints` through `kubectl port-forward`; only processes of this host (or pod) reach it")
	if selfIssued {
		return f
	}
	fs.StringVar(&f.cfg.IdentityAddr, "identity-addr", "", "identity service address (host:port) this server gets its certificate from; required unless --plaintext")
	fs.StringVar(&f.cfg.IdentityName, "identity-svc-name", "", "the identity service's identity, verified when connecting to it (default linkerd-identity.NS.serviceaccount.identity.NS.TRUST-DOMAIN)")
	fs.StringVar(&f.cfg.TrustAnchorsFile, "identity-trust-anchors", "", "trust anchors file (PEM; the ConfigMap linkerd-identity-trust-roots' ca-bundle.crt); required unless --plaintext")
	fs.StringVar(&f.cfg.TokenFile, "identity-token-file", f.cfg.TokenFile, "ServiceAccount token file (a projected token, audience identity.l5d.io), read before every certificate request")
	return f
}

// resolve fills the default identities from the control-plane namespace and the trust
// domain, and refuses a combination that cannot serve, saying what to pass.
func (f *tlsFlags) resolve(ns, trustDomain string) error {
	if f.local != "" {
		if err := serve.CheckLocalAddr(f.local); err != nil {
			return fmt.Errorf("--local-addr: %w", err)
		}
	}
	if f.cfg.Name == "" {
		f.cfg.Name = identity.ServiceAccountIdentity(ns, "linkerd-"+f.component, ns, trustDomain)
	}
	if f.cfg.IdentityName == "" {
		f.cfg.IdentityName = identity.ServiceAccountIdentity(ns, "linkerd-identity", ns, trustDomain)
	}
	if f.selfIssued {
		return nil
	}
	configured := f.cfg.TrustAnchorsFile != "" || f.cfg.IdentityAddr != ""
	switch {
	case f.cfg.Plaintext && configured:
		return errors.New("--plaintext with --identity-trust-anchors or --identity-addr: choose one")
	case f.cfg.Plaintext:
		return nil
	case !configured:
		return fmt.Errorf("%s serves gRPC over mTLS, with a certificate from the identity service: give --identity-trust-anchors FILE (the trust anchors, PEM) and --identity-addr HOST:PORT (the identity service), "+
			"with --identity-token-file FILE (a ServiceAccount token with audience identity.l5d.io; default %s); or --plaintext for a local mesh or tests", f.component, cptls.DefaultTokenFile)
	case f.cfg.TrustAnchorsFile == "":
		return errors.New("--identity-addr needs --identity-trust-anchors FILE (the trust anchors, PEM), to verify the identity service and the peers")
	case f.cfg.IdentityAddr == "":
		return errors.New("--identity-trust-anchors needs --identity-addr HOST:PORT (the identity service that certifies this server)")
	}
	return nil
}

// identity builds the TLS identity of a server whose certificate comes from the identity
// service. The caller adds it to the process's group and defers its Close.
func (f *tlsFlags) identity(log *zap.Logger) (*cptls.Identity, error) {
	return cptls.New(f.cfg, log.Named("tls"))
}

// grpc is how the process serves its API at addr with id: clients must present a mesh
// certificate (requireClient) or may (identity), plus the local plaintext listener.
func (f *tlsFlags) grpc(addr string, id *cptls.Identity, requireClient bool) serve.GRPC {
	return serve.GRPC{Addr: addr, Creds: id.ServerCredentials(requireClient), LocalAddr: f.local}
}

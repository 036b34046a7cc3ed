package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/identity"
	idclient "github.com/meridian-mesh/meridian/identity/client"
	"github.com/meridian-mesh/meridian/internal/cptls"
	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

func init() {
	register(&command{
		name:    "identity",
		summary: "the identity CA (Certify on :8080, admin :9990); subcommands: init (trust anchor + issuer, as Helm values or --out DIR), token (local-mesh token), certify (get one certificate)",
		run:     runIdentity,
	})
}

func runIdentity(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "init":
			return runIdentityInit(args[1:])
		case "token":
			return runIdentityToken(args[1:])
		case "certify":
			return runIdentityCertify(ctx, args[1:])
		}
	}
	return runIdentityServer(ctx, args)
}

func runIdentityServer(ctx context.Context, args []string) error {
	cfg := identity.DefaultConfig()
	fs := newFlagSet("identity")
	withSubcommands(fs, "init", "token", "certify")
	addr := fs.String("addr", ":8080", "gRPC listen address (io.linkerd.proxy.identity.Identity)")
	adminAddr := fs.String("admin-addr", ":9990", adminUsage)
	var pprof bool
	pprofFlag(fs, &pprof)
	logOpts := serverLogFlags(fs, "log level: debug, info, warn, error")
	fs.StringVar(&cfg.TrustDomain, "trust-domain", cfg.TrustDomain, "trust domain of identities")
	fs.StringVar(&cfg.ControlPlaneNamespace, "control-plane-namespace", cfg.ControlPlaneNamespace, "control plane namespace (part of identities; where the issuer Secret and trust roots ConfigMap live)")
	fs.DurationVar(&cfg.Lifetime, "lifetime", cfg.Lifetime, "lifetime of issued certificates (never past the issuer's expiry)")
	fs.DurationVar(&cfg.ClockSkew, "clock-skew", cfg.ClockSkew, "clock-skew allowance subtracted from NotBefore")
	fs.DurationVar(&cfg.ReloadInterval, "reload-interval", cfg.ReloadInterval, "how often the issuer is re-read (files are also watched)")
	fs.StringVar(&cfg.IssuerDir, "issuer-dir", "", "directory with crt.pem/key.pem (or tls.crt/tls.key); empty: read the Kubernetes Secret linkerd-identity-issuer")
	fs.StringVar(&cfg.AnchorsFile, "trust-anchors", "", "trust anchor bundle file (default ISSUER-DIR/ca-bundle.crt); with the Kubernetes source, the ConfigMap linkerd-identity-trust-roots")
	fs.StringVar(&cfg.Tokens, "tokens", cfg.Tokens, "token reviewer: kubernetes (TokenReview, audience identity.l5d.io) or local (tokens signed with --local-token-key)")
	fs.StringVar(&cfg.LocalTokenKey, "local-token-key", "", "local-mesh token signing key (PEM, from 'identity init --local-token-key'); with --tokens=local")
	kubeconfig := fs.String("kubeconfig", "", kube.KubeconfigUsage)
	fs.StringVar(&cfg.EventDeployment, "event-deployment", cfg.EventDeployment, "Deployment in the control plane namespace that issuer update events are recorded on (Kubernetes only; empty: no events)")
	tf := addTLSFlags(fs, "identity", true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %s (subcommands: init, token, certify)", errUsage, quote.Message(fmt.Sprintf("%q", fs.Args())))
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err) // the flags' values: --lifetime and the like
	}
	if err := tf.resolve(cfg.ControlPlaneNamespace, cfg.TrustDomain); err != nil {
		return usageError(err)
	}
	srv, syncLog, err := newProcess(logOpts, *adminAddr)
	if err != nil {
		return err
	}
	defer syncLog()
	log := srv.Log
	srv.Pprof = pprof
	srv.Grace = 10 * time.Second
	deps := identity.Deps{Logger: log, Registerer: srv.Registry}
	if need, what := cfg.NeedsKubernetes(); need {
		kc, err := kube.NewClients(*kubeconfig)
		if err != nil {
			return fmt.Errorf("kubernetes client config (needed for %s): %w", what, err)
		}
		deps.Kube = kc.Typed
	}
	svc, err := identity.New(ctx, cfg, deps)
	if err != nil {
		return err
	}
	// TLS with a certificate of its own issuer: proxies verify it (IDENTITY_SVC_NAME) before
	// they have a certificate, so a client certificate is verified only when given.
	var certs cptls.Source
	if !tf.cfg.Plaintext {
		sc, err := identity.NewServingCert(svc, tf.cfg.Name, log.Named("tls"))
		if err != nil {
			return err
		}
		certs = sc
	}
	id, err := cptls.NewSelfIssued(tf.cfg, certs, svc.Issuer().Anchors, log.Named("tls"))
	if err != nil {
		return err
	}
	srv.Group.Add("tls", id)
	gs, err := srv.WithGRPCConfig(tf.grpc(*addr, id, false))
	if err != nil {
		return fmt.Errorf("--local-addr: %w", err)
	}
	svc.Register(gs)
	srv.Group.Add("identity", svc)
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	log.Info("identity issuing", zap.String("tokens", cfg.Tokens), zap.String("trustDomain", cfg.TrustDomain))
	return srv.Run(ctx)
}

func runIdentityInit(args []string) error {
	cfg := identity.DefaultConfig()
	fs := newFlagSet("identity init")
	out := fs.String("out", "", "directory to write ca-bundle.crt, crt.pem, key.pem and trust-anchor.key into")
	valuesOut := fs.String("values-out", "", "file to write the Helm values (trust anchors, issuer certificate and key) into; without --out or --values-out they are printed")
	anchorKeyOut := fs.String("anchor-key-out", "", "with the values: file to keep the trust anchor's key in (for signing a new issuer later); without it the key is discarded")
	scheme := fs.String("issuer-scheme", "linkerd.io/tls", "the values' identity.issuer.scheme: linkerd.io/tls (crt.pem/key.pem) or kubernetes.io/tls")
	fs.StringVar(&cfg.TrustDomain, "trust-domain", cfg.TrustDomain, "trust domain")
	fs.StringVar(&cfg.ControlPlaneNamespace, "control-plane-namespace", cfg.ControlPlaneNamespace, "control plane namespace (in the certificates' names)")
	validity := fs.Duration("validity", 365*24*time.Hour, "validity of the trust anchor and the issuer")
	localKey := fs.Bool("local-token-key", false, "with --out: also write token-key.pem, the signing key for local-mesh tokens (identity --tokens=local)")
	force := fs.Bool("force", false, "overwrite existing files")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *scheme != "linkerd.io/tls" && *scheme != "kubernetes.io/tls" {
		return fmt.Errorf("%w: --issuer-scheme %s: want linkerd.io/tls or kubernetes.io/tls", errUsage, quote.Prefix(*scheme, 64))
	}
	if *out == "" && *localKey {
		return fmt.Errorf("%w: --local-token-key needs --out", errUsage)
	}
	// Both end up in DNS names: every proxy's identity, and the certificates' names.
	if err := dnsName("--trust-domain", cfg.TrustDomain, validation.IsDNS1123Subdomain); err != nil {
		return err
	}
	if err := dnsName("--control-plane-namespace", cfg.ControlPlaneNamespace, validation.IsDNS1123Label); err != nil {
		return err
	}
	g, err := identity.GenerateInstall(cfg.TrustDomain, cfg.ControlPlaneNamespace, *validity, time.Now(), *localKey)
	if err != nil {
		return err
	}
	if *out != "" {
		paths, err := g.WriteDir(*out, *force)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(stdout, "wrote", p)
		}
		fmt.Fprintf(stdout, "trust anchor and issuer valid until %s; keep %s offline: the identity service never needs it\n",
			g.IssuerNotAfter.UTC().Format(time.RFC3339), identity.FileTrustAnchorKey)
	}
	values := identityValuesYAML(g, cfg.TrustDomain, *scheme)
	switch {
	case *valuesOut != "":
		if err := writeNew(*valuesOut, values, *force); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s: pass it to helm with -f (it holds the issuer's key: keep it secret)\n", *valuesOut)
	case *out == "":
		if _, err := stdout.Write(values); err != nil {
			return err
		}
	}
	if *anchorKeyOut != "" {
		if err := writeNew(*anchorKeyOut, g.AnchorKeyPEM, *force); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s: the trust anchor's key; keep it offline\n", *anchorKeyOut)
	} else if *out == "" {
		fmt.Fprintf(stderr, "the trust anchor's key was not kept (pass --anchor-key-out FILE to sign a new issuer with the same anchor later)\n")
	}
	return nil
}

// writeNew writes data to path (mode 0600, an overwritten file's mode too: it holds private
// keys), refusing to overwrite unless force.
func writeNew(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		if os.IsExist(err) {
			return fmt.Errorf("%s already exists (use --force to overwrite)", path)
		}
		return err
	}
	if err := f.Chmod(0o600); err != nil { // before the key is in it
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runIdentityToken(args []string) error {
	fs := newFlagSet("identity token")
	keyFile := fs.String("key", "", "local token signing key (token-key.pem from 'identity init --local-token-key') (required)")
	ns := fs.String("namespace", "default", "ServiceAccount namespace")
	sa := fs.String("service-account", "default", "ServiceAccount name")
	aud := fs.String("audience", identity.Audience, "token audience")
	ttl := fs.Duration("ttl", 24*time.Hour, "token lifetime (positive)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *ttl <= 0 {
		return fmt.Errorf("%w: --ttl %v: the token would be expired already; want a positive lifetime such as 24h", errUsage, *ttl)
	}
	if *keyFile == "" {
		return errors.New("--key FILE is required")
	}
	pemData, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	tok, err := identity.MintLocalTokenPEM(pemData, *ns, *sa, *aud, time.Now(), *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(tok))
	return nil
}

// runIdentityCertify obtains one certificate the way a proxy does and prints it: a check
// that an identity service works end to end. It retries what may pass (the service is
// unavailable or slow) until --timeout, saying so on stderr, and stops at once with the
// reason when asking again cannot help: a request the service refuses (InvalidArgument,
// FailedPrecondition, Unauthenticated: an expired token, a wrong identity) or an answer
// that does not check (a certificate that does not verify against --trust-anchors).
func runIdentityCertify(ctx context.Context, args []string) error {
	fs := newFlagSet("identity certify")
	addr := fs.String("addr", "127.0.0.1:8080", "identity service address")
	id := fs.String("identity", "", "identity to request, e.g. web.default.serviceaccount.identity.linkerd.cluster.local (required)")
	tokenFile := fs.String("token", "", "file holding the ServiceAccount token (required)")
	anchorsFile := fs.String("trust-anchors", "", "trust anchor bundle: the identity service's TLS and the certificate are verified against it (required unless --plaintext)")
	svcName := fs.String("identity-svc-name", identity.ServiceAccountIdentity("linkerd", "linkerd-identity", "linkerd", "cluster.local"), "the identity service's identity, verified on the TLS connection to it")
	plaintext := fs.Bool("plaintext", false, "talk to an identity service started with --plaintext (no TLS; the certificate is checked against --trust-anchors only when given)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *id == "" || *tokenFile == "" {
		return errors.New("--identity and --token are required")
	}
	if *anchorsFile == "" && !*plaintext {
		return fmt.Errorf("%w: the identity service serves TLS: give --trust-anchors FILE to verify it (its identity is --identity-svc-name), or --plaintext for one started with --plaintext", errUsage)
	}
	cfg := idclient.DefaultConfig()
	cfg.Identity = *id
	creds := insecure.NewCredentials()
	if *anchorsFile != "" {
		pemData, err := os.ReadFile(*anchorsFile)
		if err != nil {
			return err
		}
		if cfg.TrustAnchors, err = tlsid.ParseTrustAnchors(pemData); err != nil {
			return fmt.Errorf("%s: %w", *anchorsFile, err)
		}
	}
	if !*plaintext {
		anon, err := tlsid.New(nil, cfg.TrustAnchors)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(anon.Client(*svcName, "h2"))
	}
	tok, err := idclient.FileToken(*tokenFile)(ctx)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	c, err := idclient.New(cfg, conn, idclient.StaticToken(tok), nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	crt, err := certifyRetrying(ctx, c, *addr, *timeout)
	if err != nil {
		return err
	}
	leaf := crt.Leaf
	fmt.Fprintf(stdout, "subject:    %s\nDNS SANs:   %s\nissuer:     %s\nnot before: %s\nnot after:  %s\nverified against trust anchors: %v\n",
		leaf.Subject, strings.Join(leaf.DNSNames, ","), leaf.Issuer, leaf.NotBefore.UTC().Format(time.RFC3339),
		leaf.NotAfter.UTC().Format(time.RFC3339), cfg.TrustAnchors != nil)
	return nil
}

// certifyRetrying calls Certify until it succeeds, fails for good, or ctx ends; each failed
// attempt that is retried is reported on stderr.
func certifyRetrying(ctx context.Context, c *idclient.Client, addr string, timeout time.Duration) (*tls.Certificate, error) {
	wait := 500 * time.Millisecond
	var last error
	for attempt := 1; ; attempt++ {
		crt, err := c.CertifyOnce(ctx)
		if err == nil {
			return crt, nil
		}
		if ctx.Err() != nil {
			break
		}
		if reason, permanent := certifyRefusal(err); permanent {
			return nil, fmt.Errorf("%s: %s", addr, reason)
		}
		last = err
		fmt.Fprintf(stderr, "meridian identity certify: attempt %d: %v; retrying in %v\n", attempt, err, wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		if ctx.Err() != nil {
			break
		}
		wait = min(2*wait, 5*time.Second)
	}
	if last == nil {
		return nil, fmt.Errorf("no answer from %s within %v (is it the identity service's gRPC address?)", addr, timeout)
	}
	return nil, fmt.Errorf("no certificate from %s within %v; the last attempt failed: %v", addr, timeout, last)
}

// certifyRefusal says whether err is one that asking again cannot cure, and why in words.
func certifyRefusal(err error) (string, bool) {
	var bad *idclient.ResponseError
	if errors.As(err, &bad) {
		return "the answer was refused: " + bad.Error(), true
	}
	st, ok := status.FromError(err)
	if !ok {
		return "", false
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.Unauthenticated:
		return fmt.Sprintf("the identity service refused the request (%s): %s", st.Code(), st.Message()), true
	case codes.Unavailable:
		// A server whose certificate does not verify is the same server next time.
		if msg := st.Message(); strings.Contains(msg, "tls: failed to verify") || strings.Contains(msg, "x509: ") {
			return "the identity service's TLS certificate was refused (check --trust-anchors and --identity-svc-name): " + msg, true
		}
	}
	return "", false
}

// dnsName checks a value that becomes part of DNS names with check (validation's
// IsDNS1123Label for a namespace, IsDNS1123Subdomain for a domain): a usage error naming
// what gave it.
func dnsName(what, v string, check func(string) []string) error {
	if errs := check(v); len(errs) > 0 {
		return fmt.Errorf("%w: %s %s: %s", errUsage, what, quote.Prefix(v, 64), errs[0])
	}
	return nil
}

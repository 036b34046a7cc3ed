package proxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	idclient "github.com/meridian-mesh/meridian/identity/client"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/config"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/inbound"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/outbound"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Deps are what New needs besides the configuration.
type Deps struct {
	Registerer prometheus.Registerer // the proxy's metrics; nil: not exported
	Logger     *zap.Logger           // nil: no logging
}

// Proxy is the assembled data plane. Add its Components to a run.Group (or call Run).
type Proxy struct {
	cfg      config.Config
	log      *zap.Logger
	identity *idclient.Client // nil with identity disabled
	resolver *discovery.Resolver
	pool     *discovery.Pool
	in       *inbound.Inbound
	out      *outbound.Outbound
	conns    []*grpc.ClientConn
}

// New builds the proxy cfg describes. It opens no connection yet (gRPC connects lazily) and
// binds no listener; Run does.
func New(cfg config.Config, deps Deps) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	p := &Proxy{cfg: cfg, log: log}
	if cfg.InsecureControlPlane {
		log.Warn("--insecure-control-plane: a control-plane service without its *_SVC_NAME is reached in plaintext, off this host too (tests and local setups only)")
	}
	ok := false
	defer func() {
		if !ok {
			p.close()
		}
	}()
	var tlsCfg *tlsid.Config
	var certs tlsid.Certs
	if !cfg.IdentityDisabled {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(cfg.TrustAnchors)) {
			return nil, errors.New("LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS holds no PEM certificate")
		}
		if err := p.startIdentity(roots); err != nil {
			return nil, err
		}
		certs = p.identity
		var err error
		if tlsCfg, err = tlsid.New(certs, roots); err != nil {
			return nil, err
		}
	}
	m := metrics.New(deps.Registerer)
	if err := p.buildDiscovery(tlsCfg); err != nil {
		return nil, err
	}
	var policyConn grpc.ClientConnInterface
	if cfg.PolicyAddr != "" {
		conn, err := p.dial(cfg.PolicyAddr, cfg.PolicyName, tlsCfg)
		if err != nil {
			return nil, fmt.Errorf("policy service %s: %w", quote.String(cfg.PolicyAddr), err)
		}
		policyConn = conn
	}
	var err error
	if p.in, err = inbound.New(inboundConfig(cfg), inbound.Deps{TLS: tlsCfg, PolicyConn: policyConn, Metrics: m, Logger: log.Named("inbound")}); err != nil {
		return nil, err
	}
	if p.out, err = outbound.New(outboundConfig(cfg), outbound.Deps{Resolver: outbound.ResolverOf(p.resolver.Resolve), TLS: tlsCfg, Metrics: m, Log: log.Named("outbound")}); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// startIdentity builds the identity client: its connection to the identity service is TLS
// verifying IdentityName (without a client certificate: it has none yet), or plaintext.
func (p *Proxy) startIdentity(roots *x509.CertPool) error {
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if p.cfg.IdentityName != "" {
		anon, err := tlsid.New(nil, roots)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(anon.Client(p.cfg.IdentityName, "h2"))
	}
	conn, err := grpc.NewClient(p.cfg.IdentityAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("identity service %s: %w", quote.String(p.cfg.IdentityAddr), err)
	}
	p.conns = append(p.conns, conn)
	icfg := idclient.DefaultConfig()
	icfg.Identity, icfg.TrustAnchors = p.cfg.LocalName, roots
	p.identity, err = idclient.New(icfg, conn, idclient.FileToken(p.cfg.TokenFile), p.log.Named("identity"))
	return err
}

func (p *Proxy) buildDiscovery(tlsCfg *tlsid.Config) error {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if p.cfg.DestinationName != "" {
		if tlsCfg == nil {
			return errors.New("LINKERD2_PROXY_DESTINATION_SVC_NAME asks for mTLS, but identity is disabled")
		}
		opts = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg.Client(p.cfg.DestinationName, "h2")))}
	}
	p.pool = discovery.NewPool(opts...)
	dcfg := discovery.DefaultConfig()
	dcfg.Addr, dcfg.ContextToken = p.cfg.DestinationAddr, p.cfg.DestinationContext
	// Outbound keeps an unused target for OutboundDiscoveryIdleTimeout before it releases it;
	// the streams then need only a short grace for a target taken again at once.
	dcfg.IdleTimeout = time.Second
	p.resolver = discovery.NewResolver(dcfg, p.pool, p.log.Named("discovery"))
	return nil
}

// dial connects to a control-plane service: mTLS verifying name when it is set, else
// plaintext.
func (p *Proxy) dial(addr, name string, tlsCfg *tlsid.Config) (*grpc.ClientConn, error) {
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if name != "" {
		if tlsCfg == nil {
			return nil, fmt.Errorf("service name %s asks for mTLS, but identity is disabled", quote.String(name))
		}
		creds = credentials.NewTLS(tlsCfg.Client(name, "h2"))
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err == nil {
		p.conns = append(p.conns, conn)
	}
	return conn, err
}

func (p *Proxy) close() {
	for _, c := range p.conns {
		_ = c.Close()
	}
	if p.pool != nil {
		_ = p.pool.Close()
	}
}

// inboundConfig maps the environment onto the inbound proxy. When the inbound listener binds
// one address (the local mesh: a pod is a loopback address), the application is reached at
// that address.
func inboundConfig(cfg config.Config) inbound.Config {
	c := inbound.DefaultConfig()
	c.ListenAddr, c.Identity, c.Workload = cfg.InboundAddr, cfg.LocalName, cfg.PolicyWorkload
	c.DefaultPolicy, c.Ports, c.OpaquePorts = cfg.InboundDefaultPolicy, cfg.InboundPorts, cfg.InboundOpaquePorts
	if cfg.ClusterNetworks != nil {
		c.ClusterNetworks = cfg.ClusterNetworks
	}
	c.DetectTimeout, c.ConnectTimeout, c.Grace = cfg.DetectTimeout, cfg.InboundConnectTimeout, cfg.ShutdownGracePeriod
	if cfg.InboundConnectTimeout < 500*time.Millisecond {
		c.ConnectTimeout = time.Second // Linkerd's 100 ms is for a local app; loopback under load needs more
	}
	c.Policy.IdleTimeout = cfg.InboundDiscoveryIdleTimeout
	if ap, err := netip.ParseAddrPort(cfg.InboundAddr); err == nil && !ap.Addr().IsUnspecified() {
		host := ap.Addr()
		c.AppAddr = func(port uint16) string { return netip.AddrPortFrom(host, port).String() }
	}
	return c
}

func outboundConfig(cfg config.Config) outbound.Config {
	c := outbound.DefaultConfig()
	c.ListenAddr, c.ConnectTimeout, c.DetectTimeout = cfg.OutboundAddr, cfg.OutboundConnectTimeout, cfg.DetectTimeout
	c.IdleTimeout, c.Grace = cfg.OutboundDiscoveryIdleTimeout, cfg.ShutdownGracePeriod
	if len(cfg.ProfileSuffixes) > 0 {
		c.ClusterSuffixes = cfg.ProfileSuffixes
	}
	// On one machine (a pod is a loopback address) connect to peers from the pod's address.
	if ap, err := netip.ParseAddrPort(cfg.InboundAddr); err == nil && ap.Addr().IsLoopback() {
		c.SourceAddr = ap.Addr()
	}
	return c
}

// Add adds the proxy's components to g, in a fixed order, and closes the control-plane
// connections once the components that use them (identity, discovery, inbound policy) have
// stopped, so that none of them loses its connection while it drains.
func (p *Proxy) Add(g *run.Group) {
	var users sync.WaitGroup
	use := func(name string, c run.Component) {
		users.Add(1)
		g.Add(name, &connUser{Component: c, done: users.Done})
	}
	if p.identity != nil {
		use("identity", identityComponent{p.identity})
	}
	use("discovery", p.resolver)
	use("inbound", p.in)
	g.Add("outbound", p.out)
	g.Go("control-plane connections", func(ctx context.Context) error {
		<-ctx.Done()
		users.Wait()
		p.close()
		return nil
	})
}

// InboundAddr and OutboundAddr are the listeners' addresses once they are bound (nil
// before).
func (p *Proxy) InboundAddr() net.Addr { return p.in.Addr() }

func (p *Proxy) OutboundAddr() net.Addr { return p.out.Addr() }

// connUser is a component that uses the control-plane connections: done is called when its
// Run returns. It passes its component's readiness and warnings on.
type connUser struct {
	run.Component
	done func()
}

func (c *connUser) Run(ctx context.Context) error {
	defer c.done()
	return c.Component.Run(ctx)
}

func (c *connUser) Ready() error {
	if r, ok := c.Component.(run.Readier); ok {
		return r.Ready()
	}
	return nil
}

func (c *connUser) Warnings() []string { return run.WarningsOf(c.Component) }

// identityComponent adapts the identity client to run: ready once it holds a certificate.
type identityComponent struct{ c *idclient.Client }

func (i identityComponent) Run(ctx context.Context) error { return i.c.Run(ctx) }

func (i identityComponent) Ready() error {
	select {
	case <-i.c.Ready():
		return nil
	default:
		return errors.New("no identity certificate yet")
	}
}

package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Options are the collaborators of a Service that are not configuration.
type Options struct {
	Logger     *zap.Logger           // nil: no logging
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
	Events     EventSink             // nil: issuer updates are only logged
	Now        func() time.Time      // nil: time.Now
}

// Service is the identity gRPC service. Certify may be called concurrently; the issuer it
// signs with is an immutable *Issuer swapped atomically by the reload loop.
type Service struct {
	pb.UnimplementedIdentityServer

	cfg      Config
	source   IssuerSource
	reviewer TokenReviewer
	log      *zap.Logger
	events   EventSink
	metrics  *serviceMetrics
	now      func() time.Time

	issuer atomic.Pointer[Issuer]
	// issuerMu guards issuerChanged, closed and replaced each time an issuer is installed.
	issuerMu      sync.Mutex
	issuerChanged chan struct{}

	// Owned by the goroutine calling Load, then Run.
	last    Material
	lastErr string
	refused string // why last was refused ("" when it is in use): it is checked again at each poll
}

var _ pb.IdentityServer = (*Service)(nil)

// NewService returns a Service that loads its issuer from source and checks tokens with
// reviewer. Call Load before serving so that a bad issuer stops start-up, then Run to
// follow issuer changes.
func NewService(cfg Config, source IssuerSource, reviewer TokenReviewer, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("identity config: %w", err)
	}
	if source == nil || reviewer == nil {
		return nil, errors.New("identity: an issuer source and a token reviewer are required")
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("identity metrics: %w", err)
	}
	s := &Service{cfg: cfg, source: source, reviewer: reviewer, log: opts.Logger, events: opts.Events, metrics: m, now: opts.Now,
		issuerChanged: make(chan struct{})}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Register registers the service on srv.
func (s *Service) Register(srv grpc.ServiceRegistrar) { pb.RegisterIdentityServer(srv, s) }

// Issuer returns the issuer in use, or nil before the first successful load.
func (s *Service) Issuer() *Issuer { return s.issuer.Load() }

// Ready reports nil once an issuer is loaded (for the admin /ready endpoint).
func (s *Service) Ready() error {
	if s.issuer.Load() == nil {
		return errors.New("identity issuer not loaded")
	}
	return nil
}

// Load reads and validates the issuer from the source and installs it. It returns why the
// issuer was refused (does not chain to the anchors, not a CA, expired, unreadable), which
// callers report before refusing to start.
func (s *Service) Load(ctx context.Context) error {
	m, err := s.source.Load(ctx)
	if err != nil {
		return fmt.Errorf("load issuer from %s: %w", s.source, err)
	}
	iss, err := s.loadIssuer(m)
	if err != nil {
		return fmt.Errorf("issuer from %s refused: %w", s.source, err)
	}
	s.last = m
	s.install(iss)
	s.log.Info("identity issuer loaded", zap.Stringer("source", s.source),
		zap.String("subject", quote.Message(iss.Cert.Subject.String())), zap.Time("notAfter", iss.Cert.NotAfter))
	return nil
}

func (s *Service) install(iss *Issuer) {
	s.issuerMu.Lock()
	s.issuer.Store(iss)
	close(s.issuerChanged)
	s.issuerChanged = make(chan struct{})
	s.issuerMu.Unlock()
	s.metrics.issuerExpiry.Set(float64(iss.Cert.NotAfter.Unix()))
}

// IssuerUpdates returns the issuer in use (nil before the first load) and a channel that is
// closed when another replaces it: a follower reads the pair again after each close.
func (s *Service) IssuerUpdates() (*Issuer, <-chan struct{}) {
	s.issuerMu.Lock()
	defer s.issuerMu.Unlock()
	return s.issuer.Load(), s.issuerChanged
}

// Run follows issuer changes until ctx ends: it polls the source every ReloadInterval and,
// for sources that can watch (files), reloads soon after each change. A refused update is
// logged and recorded as an IssuerUpdateSkipped event, and the previous issuer stays in use.
func (s *Service) Run(ctx context.Context) error {
	// One-slot wake-up: changes that arrive while a reload is pending coalesce.
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if w, ok := s.source.(ChangeWatcher); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.watch(ctx, w, changed)
		}()
	}
	tick := time.NewTicker(s.cfg.ReloadInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-kick:
			// Files are rarely replaced in one step (crt then key); let the rest land.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(reloadDebounce):
			}
			select {
			case <-kick:
			default:
			}
		}
		s.reload(ctx)
	}
}

const reloadDebounce = 100 * time.Millisecond

// watch runs w until ctx ends, restarting it after a pause when it breaks.
func (s *Service) watch(ctx context.Context, w ChangeWatcher, changed func()) {
	for {
		err := w.Watch(ctx, changed)
		if ctx.Err() != nil {
			return
		}
		s.log.Info("issuer watch ended; polling until it restarts", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.ReloadInterval):
		}
	}
}

func (s *Service) reload(ctx context.Context) {
	m, err := s.source.Load(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.skipped(fmt.Sprintf("Skipping issuer update: cannot read it from %s: %v", s.source, err))
		}
		return
	}
	s.lastErr = ""
	if m.Equal(s.last) && s.refused == "" {
		return
	}
	// Refused files are checked again at each poll, with the event only when the reason
	// changes: a refusal can be about the time (an issuer not valid yet, from a signer whose
	// clock runs ahead), and the same files become good.
	s.last = m
	iss, err := s.loadIssuer(m)
	if err != nil {
		if msg := fmt.Sprintf("Skipping issuer update from %s: %v", s.source, err); msg != s.refused {
			s.refused = msg
			s.skipped(msg)
		}
		return
	}
	s.refused = ""
	s.install(iss)
	s.metrics.reloads.WithLabelValues("updated").Inc()
	msg := fmt.Sprintf("Updated identity issuer: %s, valid until %s", quote.Message(iss.Cert.Subject.String()), iss.Cert.NotAfter.UTC().Format(time.RFC3339))
	s.log.Info(msg, zap.Stringer("source", s.source))
	if s.events != nil {
		s.events.Event("Normal", ReasonIssuerUpdated, msg)
	}
}

// loadIssuer validates m now (LoadIssuer), and that a leaf it signs for this service's own
// identity verifies (Issuer.Probe): a chain whose name constraints refuse the mesh's names
// is not installed.
func (s *Service) loadIssuer(m Material) (*Issuer, error) {
	now := s.now()
	iss, err := LoadIssuer(m, now)
	if err != nil {
		return nil, err
	}
	ns := s.cfg.ControlPlaneNamespace
	if err := iss.Probe(ServiceAccountIdentity(ns, "linkerd-identity", ns, s.cfg.TrustDomain), now); err != nil {
		return nil, fmt.Errorf("issuer certificate %s: %w", quote.String(iss.Cert.Subject.String()), err)
	}
	return iss, nil
}

func (s *Service) skipped(msg string) {
	s.metrics.reloads.WithLabelValues("skipped").Inc()
	s.log.Warn(msg)
	if s.events != nil {
		s.events.Event("Warning", ReasonIssuerSkipped, msg)
	}
}

// Certify implements io.linkerd.proxy.identity.Identity/Certify.
func (s *Service) Certify(ctx context.Context, req *pb.CertifyRequest) (*pb.CertifyResponse, error) {
	rsp, err := s.certify(ctx, req)
	code := status.Code(err)
	s.metrics.certify.WithLabelValues(resultOf(code), code.String()).Inc()
	return rsp, err
}

func (s *Service) certify(ctx context.Context, req *pb.CertifyRequest) (*pb.CertifyResponse, error) {
	iss := s.issuer.Load()
	if iss == nil {
		return nil, status.Error(codes.Unavailable, "identity issuer is not loaded yet")
	}
	identity := req.GetIdentity()
	csr, err := checkRequest(identity, req.GetToken(), req.GetCertificateSigningRequest())
	if err != nil {
		s.log.Debug("certify refused", zap.String("identity", quote.String(identity)), zap.Error(err))
		return nil, err
	}

	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReviewTimeout)
	rv, err := s.reviewer.Review(rctx, req.GetToken())
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		s.log.Warn("token review failed", zap.String("identity", quote.String(identity)), zap.String("error", quote.Message(err.Error())))
		return nil, status.Errorf(codes.Unavailable, "token review failed: %s", quote.Message(err.Error()))
	}
	if rv.Error != "" {
		// The reason may quote the token (a JSON error names an unknown field): a prefix only.
		s.log.Info("token refused by review", zap.String("identity", quote.String(identity)), zap.String("reason", quote.Message(rv.Error)))
		// The token itself is bad (expired, malformed, for another audience): Unauthenticated,
		// as the issue specifies (Linkerd answers InvalidArgument here).
		return nil, status.Errorf(codes.Unauthenticated, "invalid token: %s", quote.Message(rv.Error))
	}
	if !rv.Authenticated {
		s.log.Info("token not authenticated", zap.String("identity", quote.String(identity)))
		return nil, status.Error(codes.Unauthenticated, "the token could not be authenticated")
	}
	ns, sa, err := ParseServiceAccountUser(rv.Username)
	if err != nil {
		// A valid token of a user that is not a ServiceAccount yields no identity.
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	tokID := ServiceAccountIdentity(ns, sa, s.cfg.ControlPlaneNamespace, s.cfg.TrustDomain)
	if tokID != identity {
		msg := fmt.Sprintf("requested identity %s does not match the token's ServiceAccount %s/%s (identity %q)", quote.String(identity), ns, sa, tokID)
		s.log.Info("certify refused", zap.String("reason", msg))
		return nil, status.Error(codes.FailedPrecondition, msg)
	}

	now := s.now()
	der, notAfter, err := iss.Issue(csr, identity, now, s.cfg.Lifetime, s.cfg.ClockSkew)
	if errors.Is(err, ErrIssuerExpired) {
		s.log.Error("issuer has expired; rotate it", zap.Time("notAfter", iss.NotAfter))
		return nil, status.Errorf(codes.Unavailable, "the identity issuer expired at %s", iss.NotAfter.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "issue certificate: %v", err)
	}
	s.log.Info("certified", zap.String("identity", identity), zap.Time("validUntil", notAfter))
	return &pb.CertifyResponse{
		LeafCertificate:          der,
		IntermediateCertificates: slices.Clone(iss.Chain),
		ValidUntil:               timestamppb.New(notAfter),
	}, nil
}

package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/destclient"
)

// recvStream is the client side of a Get or GetProfile stream.
type recvStream[T any] interface {
	Recv() (*T, error)
	Trailer() metadata.MD
}

// session is what one stream loop does with what its streams deliver: getSession for Get,
// profileSession for GetProfile.
type session[T any] interface {
	name() string
	open(ctx context.Context, c pb.DestinationClient, req *pb.GetDestination) (recvStream[T], error)
	// restart is called when a new stream is open, before its first message.
	restart()
	// message applies one message; an error (a message this client refuses) ends the stream.
	message(*T) error
	// ended is told how a stream (or an attempt to open one) ended, other than by a redirect
	// or the target's end; it returns true to stop the loop.
	ended(e end, err error) (stop bool)
}

// end classifies how a stream ended.
type end int

const (
	endFailed   end = iota // the server went away, refused the connection, reset the stream, ...
	endClosed              // the server ended the stream with OK (Linkerd does on overflow)
	endProtocol            // a message this client refused
	endNotFound            // NotFound: the service does not exist
	endRejected            // InvalidArgument, FailedPrecondition without an owner, Unimplemented
)

// errProtocol marks a message this client refused.
var errProtocol = errors.New("refused a destination message")

// classify says how err ended a stream; owner is the replica a redirect names ("" if none).
func classify(err error, trailer metadata.MD) (e end, owner string) {
	switch {
	case err == nil:
		return endClosed, ""
	case errors.Is(err, errProtocol):
		return endProtocol, ""
	}
	switch status.Code(err) {
	case codes.NotFound:
		return endNotFound, ""
	case codes.FailedPrecondition:
		if v := trailer.Get(destclient.OwnerTrailer); len(v) > 0 {
			if validOwner(v[0]) {
				return endFailed, v[0]
			}
			return endFailed, "" // a redirect we cannot follow: retry, do not give the name up
		}
		return endRejected, ""
	case codes.InvalidArgument, codes.Unimplemented:
		return endRejected, ""
	}
	return endFailed, ""
}

// validOwner checks the shape of a redirect's owner address: host:port, at most 261 bytes.
func validOwner(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	return err == nil && host != "" && port != "" && len(addr) <= 261
}

// follow runs one stream of t (s says which) until t's context ends or s stops it. Each
// attempt goes to the owner the resolver remembers for t's service, else to the destination
// service; a redirect is followed at once (up to MaxRedirects in a row, then with backoff) and
// its owner remembered; a failure of a remembered owner makes the resolver forget it. Between
// failed attempts it backs off, 100 ms doubling to 5 s with jitter, reset by a stream that
// delivered something and stayed up for BackoffMax: replicas that each serve the state and
// then redirect (ring views that disagree, or a faulty destination) are followed with
// backoff, not in a loop that opens thousands of streams a second.
func follow[T any](t *target, s session[T]) {
	ctx, r := t.ctx, t.r
	bo := backoff{min: r.cfg.BackoffMin, max: r.cfg.BackoffMax}
	redirects := 0
	direct := "" // the owner a redirect named, for a target without a service key
	for ctx.Err() == nil {
		addr, remembered := r.addrFor(t.service, direct)
		start := time.Now()
		got, trailer, err := attempt(t, s, addr)
		if ctx.Err() != nil {
			return
		}
		if got && time.Since(start) >= r.cfg.BackoffMax {
			bo.reset()
			redirects = 0
		}
		e, owner := classify(err, trailer)
		switch {
		case owner != "":
			redirects++
			r.learn(t.service, owner)
			direct = owner
			r.log.Debug("following a redirect", zap.String("stream", s.name()), zap.String("target", t.path),
				zap.String("from", addr), zap.String("owner", owner))
			if redirects <= r.cfg.MaxRedirects {
				continue
			}
			if s.ended(endFailed, fmt.Errorf("%d redirects in a row, the last from %s to %s", redirects, addr, owner)) {
				return
			}
		default:
			if e == endFailed && remembered {
				r.forget(t.service, addr)
				direct = ""
			}
			if e == endProtocol {
				r.log.Warn("refused a destination update; reconnecting", zap.String("stream", s.name()),
					zap.String("target", t.path), zap.String("from", addr), zap.Error(err))
			} else {
				r.log.Debug("stream ended", zap.String("stream", s.name()), zap.String("target", t.path),
					zap.String("from", addr), zap.Error(err))
			}
			if s.ended(e, err) {
				return
			}
		}
		if !bo.wait(ctx) {
			return
		}
	}
}

// attempt opens one stream at addr and reads it until it ends. It returns whether anything
// was received, the error that ended it (nil: ended by the server with OK) and its trailer.
func attempt[T any](t *target, s session[T], addr string) (got bool, trailer metadata.MD, err error) {
	cc, release, err := t.r.conns.Conn(addr)
	if err != nil {
		return false, nil, status.Errorf(codes.Unavailable, "connection to %s: %v", addr, err)
	}
	defer release()
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	st, err := s.open(ctx, pb.NewDestinationClient(cc), t.req)
	if err != nil {
		return false, nil, err
	}
	s.restart()
	for {
		m, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return got, st.Trailer(), err
		}
		got = true
		if err := s.message(m); err != nil {
			return got, nil, fmt.Errorf("%w from %s: %w", errProtocol, addr, err)
		}
	}
}

// backoff spaces a stream's failed attempts: from min doubling to max, each wait drawn
// uniformly from [d/2, d] (jitter, so that proxies that lost the same replica do not come
// back in step).
type backoff struct {
	min, max, d time.Duration
}

func (b *backoff) reset() { b.d = 0 }

// next returns the next wait.
func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = b.min
	} else {
		b.d = min(2*b.d, b.max)
	}
	half := b.d / 2
	return half + rand.N(b.d-half+1)
}

// wait waits the next backoff; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	timer := time.NewTimer(b.next())
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// getSession applies a target's Get streams to its endpoint set.
type getSession struct{ t *target }

func (getSession) name() string { return "get" }

func (getSession) open(ctx context.Context, c pb.DestinationClient, req *pb.GetDestination) (recvStream[pb.Update], error) {
	return c.Get(ctx, req)
}

func (g getSession) restart() {
	g.t.mu.Lock()
	g.t.set.restart()
	g.t.mu.Unlock()
}

func (g getSession) message(u *pb.Update) error {
	t := g.t
	t.mu.Lock()
	defer t.mu.Unlock()
	changed, skipped := t.set.apply(u)
	if skipped != nil {
		t.r.log.Warn("skipped part of a destination update", zap.String("target", t.path), zap.Error(skipped))
	}
	if changed {
		t.publishLocked()
	}
	t.checkReadyLocked()
	return nil
}

func (g getSession) ended(e end, err error) bool {
	t := g.t
	switch e {
	case endNotFound:
		t.mu.Lock()
		if t.set.notFound() {
			t.publishLocked()
		}
		t.checkReadyLocked()
		t.mu.Unlock()
	case endRejected:
		t.mu.Lock()
		first := !t.set.resolved
		t.mu.Unlock()
		if first {
			t.reject(status.Convert(err).Message())
			return true
		}
		// Rejected after it resolved (the destination changed its mind, or another one
		// answers now): keep what we hold and ask again later.
	}
	if e != endNotFound {
		t.failed(err)
	}
	return false
}

// profileSession applies a target's GetProfile streams to its profile.
type profileSession struct{ t *target }

func (profileSession) name() string { return "profile" }

func (profileSession) open(ctx context.Context, c pb.DestinationClient, req *pb.GetDestination) (recvStream[pb.DestinationProfile], error) {
	return c.GetProfile(ctx, req)
}

func (profileSession) restart() {}

func (p profileSession) message(m *pb.DestinationProfile) error {
	prof, err := convertProfile(m)
	if err != nil {
		return err
	}
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.profiled
	t.profiled = true
	// An IP target's first profile is its first state (Resolved), even when it says nothing.
	if !equalProfile(t.profile, prof) || (first && t.byIP()) {
		t.profile = prof
		t.publishLocked()
	}
	t.checkReadyLocked()
	return nil
}

// ended marks the profile answered (Resolve does not wait for a profile that fails), forgets
// it when the service is not found, and stops when the destination rejects the name or does
// not serve profiles. For an IP target, whose profile is its whole state, a failure is only
// recorded and retried, as the Get stream's are; a rejection (or NotFound) of its first
// resolution makes the address not a mesh name.
func (p profileSession) ended(e end, err error) bool {
	t := p.t
	if t.byIP() {
		return p.endedIP(e, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e == endNotFound && !equalProfile(t.profile, Profile{}) {
		t.profile = Profile{}
		t.publishLocked()
	}
	t.profiled = true
	t.checkReadyLocked()
	return e == endRejected
}

func (p profileSession) endedIP(e end, err error) bool {
	t := p.t
	if e == endRejected || e == endNotFound {
		t.mu.Lock()
		first := !t.profiled
		t.mu.Unlock()
		if first {
			t.reject(status.Convert(err).Message())
			return true
		}
		// After a resolution: keep what we hold and ask again later.
	}
	t.failed(err)
	return false
}

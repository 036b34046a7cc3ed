package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// scripted is a Destination server on 127.0.0.1 that the test scripts: each Get stream runs
// the next queued script (or stays open, sending nothing, while none is queued); GetProfile
// sends one profile and stays open, or runs profile when set. It stands for "any destination
// that speaks the API" and for what Meridian's replicas never send.
type scripted struct {
	pb.UnimplementedDestinationServer
	addr    string
	gets    chan getScript
	calls   atomic.Int32
	profile func(*pb.GetDestination, pb.Destination_GetProfileServer) error
	always  getScript // when set, every Get runs it
	pcalls  atomic.Int32
	mu      sync.Mutex
	reqs    []*pb.GetDestination
}

type getScript func(req *pb.GetDestination, s pb.Destination_GetServer) error

func newScripted(t *testing.T) *scripted {
	s := &scripted{gets: make(chan getScript, 16)}
	s.addr = testutil.ServeGRPC(t, func(g *grpc.Server) { pb.RegisterDestinationServer(g, s) })
	return s
}

func (s *scripted) Get(req *pb.GetDestination, stream pb.Destination_GetServer) error {
	s.calls.Add(1)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if s.always != nil {
		return s.always(req, stream)
	}
	select {
	case f := <-s.gets:
		return f(req, stream)
	case <-stream.Context().Done():
		return nil
	}
}

func (s *scripted) GetProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer) error {
	s.pcalls.Add(1)
	if s.profile != nil {
		return s.profile(req, stream)
	}
	if err := stream.Send(&pb.DestinationProfile{FullyQualifiedName: "fqn-of-" + req.GetPath()}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// step returns a script that sends us, then waits until cut is closed (nil: until the
// stream ends) and ends the stream with err (nil: OK).
func step(cut <-chan struct{}, err error, us ...*pb.Update) getScript {
	return func(_ *pb.GetDestination, s pb.Destination_GetServer) error {
		for _, u := range us {
			if err := s.Send(u); err != nil {
				return err
			}
		}
		select {
		case <-cut:
			return err
		case <-s.Context().Done():
			return nil
		}
	}
}

// redirect returns a script that sends us and then refuses with a redirect to owner.
func redirect(owner string, us ...*pb.Update) getScript {
	return func(_ *pb.GetDestination, s pb.Destination_GetServer) error {
		for _, u := range us {
			if err := s.Send(u); err != nil {
				return err
			}
		}
		s.SetTrailer(metadata.Pairs(destclient.OwnerTrailer, owner))
		return status.Error(codes.FailedPrecondition, "not the owner")
	}
}

func fails(code codes.Code) getScript {
	return func(*pb.GetDestination, pb.Destination_GetServer) error {
		return status.Error(code, "scripted "+code.String())
	}
}

func scriptedResolver(t *testing.T, addr string) *Resolver {
	return newResolver(t, addr, func(c *Config) {
		c.BackoffMin, c.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
		c.ContextToken = `{"ns":"client-ns"}`
	})
}

var unavailable = status.Error(codes.Unavailable, "scripted: going away")

// Linkerd's update semantics, against a destination that uses all of them.
func TestScriptedUpdateSemantics(t *testing.T) {
	d := newScripted(t)
	cut1, cut2, cut3, cut4 := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	d.gets <- step(cut1, unavailable, removeU("10.0.0.1:80"), noEndpointsU(false))
	r := scriptedResolver(t, d.addr)
	h := resolve(t, r, "web.shop.svc.cluster.local:8080")
	if s := h.Snapshot(); !s.Resolved || s.Exists || len(s.Endpoints) != 0 || s.Profile.FullyQualifiedName != "fqn-of-web.shop.svc.cluster.local:8080" {
		t.Fatalf("a Remove first, then NoEndpoints{exists: false}: %+v", s)
	}
	d.mu.Lock()
	req := d.reqs[0]
	d.mu.Unlock()
	if req.GetPath() != "web.shop.svc.cluster.local:8080" || req.GetContextToken() != `{"ns":"client-ns"}` {
		t.Fatalf("request %v", req)
	}

	// The stream fails; the reconnect's Add is the new state.
	changed := h.Changed()
	d.gets <- step(cut2, nil, addU(nil, wa("10.0.0.1:80"), wa("10.0.0.2:80")))
	close(cut1)
	testutil.Recv(t, asValues(changed), within, "Changed to be closed")
	waitEndpoints(t, h, []string{"10.0.0.1:80", "10.0.0.2:80"})

	// The stream ends with OK; the next one's Remove first is ignored and its first Add
	// replaces the set: 10.0.0.1 goes although no Remove named it.
	d.gets <- step(cut3, nil, removeU("10.0.0.2:80"), addU(nil, wa("10.0.0.3:80")), addU(nil, wa("10.0.0.4:80")))
	close(cut2)
	waitEndpoints(t, h, []string{"10.0.0.3:80", "10.0.0.4:80"})

	// An address the resolver cannot use is left out and the stream goes on, as
	// linkerd2-proxy's resolver does; so does an update of a kind it does not know (a newer
	// destination's). Refusing the message would only bring it back on every new stream.
	d.gets <- step(cut4, nil, addU(nil, &pb.WeightedAddr{}, wa("10.0.0.7:80")), &pb.Update{}, addU(nil, wa("10.0.0.8:80")))
	close(cut3)
	waitEndpoints(t, h, []string{"10.0.0.7:80", "10.0.0.8:80"})
	d.gets <- step(nil, nil, addU(nil, wa("10.0.0.5:80")), removeU("10.0.0.5:80"), noEndpointsU(true))
	close(cut4)
	testutil.EventuallyNoError(t, within, "NoEndpoints{exists: true}", func() error {
		if s := h.Snapshot(); !s.Exists || len(s.Endpoints) != 0 {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
}

// asValues turns a closed-channel signal into one Recv can wait for.
func asValues(ch <-chan struct{}) <-chan bool {
	out := make(chan bool, 1)
	go func() { <-ch; out <- true }()
	return out
}

// FailedPrecondition without the owner trailer, on a first resolution, is "not a mesh name";
// after a resolution, InvalidArgument on a reconnect keeps the set and asks again.
func TestScriptedRejections(t *testing.T) {
	d := newScripted(t)
	d.gets <- fails(codes.FailedPrecondition)
	r := scriptedResolver(t, d.addr)
	if _, err := tryResolve(r, "web.shop.svc.cluster.local"); !errors.Is(err, ErrNotMeshName) || !strings.Contains(err.Error(), "scripted FailedPrecondition") {
		t.Fatalf("FailedPrecondition without an owner: %v", err)
	}
	cut := make(chan struct{})
	d.gets <- step(cut, unavailable, addU(nil, wa("10.0.0.1:80")))
	h := resolve(t, r, "api.shop.svc.cluster.local")
	d.gets <- fails(codes.InvalidArgument)
	d.gets <- step(nil, nil, addU(nil, wa("10.0.0.2:80")))
	calls := d.calls.Load()
	close(cut)
	waitEndpoints(t, h, []string{"10.0.0.2:80"})
	if got := d.calls.Load() - calls; got != 2 {
		t.Fatalf("%d streams after the first ended, want 2 (the rejected one, then the good one)", got)
	}
}

// Redirects are followed for targets with and without a service key; a mid-stream redirect
// (the owner changed) moves the stream, and the new owner's first Add replaces the set; a
// remembered owner that goes away is forgotten.
func TestScriptedRedirects(t *testing.T) {
	a, b, c := newScripted(t), newScripted(t), newScripted(t)
	r := scriptedResolver(t, a.addr)

	// A name the resolver has no service key for: followed, not remembered.
	a.gets <- redirect(b.addr)
	cut := make(chan struct{})
	b.gets <- step(cut, unavailable, addU(nil, wa("10.0.0.1:80")))
	h := resolve(t, r, "web.example:80")
	waitEndpoints(t, h, []string{"10.0.0.1:80"})
	a.gets <- redirect(b.addr)
	b.gets <- step(nil, nil, addU(nil, wa("10.0.0.2:80")))
	close(cut) // the owner goes away: back to the destination, which redirects again
	waitEndpoints(t, h, []string{"10.0.0.2:80"})
	if a.calls.Load() != 2 || b.calls.Load() != 2 {
		t.Fatalf("streams: %d at the destination, %d at the owner; want 2 and 2", a.calls.Load(), b.calls.Load())
	}

	// A service: its owner is remembered, and a second target goes straight there.
	a.gets <- redirect(b.addr)
	cutB := make(chan struct{})
	b.gets <- step(cutB, unavailable, addU(nil, wa("10.0.1.1:80")))
	hs := resolve(t, r, "web.shop.svc.cluster.local:80")
	waitEndpoints(t, hs, []string{"10.0.1.1:80"})
	if got := r.ownerOf("shop/web"); got != b.addr {
		t.Fatalf("owner %q, want %s", got, b.addr)
	}
	b.gets <- redirect(c.addr, addU(nil, wa("10.0.2.1:80"), wa("10.0.2.2:80"))) // moves mid-stream
	c.gets <- step(nil, nil, addU(nil, wa("10.0.2.2:80"), wa("10.0.2.3:80")))
	before := a.calls.Load()
	h81 := resolve(t, r, "web.shop.svc.cluster.local:81")
	waitEndpoints(t, h81, []string{"10.0.2.2:80", "10.0.2.3:80"})
	if a.calls.Load() != before || r.ownerOf("shop/web") != c.addr {
		t.Fatalf("the second target asked the destination (%d streams) or the owner is %q", a.calls.Load()-before, r.ownerOf("shop/web"))
	}
	// The first target's owner goes away: it is forgotten only if it is still the one
	// remembered (it is not: c is), and the reconnect goes to c.
	c.gets <- step(nil, nil, addU(nil, wa("10.0.3.1:80")))
	close(cutB)
	waitEndpoints(t, hs, []string{"10.0.3.1:80"})
	if a.calls.Load() != before {
		t.Fatal("a reconnect asked the destination although an owner is known")
	}
}

// A destination whose redirects never end: the resolver backs off and Resolve fails with its
// context, saying why.
func TestScriptedRedirectLoop(t *testing.T) {
	d := newScripted(t)
	d.always = redirect("127.0.0.1:1") // connection refused: forgotten, redirected again, ...
	self := newScripted(t)
	self.always = redirect(self.addr)
	for _, addr := range []string{d.addr, self.addr} {
		r := scriptedResolver(t, addr)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := r.Resolve(ctx, "web.shop.svc.cluster.local")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Resolve through endless redirects: %v", err)
		}
		t.Log(err)
	}
}

// A destination without GetProfile: Resolve does not wait for profiles, and asks once.
func TestScriptedProfileUnimplemented(t *testing.T) {
	d := newScripted(t)
	d.profile = func(*pb.GetDestination, pb.Destination_GetProfileServer) error {
		return status.Error(codes.Unimplemented, "no profiles here")
	}
	d.gets <- step(nil, nil, addU(nil, wa("10.0.0.1:80")))
	r := scriptedResolver(t, d.addr)
	h := resolve(t, r, "web.shop.svc.cluster.local")
	if s := h.Snapshot(); len(s.Endpoints) != 1 || s.Profile != (Profile{}) {
		t.Fatalf("%+v", s)
	}
	testutil.Never(t, 300*time.Millisecond, "GetProfile asked again", func() bool { return d.pcalls.Load() != 1 })
}

// Two replicas that each serve the state and then redirect to the other (ring views that
// disagree, or a faulty destination): MaxRedirects of them are followed at once, then the
// resolver backs off. A stream that delivered used to reset both the backoff and the count
// of redirects, so this opened thousands of streams a second, each replacing the set.
func TestScriptedRedirectAfterDeliveryBacksOff(t *testing.T) {
	a, b := newScripted(t), newScripted(t)
	a.always = redirect(b.addr, addU(nil, wa("10.0.0.1:80")))
	b.always = redirect(a.addr, addU(nil, wa("10.0.0.2:80")))
	// A backoff of a minute: after the redirects followed at once, the next attempt waits.
	r := newResolver(t, a.addr, func(c *Config) { c.BackoffMin, c.BackoffMax = time.Minute, time.Minute })
	h := resolve(t, r, "web.shop.svc.cluster.local:80")
	want := int32(DefaultConfig().MaxRedirects + 1)
	streams := func() int32 { return a.calls.Load() + b.calls.Load() }
	testutil.Eventually(t, 10*time.Second, "the redirects followed at once", func() bool { return streams() >= want })
	time.Sleep(300 * time.Millisecond)
	if n := streams(); n != want {
		t.Fatalf("%d Get streams, want %d (%d redirects followed at once, then a wait)", n, want, want-1)
	}
	// The last set served (the fourth stream's, b's) is kept while the stream waits.
	if got := addrs(h.Snapshot()); !slices.Equal(got, []string{"10.0.0.2:80"}) {
		t.Fatalf("endpoints %v while the stream waits, want b's", got)
	}
}

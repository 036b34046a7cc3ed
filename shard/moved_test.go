package shard

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/translator"
)

// webEnv is a replica serving shop/web with one endpoint, 10.0.0.1:8080.
func webEnv(t *testing.T) *env {
	e := newEnv(t, nil)
	h := e.h()
	h.OnService(svcObj("shop", "web"), false)
	h.OnPod(podObj("shop", "web-1", "10.0.0.1", false), false)
	h.OnEndpointSlice(sliceObj("shop", "web", "web-a", 8080, epSpec{"10.0.0.1", "web-1", true, ""}), false)
	waitService(t, e.replica, "shop", "web")
	return e
}

// webSegmentEnv is webEnv, with the target and key of shop/web's port 80, for tests that
// run a local segment themselves.
func webSegmentEnv(t *testing.T) (*env, translator.Target, ServiceKey) {
	target, err := translator.ParseAuthority(DefaultConfig().Translator, auth)
	if err != nil {
		t.Fatal(err)
	}
	return webEnv(t), target, NewServiceKey("shop", "web")
}

// TestFollowWaitsForTheViewWhileTheIndexIsAhead: a ring change moves the index's filter
// first and the view only after it has loaded what it gained, so for that while a stream
// for a service being lost finds the view calling it local and the index calling it moved.
// The stream waits for the view, once, and is served when the view comes; it used to retry
// at once, about a million times in 200 ms, and did not end with its client.
func TestFollowWaitsForTheViewWhileTheIndexIsAhead(t *testing.T) {
	e := webEnv(t)
	e.replica.idx.SetOwns(func(ServiceKey) bool { return false }) // as follower.apply does before it loads
	before := promtest.ToFloat64(e.replica.m.handovers)
	moves := func() float64 { return promtest.ToFloat64(e.replica.m.handovers) - before }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := e.client.Get(ctx, &pb.GetDestination{Scheme: "k8s", Path: auth})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the stream's segment ended as moved", func() bool { return moves() >= 1 })
	time.Sleep(100 * time.Millisecond)
	if n := moves(); n != 1 {
		t.Fatalf("%.0f handovers with no change of the view, want 1 (the stream retried without waiting)", n)
	}
	// The ring change completes: the index owns web again (as its filter says for this
	// replica), and the view is swapped.
	e.replica.idx.SetOwns(func(ServiceKey) bool { return true })
	e.replica.own.swap(nil)
	u, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(u.GetAdd().GetAddrs()); n != 1 {
		t.Fatalf("first update %v, want an Add of 1 endpoint", u)
	}
}

// TestLocalMovedBeforeFirstDeltaKeepsView: a stream handed over to this replica (view: what
// the client holds) whose local segment ends as moved before its first delta has sent
// nothing, so the next segment must receive what the client holds. It used to receive an
// empty view about half the time (when the select took the ring change before the initial
// delta), and then forwarded the new owner's set without removing what the client held.
func TestLocalMovedBeforeFirstDeltaKeepsView(t *testing.T) {
	e, target, k := webSegmentEnv(t)
	lost, early := 0, 0
	const runs = 200
	for range runs {
		// The stream came here on view v, which a newer ring, giving web to "other", has
		// replaced already.
		own := newOwnership(standaloneName, ShardByService, nil)
		v := own.load()
		own.swap(ring.Build([]ring.Member{{Name: "other", Addr: "127.0.0.1:1"}}, ring.DefaultHashConfig()))
		l := *e.replica.srv.local
		l.own = own
		// The client holds 10.0.0.1 and 10.9.9.9 (the previous owner's state).
		view := destclient.NewHeld()
		if err := view.Apply(&pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{
			{Addr: wire.TCPAddr(netipMust("10.0.0.1:8080"))}, {Addr: wire.TCPAddr(netipMust("10.9.9.9:8080"))}}}}}); err != nil {
			t.Fatal(err)
		}
		sent := 0
		got, err := l.get(context.Background(), target, k, "", v, view, func([]byte, wire.UpdateKind) error { sent++; return nil })
		if !errors.Is(err, errMoved) {
			t.Fatalf("local segment ended with %v, want errMoved", err)
		}
		if sent > 0 {
			continue // the initial delta went first: the view returned is what it sent
		}
		early++
		if !got.Started() || got.Len() != 2 {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("in %d of %d segments moved before their first delta, the view returned lost what the client held", lost, early)
	}
	if early == 0 {
		t.Fatalf("no segment of %d moved before its first delta; the case was not exercised", runs)
	}
}

// TestLocalSegmentEndsBeforeTheRelease: a ring change swaps the view and then releases what
// the replica lost, so the release's changes (here, the set emptied) can be pending for a
// segment that has not acted on the view change yet. The segment must end as moved and pass
// none of them on. A Get's segment used to send the emptied set first (its drain took every
// pending delta), and a stream then saw add, NoEndpoints{exists:true}, add during a handover
// (seen in TestKubeRingHandoverByNamespace under load); a GetProfile's, half the time, a
// profile of a Service no longer held.
func TestLocalSegmentEndsBeforeTheRelease(t *testing.T) {
	e, target, k := webSegmentEnv(t)
	key := viewKey(k, target.Port, "")
	other := ring.Build([]ring.Member{{Name: "other", Addr: "127.0.0.1:1"}}, ring.DefaultHashConfig())
	slice := sliceObj("shop", "web", "web-a", 8080, epSpec{"10.0.0.1", "web-1", true, ""})
	// publish applies the slice change and waits until the index has published it.
	publish := func(deleted bool) {
		before := e.replica.store.Load(key)
		e.h().OnEndpointSlice(slice, deleted)
		testutil.Eventually(t, 10*time.Second, "the slice change to be published", func() bool { return e.replica.store.Load(key) != before })
	}
	const runs = 20 // a GetProfile's segment chose between the two at random
	for _, profile := range []bool{false, true} {
		for range runs {
			own := newOwnership(standaloneName, ShardByService, nil)
			l := *e.replica.srv.local
			l.own = own
			sent := 0
			// While the segment sends its first update, the ring gives web away and the
			// replica releases it: the view first, then the release, as follower.apply does.
			first := func() error {
				if sent++; sent == 1 {
					own.swap(other)
					publish(true)
				}
				return nil
			}
			var err error
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if profile {
				err = l.profile(ctx, target, k, "", own.load(), func(*pb.DestinationProfile) error { return first() })
			} else {
				_, err = l.get(ctx, target, k, "", own.load(), nil, func([]byte, wire.UpdateKind) error { return first() })
			}
			cancel()
			if !errors.Is(err, errMoved) || sent != 1 {
				t.Fatalf("profile=%v: the segment sent %d updates and ended with %v; want 1 and errMoved", profile, sent, err)
			}
			publish(false) // web's endpoint again, for the next run
		}
	}
}

// TestIPProfileEndsBeforeTheRelease is TestLocalSegmentEndsBeforeTheRelease for the profile
// of a pod's address: released after the view moved it, the address must not be sent on as
// no pod's (a profile without the pod's identity), which the segment used to do half the
// time.
func TestIPProfileEndsBeforeTheRelease(t *testing.T) {
	e, _, _ := webSegmentEnv(t)
	ap := netip.MustParseAddrPort("10.0.0.1:8080")
	k := ipKey(ap.Addr())
	other := ring.Build([]ring.Member{{Name: "other", Addr: "127.0.0.1:1"}}, ring.DefaultHashConfig())
	pod := podObj("shop", "web-1", "10.0.0.1", false)
	// setPod applies the pod's change and waits until the index's address lookup shows it.
	setPod := func(deleted bool) {
		e.h().OnPod(pod, deleted)
		testutil.Eventually(t, 10*time.Second, "the pod change to be indexed", func() bool {
			return (len(e.replica.idx.ips.lookup(ap.Addr()).pods) == 0) == deleted
		})
	}
	for range 20 { // the segment chose between the two at random
		own := newOwnership(standaloneName, ShardByService, nil)
		l := *e.replica.srv.local
		l.own = own
		sent := 0
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := l.ipProfile(ctx, ap, k, own.load(), func(*pb.DestinationProfile) error {
			if sent++; sent == 1 {
				own.swap(other)
				setPod(true)
			}
			return nil
		})
		cancel()
		if !errors.Is(err, errMoved) || sent != 1 {
			t.Fatalf("the segment sent %d profiles and ended with %v; want 1 and errMoved", sent, err)
		}
		setPod(false)
	}
}

package discovery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/shard"
)

// profilesByPath returns a GetProfile script that sends each path's profile once and stays
// open (updates, when given a path, are sent after it on a later signal), and answers a path
// it has no profile for with InvalidArgument (a destination that does not look it up).
func profilesByPath(profiles map[string]*pb.DestinationProfile, later map[string]chan *pb.DestinationProfile) func(*pb.GetDestination, pb.Destination_GetProfileServer) error {
	return func(req *pb.GetDestination, s pb.Destination_GetProfileServer) error {
		p, ok := profiles[req.GetPath()]
		if !ok {
			return status.Error(codes.InvalidArgument, "scripted: no profile for "+req.GetPath())
		}
		if err := s.Send(p); err != nil {
			return err
		}
		for {
			select {
			case next := <-later[req.GetPath()]:
				if err := s.Send(next); err != nil {
					return err
				}
			case <-s.Context().Done():
				return nil
			}
		}
	}
}

// An IP address is resolved as Linkerd's proxy resolves a connection's original destination:
// by GetProfile alone. A pod's address becomes that pod's endpoint, identity and hints
// included (the profile's endpoint: linkerd2's TestGetProfiles "Return profile with endpoint
// when using pod IP"); a profile change replaces it. A Service's cluster IP (a profile with
// fully_qualified_name and no endpoint) resolves as the Service's name at the address's
// port. An address the destination describes by nothing but opaque_protocol is itself, in
// plaintext, with the profile's opaque flag. A destination that refuses addresses makes them not mesh names, as before.
func TestScriptedIPTargets(t *testing.T) {
	const podID = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	d := newScripted(t)
	podUpdates := make(chan *pb.DestinationProfile, 1)
	d.profile = profilesByPath(map[string]*pb.DestinationProfile{
		"10.0.0.1:8080":                 {Endpoint: wa("10.0.0.1:8080", identity(podID))},
		"10.96.0.10:80":                 {FullyQualifiedName: "web.shop.svc.cluster.local"},
		"web.shop.svc.cluster.local:80": {FullyQualifiedName: "web.shop.svc.cluster.local"},
		"10.0.0.9:3306":                 {OpaqueProtocol: true},
	}, map[string]chan *pb.DestinationProfile{"10.0.0.1:8080": podUpdates})
	d.always = func(req *pb.GetDestination, s pb.Destination_GetServer) error {
		if req.GetPath() != "web.shop.svc.cluster.local:80" {
			return status.Error(codes.InvalidArgument, "scripted: IP host")
		}
		return step(nil, nil, addU(map[string]string{"service": "web"}, wa("10.1.0.1:8080"), wa("10.1.0.2:8080")))(req, s)
	}
	r := scriptedResolver(t, d.addr)

	pod := resolve(t, r, "10.0.0.1:8080")
	s := pod.Snapshot()
	if !s.Resolved || !s.Exists || len(s.Endpoints) != 1 || s.Endpoints[0].Identity != podID || pod.Authority() != "10.0.0.1:8080" {
		t.Fatalf("pod IP: authority %s, %+v", pod.Authority(), s)
	}
	changed := pod.Changed()
	podUpdates <- &pb.DestinationProfile{Endpoint: wa("10.0.0.1:8080", identity("other."+podID))}
	testutil.Recv(t, asValues(changed), within, "the pod IP's target to change")
	if s := pod.Snapshot(); len(s.Endpoints) != 1 || s.Endpoints[0].Identity != "other."+podID {
		t.Fatalf("after a new profile: %+v", s)
	}

	svc := resolve(t, r, "10.96.0.10:80")
	if svc.Authority() != "web.shop.svc.cluster.local:80" {
		t.Fatalf("cluster IP resolved as %s, want the service's name", svc.Authority())
	}
	waitEndpoints(t, svc, []string{"10.1.0.1:8080", "10.1.0.2:8080"})
	if got := r.ownerOf("shop/web"); got != "" {
		t.Fatalf("owner %q for a destination that never redirected", got)
	}

	bare := resolve(t, r, "10.0.0.9:3306")
	if s := bare.Snapshot(); len(s.Endpoints) != 1 || s.Endpoints[0].Addr.String() != "10.0.0.9:3306" ||
		s.Endpoints[0].Identity != "" || !s.Profile.Opaque {
		t.Fatalf("an address with an opaque default profile: %+v", s)
	}

	if _, err := tryResolve(r, "10.0.0.7:80"); !errors.Is(err, ErrNotMeshName) || !strings.Contains(err.Error(), "no profile for 10.0.0.7:80") {
		t.Fatalf("an address the destination refuses: %v", err)
	}

	// No Get stream was opened for an address: only for the cluster IP's service name.
	d.mu.Lock()
	var gets []string
	for _, req := range d.reqs {
		gets = append(gets, req.GetPath())
	}
	d.mu.Unlock()
	if !slices.Equal(gets, []string{"web.shop.svc.cluster.local:80"}) {
		t.Fatalf("Get streams for %v, want only the service's name", gets)
	}
}

// Until the destination answers an address's profile, Resolve waits (and fails with its
// context): an address not looked up yet is not one without endpoints.
func TestScriptedIPTargetWaitsForProfile(t *testing.T) {
	d := newScripted(t)
	d.profile = func(*pb.GetDestination, pb.Destination_GetProfileServer) error {
		return status.Error(codes.Unavailable, "scripted: not loaded yet")
	}
	r := scriptedResolver(t, d.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Resolve(ctx, "10.0.0.1:8080"); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not loaded yet") {
		t.Fatalf("Resolve of an address whose profile fails: %v", err)
	}
	if d.calls.Load() != 0 {
		t.Fatalf("%d Get streams for an address", d.calls.Load())
	}
}

// The same against a real ring in redirect mode: a meshed pod's address resolves to its
// endpoint with the pod's identity (from whichever replica owns the address), the Service's
// cluster IP to the Service's endpoints at the target port, and an address no pod or Service
// has to itself, opaque on a default opaque port.
func TestIPTargetsOnRing(t *testing.T) {
	c := newCluster(t)
	web := svc{ns: "shop", name: "web", ips: []string{"10.5.0.1", "10.5.0.2"}, meshed: true, clusterIP: "10.96.5.5"}
	c.write(web)
	nodes := startRing(t, c, 3, shard.Redirect)
	r := newResolver(t, nodes[0].Addr, nil)

	const webID = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	pod := resolve(t, r, "10.5.0.2:8080")
	if s := pod.Snapshot(); len(s.Endpoints) != 1 || s.Endpoints[0].Addr.String() != "10.5.0.2:8080" || s.Endpoints[0].Identity != webID {
		t.Fatalf("a meshed pod's address: %+v", s)
	}
	byIP := resolve(t, r, "10.96.5.5:80")
	if byIP.Authority() != web.authority(80) {
		t.Fatalf("the cluster IP resolved as %s, want %s", byIP.Authority(), web.authority(80))
	}
	waitEndpoints(t, byIP, web.want(80))
	if s := byIP.Snapshot(); s.Endpoints[0].Identity != webID {
		t.Fatalf("the cluster IP's endpoints: %+v", s.Endpoints)
	}
	other := resolve(t, r, "10.200.0.1:3306")
	if s := other.Snapshot(); len(s.Endpoints) != 1 || s.Endpoints[0].Addr.String() != "10.200.0.1:3306" || s.Endpoints[0].Identity != "" || !s.Profile.Opaque {
		t.Fatalf("an unknown address on an opaque port: %+v", s)
	}
}

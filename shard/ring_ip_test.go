package shard

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

const ringIPServices = 12

// writeIPObjects writes, into the ring's directory, Services ipsvc<i> with cluster IP
// 10.96.0.<i+1> and meshed pods ippod<i> with pod IP 10.200.0.<i+1>.
func writeIPObjects(t *testing.T, c *cluster) {
	t.Helper()
	var b strings.Builder
	for i := range ringIPServices {
		ns, _ := svcName(i)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Service\nmetadata: {namespace: %s, name: ipsvc%d}\nspec:\n  clusterIP: 10.96.0.%d\n  ports: [{name: http, port: 80}]\n", ns, i, i+1)
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: %s, name: ippod%d, labels: {linkerd.io/control-plane-ns: linkerd}}\nstatus: {phase: Running, podIP: 10.200.0.%d}\n", ns, i, i+1)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "ips.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRingIPLookups checks GetProfile by IP in a ring: every replica resolves every cluster
// IP (the index of cluster IPs is whole on each) and answers as its Service, through the
// service's owner when another replica owns it (relayed by name); each pod IP is indexed by
// the one replica that owns the address, which answers for it, relayed to by the others; an
// address no pod holds yet is served bare until a pod takes it.
func TestRingIPLookups(t *testing.T) {
	c := newCluster(t, ringServices, 2)
	writeIPObjects(t, c)
	nodes := startRing(t, c, 3, Forward)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testutil.EventuallyNoError(t, 20*time.Second, "the replicas to index the addresses", func() error {
		for i := range ringIPServices {
			podIP := mustAddr(fmt.Sprintf("10.200.0.%d", i+1))
			owner := nodes[0].cluster.Ring().OwnerOfHash(ipHash(podIP)).Name
			for _, n := range nodes {
				if got := len(n.replica.Index().ips.lookup(podIP).pods); got != b2i(n.name == owner) {
					return fmt.Errorf("%s indexes %d pods at %v (its owner is %s)", n.name, got, podIP, owner)
				}
				if len(n.replica.Index().ips.lookup(mustAddr(fmt.Sprintf("10.96.0.%d", i+1))).services) != 1 {
					return fmt.Errorf("%s does not resolve the cluster IP of %d", n.name, i)
				}
			}
		}
		return nil
	})
	for _, n := range nodes {
		client := pb.NewDestinationClient(testutil.DialGRPC(t, n.addr))
		for i := range ringIPServices {
			ns, _ := svcName(i)
			p := recvProfile(t, ctx, client, fmt.Sprintf("10.96.0.%d:80", i+1))
			if want := fmt.Sprintf("ipsvc%d.%s.svc.cluster.local", i, ns); p.GetFullyQualifiedName() != want {
				t.Fatalf("%s: cluster IP of %d: profile %v, want %s", n.name, i, p, want)
			}
			p = recvProfile(t, ctx, client, fmt.Sprintf("10.200.0.%d:8080", i+1))
			if pod := p.GetEndpoint().GetMetricLabels()["pod"]; pod != fmt.Sprintf("ippod%d", i) || p.GetEndpoint().GetTlsIdentity() == nil {
				t.Fatalf("%s: pod IP of %d: profile %v", n.name, i, p)
			}
		}
	}
	relayed := 0.0
	for _, n := range nodes {
		relayed += promtest.ToFloat64(n.replica.m.forwardedTotal)
	}
	if relayed == 0 {
		t.Fatal("no IP lookup was relayed to its owner")
	}
	// An address nobody has yet, then a pod's.
	s := newRecvStream(mustProfile(t, ctx, pb.NewDestinationClient(testutil.DialGRPC(t, nodes[1].addr)), "10.200.9.9:8080"))
	if p := s.next(t); p.GetEndpoint().GetMetricLabels()["pod"] != "" {
		t.Fatalf("unknown address: %v", p)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "late.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {namespace: ns1, name: late}\nstatus: {phase: Running, podIP: 10.200.9.9}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := s.next(t); p.GetEndpoint().GetMetricLabels()["pod"] != "late" || p.GetEndpoint().GetMetricLabels()["namespace"] != "ns1" {
		t.Fatalf("address of a new pod: %v", p)
	}
}

func mustProfile(t *testing.T, ctx context.Context, c pb.DestinationClient, path string) pb.Destination_GetProfileClient {
	t.Helper()
	s, err := c.GetProfile(ctx, &pb.GetDestination{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recvProfile returns the first profile of a GetProfile stream for path, and ends the stream.
func recvProfile(t *testing.T, ctx context.Context, c pb.DestinationClient, path string) *pb.DestinationProfile {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := mustProfile(t, ctx, c, path).Recv()
	if err != nil {
		t.Fatalf("profile of %s: %v", path, err)
	}
	return p
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestRingServiceProfiles checks ServiceProfiles in a ring: each replica keeps the profiles
// of the services it owns only, those of clients' namespaces included (it finds them by
// name), and any replica answers with the client namespace's profile of any service.
func TestRingServiceProfiles(t *testing.T) {
	c := newCluster(t, ringServices, 2)
	var b strings.Builder
	for i := range ringServices {
		ns, name := svcName(i)
		for _, spNS := range []string{ns, "clients"} {
			fmt.Fprintf(&b, "---\napiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {namespace: %s, name: %s.%s.svc.cluster.local}\n"+
				"spec:\n  routes: [{name: %s-%s, condition: {pathRegex: /%d}}]\n", spNS, name, ns, spNS, name, i)
		}
	}
	if err := os.WriteFile(filepath.Join(c.dir, "profiles.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := startRing(t, c, 3, Forward)
	testutil.EventuallyNoError(t, 20*time.Second, "each replica to hold the profiles of what it owns", func() error {
		for _, n := range nodes {
			for i := range ringServices {
				ns, name := svcName(i)
				k := NewServiceKey(ns, name)
				owns := n.cluster.Ring().Owner(k.String()).Name == n.name
				if held := n.replica.Index().Profile(k, "clients") != nil; held != owns {
					return fmt.Errorf("%s: holds the profiles of %s: %v, owns it: %v", n.name, k, held, owns)
				}
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range nodes {
		client := pb.NewDestinationClient(testutil.DialGRPC(t, n.addr))
		for i := range ringServices {
			ns, name := svcName(i)
			s, err := client.GetProfile(ctx, &pb.GetDestination{Path: servicePath(i), ContextToken: `{"ns":"clients"}`})
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.Recv()
			if err != nil || len(p.GetRoutes()) != 1 || p.GetRoutes()[0].GetMetricsLabels()["route"] != "clients-"+name {
				t.Fatalf("%s: profile of %s/%s for a client in clients: %v, %v", n.name, ns, name, p, err)
			}
		}
	}
}

// TestRingIPStreamsMove checks that GetProfile streams of pod IPs follow their addresses when
// a replica joins: the addresses it takes over are indexed there before the streams move,
// and every stream receives a change made after the join.
func TestRingIPStreamsMove(t *testing.T) {
	c := newCluster(t, ringServices, 2)
	writeIPObjects(t, c)
	nodes := startRing(t, c, 2, Forward)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := pb.NewDestinationClient(testutil.DialGRPC(t, nodes[0].addr))
	streams := make([]*recvStream[pb.DestinationProfile], ringIPServices)
	for i := range streams {
		streams[i] = newRecvStream(mustProfile(t, ctx, client, fmt.Sprintf("10.200.0.%d:8080", i+1)))
		if p := streams[i].next(t); p.GetEndpoint().GetTlsIdentity() == nil {
			t.Fatalf("pod %d: %v", i, p)
		}
	}
	nodes = append(nodes, startShard(t, c, "r2", Forward, nodes[0].gossip()))
	waitConverged(t, nodes, 3)
	moved := 0
	for i := range ringIPServices {
		if nodes[0].cluster.Ring().OwnerOfHash(ipHash(mustAddr(fmt.Sprintf("10.200.0.%d", i+1)))).Name == "r2" {
			moved++
		}
	}
	// The pods unmeshed: every stream, moved or not, gets the address without identity.
	b, err := os.ReadFile(filepath.Join(c.dir, "ips.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "ips.yaml"), []byte(strings.ReplaceAll(string(b), "linkerd.io/control-plane-ns: linkerd", "app: unmeshed")), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		p := s.next(t)
		for p.GetEndpoint().GetTlsIdentity() != nil {
			p = s.next(t)
		}
		if p.GetEndpoint().GetMetricLabels()["pod"] != fmt.Sprintf("ippod%d", i) {
			t.Fatalf("pod %d after the join: %v", i, p)
		}
	}
	t.Logf("%d of %d addresses moved to the new replica", moved, ringIPServices)
	if moved == 0 {
		t.Fatal("no address moved to the new replica: the test shows nothing")
	}
}

package shard

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// Client streams of the ring tests: each follows one service through one replica for the
// whole test, and records what it received and whether it ended.

// streamWatch is what every watcher records: under mu, the first failure.
type streamWatch struct {
	svc int
	mu  sync.Mutex
	err error
}

func (w *streamWatch) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// read receives from s until it ends, passing each message to apply under w.mu; the end of
// the stream while ctx is live, or apply's first error, is w's failure.
func read[T any](ctx context.Context, wg *sync.WaitGroup, w *streamWatch, s grpc.ServerStreamingClient[T], apply func(*T) error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			msg, err := s.Recv()
			w.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					w.err = fmt.Errorf("stream ended: %w", err)
				}
				w.mu.Unlock()
				return
			}
			if aerr := apply(msg); aerr != nil && w.err == nil {
				w.err = aerr
			}
			w.mu.Unlock()
		}
	}()
}

func servicePath(i int) string {
	ns, name := svcName(i)
	return fmt.Sprintf("%s.%s.svc.cluster.local:80", name, ns)
}

// watcher is a client Get stream following a service, with its view.
type watcher struct {
	streamWatch
	view *destclient.View
}

// keys returns the addresses the watcher holds as strings, sorted as strings (as truth is).
func (w *watcher) keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.view.Sorted() {
		out = append(out, a.String())
	}
	sort.Strings(out)
	return out
}

// watchAll opens a Get stream for every service through every node; a stream must never end
// while the test runs, and every update must apply cleanly (no lost or duplicated endpoint).
func watchAll(t *testing.T, ctx context.Context, wg *sync.WaitGroup, nodes []*shardNode) []*watcher {
	var ws []*watcher
	forEachStream(t, nodes, func(c pb.DestinationClient, i int) error {
		s, err := c.Get(ctx, &pb.GetDestination{Path: servicePath(i)})
		if err == nil {
			w := &watcher{streamWatch: streamWatch{svc: i}, view: destclient.NewView()}
			read(ctx, wg, &w.streamWatch, s, w.view.Apply)
			ws = append(ws, w)
		}
		return err
	})
	return ws
}

// forEachStream calls open for every service i with a client of every node.
func forEachStream(t *testing.T, nodes []*shardNode, open func(c pb.DestinationClient, i int) error) {
	t.Helper()
	for _, n := range nodes {
		client := pb.NewDestinationClient(testutil.DialGRPC(t, n.addr, n.dialOpts...))
		for i := range ringServices {
			if err := open(client, i); err != nil {
				t.Fatalf("open a stream for service %d on %s: %v", i, n.name, err)
			}
		}
	}
}

// waitTruth waits until every watcher holds exactly the truth, failing at once when a
// stream ended or received an update that does not apply.
func waitTruth(t *testing.T, c *cluster, ws []*watcher, within time.Duration) {
	t.Helper()
	testutil.EventuallyNoError(t, within, "every stream to hold the truth", func() error {
		bad := 0
		var example string
		for _, w := range ws {
			if err := w.failure(); err != nil {
				t.Fatalf("service %d: %v", w.svc, err)
			}
			if got, want := w.keys(), c.truth(w.svc); strings.Join(got, ",") != strings.Join(want, ",") {
				bad++
				example = fmt.Sprintf("service %d holds %v, want %v", w.svc, got, want)
			}
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d streams differ from the truth; e.g. %s", bad, len(ws), example)
		}
		return nil
	})
}

// profileWatcher is a client GetProfile stream following a service, with the profiles it
// received.
type profileWatcher struct {
	streamWatch
	profiles []*pb.DestinationProfile
}

// check reports what is wrong with the stream: it ended, or it has not received exactly one
// profile with the service's name (the profile of these services never changes, and a
// replica sends a profile only when it changes, also across a handover).
func (w *profileWatcher) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns, name := svcName(w.svc)
	switch {
	case w.err != nil:
		return fmt.Errorf("profile of service %d: %w", w.svc, w.err)
	case len(w.profiles) != 1:
		return fmt.Errorf("service %d: %d profiles, want 1", w.svc, len(w.profiles))
	case w.profiles[0].GetFullyQualifiedName() != name+"."+ns+".svc.cluster.local":
		return fmt.Errorf("service %d: profile %v", w.svc, w.profiles[0])
	}
	return nil
}

// watchProfiles opens a GetProfile stream for every service through every node.
func watchProfiles(t *testing.T, ctx context.Context, wg *sync.WaitGroup, nodes []*shardNode) []*profileWatcher {
	var ws []*profileWatcher
	forEachStream(t, nodes, func(c pb.DestinationClient, i int) error {
		s, err := c.GetProfile(ctx, &pb.GetDestination{Path: servicePath(i)})
		if err == nil {
			w := &profileWatcher{streamWatch: streamWatch{svc: i}}
			read(ctx, wg, &w.streamWatch, s, func(p *pb.DestinationProfile) error {
				w.profiles = append(w.profiles, p)
				return nil
			})
			ws = append(ws, w)
		}
		return err
	})
	return ws
}

// waitProfiles waits until every profile stream holds its one profile, failing at once when
// one ended.
func waitProfiles(t *testing.T, ws []*profileWatcher) {
	t.Helper()
	testutil.EventuallyNoError(t, 20*time.Second, "every profile stream to hold its profile", func() error {
		for _, w := range ws {
			if err := w.check(); err != nil {
				if w.failure() != nil {
					t.Fatal(err)
				}
				return err
			}
		}
		return nil
	})
}

// waitRelayed waits until each node in clients relays exactly the streams (perService per
// service) of the services it does not own, and the others relay none: so every stream
// follows the ring.
func waitRelayed(t *testing.T, nodes, clients []*shardNode, perService int) {
	t.Helper()
	testutil.EventuallyNoError(t, 20*time.Second, "the streams to follow the ring", func() error {
		for _, n := range nodes {
			want := 0
			if slices.Contains(clients, n) {
				for i := range ringServices {
					ns, name := svcName(i)
					if n.cluster.Ring().Owner(ns+"/"+name).Name != n.name {
						want += perService
					}
				}
			}
			if got := promtest.ToFloat64(n.replica.m.forwarded); int(got) != want {
				return fmt.Errorf("%s relays %v streams, want %d", n.name, got, want)
			}
		}
		return nil
	})
}

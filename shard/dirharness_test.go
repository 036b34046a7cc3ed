package shard

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	"github.com/meridian-mesh/meridian/shard/source"
)

// dirEnv is a replica on the directory source of a directory of manifests (a copy of a
// testdata fixture), serving gRPC on 127.0.0.1, and a client connected to it.
type dirEnv struct {
	t       *testing.T
	dir     string
	replica *Replica
	client  pb.DestinationClient
}

// newDirEnv starts a replica configured by cfg on a copy of the manifests of fixture (a
// directory under testdata; "" for none) and waits until it is ready.
func newDirEnv(t *testing.T, cfg Config, fixture string) *dirEnv {
	t.Helper()
	dir := t.TempDir()
	if fixture != "" {
		entries, err := os.ReadDir(filepath.Join("testdata", fixture))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if filepath.Ext(e.Name()) != ".yaml" {
				continue
			}
			b, err := os.ReadFile(filepath.Join("testdata", fixture, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	log := zaptest.NewLogger(t)
	dcfg := source.DefaultDirConfig(dir)
	dcfg.Debounce, dcfg.Rescan = 20*time.Millisecond, 200*time.Millisecond
	src := source.NewDirWithConfig(dcfg, log)
	r, client := startReplica(t, cfg, Deps{Source: src, Registerer: prometheus.NewRegistry(), Logger: log}, 10*time.Second)
	if errs := src.Errors(); len(errs) > 0 {
		t.Fatalf("the fixture does not load: %v", errs)
	}
	return &dirEnv{t: t, dir: dir, replica: r, client: client}
}

// write replaces (or creates) the manifest file name.
func (e *dirEnv) write(name, content string) {
	e.t.Helper()
	manifesttest.WriteAtomic(e.t, filepath.Join(e.dir, name), content)
}

// recvStream reads a server stream on one goroutine, so that a test can wait for a message
// with a deadline, or check that none comes, without losing any.
type recvStream[T any] struct {
	c   chan *T
	err chan error
}

func newRecvStream[T any](s grpc.ServerStreamingClient[T]) *recvStream[T] {
	return newRecvStreamSize(s, 1024)
}

// newRecvStreamSize is newRecvStream with room for size messages not yet taken.
func newRecvStreamSize[T any](s grpc.ServerStreamingClient[T], size int) *recvStream[T] {
	rs := &recvStream[T]{c: make(chan *T, size), err: make(chan error, 1)}
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				rs.err <- err
				return
			}
			rs.c <- m
		}
	}()
	return rs
}

// next returns the next message, failing the test when the stream ends or none arrives
// within 10s.
func (rs *recvStream[T]) next(t *testing.T) *T {
	t.Helper()
	select {
	case m := <-rs.c:
		return m
	case err := <-rs.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return nil
}

// end returns the error the stream ends with, failing the test when it sends a message
// instead, or goes on for 10s.
func (rs *recvStream[T]) end(t *testing.T) error {
	t.Helper()
	select {
	case m := <-rs.c:
		t.Fatalf("a message instead of the end of the stream: %v", m)
	case err := <-rs.err:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end within 10s")
	}
	return nil
}

// quiet fails the test when a message arrives within d.
func (rs *recvStream[T]) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-rs.c:
		t.Fatalf("unexpected message %v", m)
	case err := <-rs.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(d):
	}
}

// profile opens a GetProfile stream for path with the context token, alive until the test
// ends.
func (e *dirEnv) profile(path, token string) *recvStream[pb.DestinationProfile] {
	e.t.Helper()
	return openStream(e, e.client.GetProfile, path, token)
}

// get opens a Get stream for path with the context token, alive until the test ends.
func (e *dirEnv) get(path, token string) *recvStream[pb.Update] {
	e.t.Helper()
	return openStream(e, e.client.Get, path, token)
}

// openStream opens the stream of call (a method of e's client) for path with the context
// token, alive until the test ends.
func openStream[T any](e *dirEnv, call func(context.Context, *pb.GetDestination, ...grpc.CallOption) (grpc.ServerStreamingClient[T], error), path, token string) *recvStream[T] {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e.t.Cleanup(cancel)
	s, err := call(ctx, &pb.GetDestination{Scheme: "k8s", Path: path, ContextToken: token})
	if err != nil {
		e.t.Fatal(err)
	}
	return newRecvStream(s)
}

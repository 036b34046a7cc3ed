package shard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// The benchmarks here measure what a stream costs a replica: the heap per open stream (the
// clients run in a child process of the test binary, so that only the replicas' heap is
// counted) and the allocations of serving and relaying a stream's messages.

const (
	benchNS    = "bench"
	benchWidth = 100 // endpoints per service, as in the 5,000 x 100 cluster
)

// benchReplica is a replica serving gRPC on 127.0.0.1, fed by a pushSource.
type benchReplica struct {
	src  *pushSource
	rep  *Replica
	addr string
}

// startBenchReplica starts a replica on lis; with ms, as a member of a static ring. It stops
// when tb ends.
func startBenchReplica(tb testing.TB, ms Membership, lis net.Listener) *benchReplica {
	tb.Helper()
	src := newPushSource()
	reg := prometheus.NewRegistry()
	r, err := NewReplica(DefaultConfig(), Deps{Source: src, Membership: ms, Registerer: reg, Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	var opts []grpc.ServerOption
	if os.Getenv("MERIDIAN_STREAMMEM_POOLED") == "" {
		opts = ServerOptions()
	}
	gs := grpcserver.New(reg, opts...)
	r.Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, fn := range []func(context.Context) error{
		r.Run,
		func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(ctx) }()
	}
	tb.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-src.ready:
	case <-time.After(10 * time.Second):
		tb.Fatal("source not started")
	}
	return &benchReplica{src: src, rep: r, addr: lis.Addr().String()}
}

// benchSlice is service i's slice at generation gen: benchWidth endpoints, whose addresses
// move by benchWidth with each generation (so that consecutive generations share none).
func benchSlice(i int, name string, gen int) *translator.EndpointSlice {
	eps := make([]epSpec, benchWidth)
	for j := range eps {
		id := j + (gen%2)*benchWidth
		eps[j] = epSpec{ip: fmt.Sprintf("10.%d.%d.%d", i/250%250, i%250, id+1), ready: true}
	}
	return sliceObj(benchNS, name, name+"-a", 8080, eps...)
}

// benchCluster starts the replicas of a benchmark. With relayed, two in a static ring: the
// replica clients connect to ("a", front) relays to the owner of n services ("b"); else one
// replica without a ring, which is both. Each service has benchWidth endpoints; the names
// are returned once every service's snapshot is published.
func benchCluster(tb testing.TB, relayed bool, n int) (front, owner *benchReplica, names []string) {
	tb.Helper()
	la, lb := testutil.Listen(tb), testutil.Listen(tb)
	var r *ring.Ring
	if relayed {
		members := []ring.Member{{Name: "a", Addr: la.Addr().String()}, {Name: "b", Addr: lb.Addr().String()}}
		r = ring.Build(members, ring.DefaultHashConfig())
		front = startBenchReplica(tb, staticMembership{r, members[0]}, la)
		owner = startBenchReplica(tb, staticMembership{r, members[1]}, lb)
	} else {
		_ = la.Close()
		owner = startBenchReplica(tb, nil, lb)
		front = owner
	}
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("svc-%d", i)
		if r != nil && r.OwnerOfHash(NewServiceKey(benchNS, name).Hash()).Name != "b" {
			continue
		}
		names = append(names, name)
		owner.src.OnService(svcObj(benchNS, name), false)
		owner.src.OnEndpointSlice(benchSlice(len(names)-1, name, 0), false)
	}
	store := owner.rep.Store()
	testutil.Eventually(tb, time.Minute, "every service published", func() bool {
		for _, name := range names {
			if s := store.Load(snapshot.Key{Namespace: benchNS, Name: name, Port: 80}); s == nil || s.Set.Len() != benchWidth {
				return false
			}
		}
		return true
	})
	return front, owner, names
}

func benchPath(name string) string { return name + "." + benchNS + ".svc.cluster.local:80" }

// heapAfterGC is the live heap after a forced collection, as the bench reads a replica's.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// writeHeapProfile saves the heap profile (as of the last collection) to
// $MERIDIAN_STREAMMEM_PROFILE-{local,relayed}-suffix when that is set (to see where a
// stream's bytes go).
func writeHeapProfile(tb testing.TB, relayed bool, suffix string) {
	base := os.Getenv("MERIDIAN_STREAMMEM_PROFILE")
	if base == "" {
		return
	}
	f, err := os.Create(base + map[bool]string{false: "-local-", true: "-relayed-"}[relayed] + suffix)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

// streamClientEnv tells the test binary to be the client process of BenchmarkStreamMemory:
// "addr|connections|streams|method|name,name,...", method being get or profile.
const streamClientEnv = "MERIDIAN_STREAMMEM_CLIENT"

// TestStreamClientProcess is the client process of BenchmarkStreamMemory, not a test: it
// opens the streams (Get or GetProfile), prints "ready" once each has received its first
// message, keeps reading until its stdin closes, then ends them.
func TestStreamClientProcess(t *testing.T) {
	spec := os.Getenv(streamClientEnv)
	if spec == "" {
		t.Skip("the client process of BenchmarkStreamMemory")
	}
	f := strings.SplitN(spec, "|", 5)
	if len(f) != 5 {
		t.Fatalf("%s: want addr|connections|streams|method|names", streamClientEnv)
	}
	nconn, err1 := strconv.Atoi(f[1])
	nstreams, err2 := strconv.Atoi(f[2])
	method := map[string]string{"get": pb.Destination_Get_FullMethodName, "profile": pb.Destination_GetProfile_FullMethodName}[f[3]]
	names := strings.Split(f[4], ",")
	if err1 != nil || err2 != nil || nconn < 1 || method == "" || len(names) == 0 {
		t.Fatalf("%s: bad spec %.40q", streamClientEnv, spec)
	}
	conns := make([]grpc.ClientConnInterface, nconn)
	for i := range conns {
		conns[i] = testutil.DialGRPC(t, f[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	first := make(chan error, nstreams)
	for i := range nstreams {
		s, err := conns[i%nconn].NewStream(ctx, destStreams[method], method)
		if err == nil {
			err = s.SendMsg(&pb.GetDestination{Scheme: "k8s", Path: benchPath(names[i%len(names)])})
		}
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m emptypb.Empty // any message: its fields are kept as unknown ones
			err := s.RecvMsg(&m)
			first <- err
			for err == nil {
				err = s.RecvMsg(&m)
			}
		}()
	}
	for range nstreams {
		if err := testutil.Recv(t, first, 2*time.Minute, "first update"); err != nil {
			t.Fatalf("stream: %v", err)
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startStreamClients runs the client process with streams streams of method ("get" or
// "profile") over conns connections to addr, spread over names, and returns once each
// stream has received its first message. stop ends the process and waits for it.
func startStreamClients(tb testing.TB, addr string, conns, streams int, method string, names []string) (stop func()) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestStreamClientProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d|%s|%s", streamClientEnv, addr, conns, streams, method, strings.Join(names, ",")))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	ready, read := make(chan bool, 1), make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- false
	}()
	stop = func() {
		_ = stdin.Close()
		<-read
		_ = cmd.Wait()
	}
	select {
	case ok := <-ready:
		if !ok {
			stop()
			tb.Fatal("stream client process exited before its streams were ready")
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		stop()
		tb.Fatal("stream client process not ready within 3m")
	}
	return stop
}

// BenchmarkStreamMemory reports the live heap each open Get stream adds to the replicas
// (bytes/stream), one stream per service of benchWidth endpoints, on 4 connections: local
// (a replica that owns the services) and relayed (a replica relaying to the owner; the
// figure is both replicas', so the relay's own share is relayed minus local).
func BenchmarkStreamMemory(b *testing.B) {
	const services = 1000
	for _, relayed := range []bool{false, true} {
		b.Run(map[bool]string{false: "local", true: "relayed"}[relayed], func(b *testing.B) {
			front, _, names := benchCluster(b, relayed, services)
			var perStream, perStream2 float64
			for b.Loop() {
				before := heapAfterGC()
				stop := startStreamClients(b, front.addr, 4, services, "get", names)
				after := heapAfterGC()
				writeHeapProfile(b, relayed, "gc1")
				after2 := heapAfterGC()
				writeHeapProfile(b, relayed, "gc2")
				perStream2 = (float64(after2) - float64(before)) / services
				stop()
				perStream = (float64(after) - float64(before)) / services
			}
			b.ReportMetric(perStream, "bytes/stream")
			b.ReportMetric(perStream2, "bytes/stream-2gc")
		})
	}
}

// BenchmarkRelay measures a Get served directly by the owner and relayed through another
// replica, with an in-process client over 127.0.0.1: stream opens a stream, receives its
// first update (benchWidth endpoints) and ends it; churn replaces every endpoint of the
// service and receives the Remove and the Add. The relay's own cost per op is relayed
// minus direct.
func BenchmarkRelay(b *testing.B) {
	for _, relayed := range []bool{false, true} {
		mode := map[bool]string{false: "direct", true: "relayed"}[relayed]
		front, owner, names := benchCluster(b, relayed, 1)
		client := pb.NewDestinationClient(testutil.DialGRPC(b, front.addr))
		req := &pb.GetDestination{Scheme: "k8s", Path: benchPath(names[0])}
		b.Run(mode+"/stream", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				s, err := client.Get(ctx, req)
				if err == nil {
					_, err = s.Recv()
				}
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(mode+"/churn", func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := client.Get(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Recv(); err != nil {
				b.Fatal(err)
			}
			gen := 0
			b.ReportAllocs()
			for b.Loop() {
				gen++
				owner.src.OnEndpointSlice(benchSlice(0, names[0], gen), false)
				for got := 0; got < 2; got++ { // the Remove of the old endpoints, the Add of the new
					if _, err := s.Recv(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkStorm measures a storm of new streams: per op, stormStreams Get and as many
// GetProfile streams are opened at once on 4 connections, each receives its first message
// (kept encoded, as the bench's clients scan it rather than decode it), and all end. A Get
// stream per service stays open throughout, as in the bench, so that the storm finds every
// service's set computed. "local": at one replica that owns their services; "relayed": at a
// replica that relays them to the owner (forward mode), both replicas in this process. ns/op
// divided by 2*stormStreams is a stream's cost to the in-process client and the replicas
// together.
func BenchmarkStorm(b *testing.B) {
	for _, relayed := range []bool{false, true} {
		b.Run(map[bool]string{false: "local", true: "relayed"}[relayed], func(b *testing.B) { benchStorm(b, relayed) })
	}
}

func benchStorm(b *testing.B, relayed bool) {
	const stormStreams = 1000
	front, _, names := benchCluster(b, relayed, stormStreams)
	conns := make([]grpc.ClientConnInterface, 4)
	for i := range conns {
		conns[i] = testutil.DialGRPC(b, front.addr)
	}
	// first opens a stream of method on conn and returns once its first message is in.
	first := func(ctx context.Context, conn grpc.ClientConnInterface, method string, req *pb.GetDestination) error {
		cs, err := conn.NewStream(ctx, destStreams[method], method, grpc.ForceCodecV2(relayCodec{}))
		if err != nil {
			return err
		}
		if err := cs.SendMsg(req); err != nil {
			return err
		}
		var m rawUpdate
		if err := cs.RecvMsg(&m); err != nil {
			return err
		}
		m.free()
		return nil
	}
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	for i, name := range names {
		cs, err := conns[i%4].NewStream(bg, &pb.Destination_ServiceDesc.Streams[0], pb.Destination_Get_FullMethodName, grpc.ForceCodecV2(relayCodec{}))
		if err == nil {
			err = cs.SendMsg(&pb.GetDestination{Scheme: "k8s", Path: benchPath(name)})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 2*stormStreams)
		for i := range 2 * stormStreams {
			method := map[bool]string{false: pb.Destination_Get_FullMethodName, true: pb.Destination_GetProfile_FullMethodName}[i%2 == 1]
			req := &pb.GetDestination{Scheme: "k8s", Path: benchPath(names[(i/2*7919)%stormStreams])}
			go func() { errs <- first(ctx, conns[i%4], method, req) }()
		}
		for range 2 * stormStreams {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		cancel()
	}
}

// stackInuse is the bytes of goroutine stacks in use after two forced collections: the
// first shrinks the stacks that use less than a quarter of theirs, and frees the stacks of
// goroutines that ended; the second gives the spans those leave empty back to the heap.
func stackInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}

// streamStackEnv makes the test binary the server process of BenchmarkStreamStack:
// "method|mode", method being get or profile, mode local or relayed.
const streamStackEnv = "MERIDIAN_STREAMSTACK_SERVER"

// TestStreamStackProcess is the server process of BenchmarkStreamStack, not a test: the
// replicas (benchCluster) in a process of their own, whose stack pools hold nothing from
// earlier work, and their clients in a child of it (startStreamClients). It prints the
// growth of the stacks in use per stream.
func TestStreamStackProcess(t *testing.T) {
	method, mode, ok := strings.Cut(os.Getenv(streamStackEnv), "|")
	if !ok {
		t.Skip("the server process of BenchmarkStreamStack")
	}
	const streams = 1000
	front, _, names := benchCluster(t, mode == "relayed", streams)
	before := stackInuse()
	stop := startStreamClients(t, front.addr, 4, streams, method, names)
	after := stackInuse()
	stop()
	fmt.Printf("stack-bytes/stream %.0f\n", (float64(after)-float64(before))/streams)
}

// BenchmarkStreamStack reports the goroutine stacks each open stream holds once it has sent
// its first message (stack-bytes/stream), for Get and GetProfile, served by the owner
// (local) or relayed (the figure is then both replicas': the relay's goroutine, its call's
// to the owner, and the owner's). A local stream's is gRPC's goroutine for it, 8 KiB when the
// stream's deepest call fits in it. A GetProfile stream's profile compared and encoded (or,
// relayed, decoded) by reflection below gRPC's send (or receive) path made it 16 KiB for
// good: the collector only halves a stack of which less than a quarter is in use, and a
// parked stream uses more than 4 KiB. The replicas run in a process of their own per figure,
// since freed stacks stay in the runtime's pools and would be counted as reused.
func BenchmarkStreamStack(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"local", "relayed"} {
		for _, method := range []string{"get", "profile"} {
			b.Run(mode+"/"+method, func(b *testing.B) {
				var per float64
				for b.Loop() {
					cmd := exec.Command(exe, "-test.run=^TestStreamStackProcess$", "-test.count=1", "-test.v")
					cmd.Env = append(os.Environ(), streamStackEnv+"="+method+"|"+mode)
					cmd.Stderr = os.Stderr
					out, err := cmd.Output()
					if err != nil {
						b.Fatalf("server process: %v", err)
					}
					_, v, ok := strings.Cut(string(out), "stack-bytes/stream ")
					if !ok {
						b.Fatalf("server process printed no figure: %.200q", out)
					}
					if per, err = strconv.ParseFloat(strings.Fields(v)[0], 64); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(per, "stack-bytes/stream")
			})
		}
	}
}

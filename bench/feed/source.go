package feed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/meridian-mesh/meridian/translator"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/shard/source"
)

// Source is a source.Source reading the bench driver's feed at an address (host:port). It
// keeps no copy of the cluster: objects go to the handler as they arrive, and Pod
// synthesizes pods from their names. EndpointSlices arrive in the slim form (as the
// Kubernetes source's transform makes them). When the handler is a source.ServiceFilter, the
// slices of services it does not want are dropped after their metadata is read: a replica
// pays for decoding only the slices it keeps.
type Source struct {
	addr   string
	log    *zap.Logger
	client *http.Client

	ran    atomic.Bool // Run was called
	synced atomic.Bool
	// want is the handler's service filter (nil: it wants every service), set by Run.
	want  atomic.Pointer[func(namespace, service string) bool]
	hello atomic.Pointer[Hello]
	token atomic.Uint64
	// done is closed when Run returns, failing pending replays.
	done chan struct{}

	mu      sync.Mutex
	waiters map[uint64]chan struct{}

	// shapes holds a projected pod of each shape (podShape) of the cluster the hello names,
	// from which Pod derives the others (translator.Pod.Variant).
	shapeMu sync.RWMutex
	shapeOf *Hello
	shapes  map[podShape]*translator.Pod
}

// podShape is what a synthesized pod shares with the others of its deployment: all but its
// name, node and address.
type podShape struct {
	namespace, deployment string
	meshed                bool
}

var (
	_ source.Source      = (*Source)(nil)
	_ source.ShareLoader = (*Source)(nil)
)

// NewSource returns a source reading the feed served at addr ("127.0.0.1:PORT"). log may be nil.
func NewSource(addr string, log *zap.Logger) *Source {
	if log == nil {
		log = zap.NewNop()
	}
	return &Source{
		addr:    addr,
		log:     log,
		client:  &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 2}},
		done:    make(chan struct{}),
		waiters: map[uint64]chan struct{}{},
	}
}

// Synced implements source.Source.
func (s *Source) Synced() bool { return s.synced.Load() }

// Pod synthesizes the pod ns/name from its name (the projection of gen.Pod), or returns nil
// when it is not one of the generated cluster's pods or the feed has not said hello yet. It
// projects one pod of each shape, and derives the others from it: a lookup is then one small
// copy, as a cache lookup of a real source is one read.
func (s *Source) Pod(ns, name string) *translator.Pod {
	h := s.hello.Load()
	if h == nil {
		return nil
	}
	dep, serial, ok := h.Cluster.ParsePodName(name)
	if !ok {
		return nil
	}
	k := podShape{namespace: ns, deployment: dep, meshed: h.Cluster.Meshed(name)}
	s.shapeMu.RLock()
	shape := s.shapes[k]
	if s.shapeOf != h {
		shape = nil
	}
	s.shapeMu.RUnlock()
	if shape == nil {
		if shape = translator.SlimPod(gen.Pod(h.Cluster, ns, name)); shape == nil {
			return nil
		}
		s.shapeMu.Lock()
		if s.shapeOf != h {
			s.shapeOf, s.shapes = h, map[podShape]*translator.Pod{}
		}
		s.shapes[k] = shape
		s.shapeMu.Unlock()
	}
	return shape.Variant(name, gen.NodeName(serial), []netip.Addr{gen.SerialAddr(serial)})
}

// Run implements source.Source: it reads the feed and hands every object to h until ctx ends
// (nil) or the feed fails (an error: the driver is gone or spoke nonsense). Run may be called
// once.
func (s *Source) Run(ctx context.Context, h source.Handler) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("feed: Run called twice")
	}
	defer close(s.done)
	err := s.run(ctx, h)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *Source) run(ctx context.Context, h source.Handler) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+"/watch", nil)
	if err != nil {
		return fmt.Errorf("feed %s: %w", s.addr, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("feed %s: %w", s.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("feed %s: %s: %s", s.addr, resp.Status, b)
	}
	r := NewReader(resp.Body)
	in := newInterner()
	var want func(namespace, service string) bool
	if f, ok := h.(source.ServiceFilter); ok {
		want = f.WantsService
		s.want.Store(&want)
	}
	for {
		t, p, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("feed %s: stream ended", s.addr)
			}
			return fmt.Errorf("feed %s: %w", s.addr, err)
		}
		ev, err := decode(t, p, in, want)
		if err != nil {
			return fmt.Errorf("feed %s: %w", s.addr, err)
		}
		if err := s.dispatch(ev, h); err != nil {
			return fmt.Errorf("feed %s: %w", s.addr, err)
		}
	}
}

func (s *Source) dispatch(ev Event, h source.Handler) error {
	if ev.Type != FrameHello && s.hello.Load() == nil {
		return fmt.Errorf("%s frame before hello", ev.Type)
	}
	switch ev.Type {
	case FrameHello:
		if s.hello.Load() != nil {
			return errors.New("second hello")
		}
		s.hello.Store(ev.Hello)
		s.log.Info("feed connected", zap.Uint64("subscriber", ev.Hello.Subscriber), zap.Int("services", ev.Hello.Cluster.Services))
	case FrameService, FrameServiceDeleted:
		h.OnService(ev.Service, ev.Type == FrameServiceDeleted)
	case FrameEndpointSlice, FrameEndpointSliceDeleted:
		if ev.Skipped {
			return nil
		}
		if hello := s.hello.Load(); hello.DeliverPods && ev.Type == FrameEndpointSlice {
			es := ev.EndpointSlice
			for i := range es.Endpoints {
				if e := &es.Endpoints[i]; e.Pod != "" {
					if p := s.Pod(e.PodNamespace(es), e.Pod); p != nil {
						h.OnPod(p, false)
					}
				}
			}
		}
		h.OnEndpointSlice(ev.EndpointSlice, ev.Type == FrameEndpointSliceDeleted)
	case FrameSynced:
		s.synced.Store(true)
	case FrameReplayDone:
		s.mu.Lock()
		c, ok := s.waiters[ev.Token]
		delete(s.waiters, ev.Token)
		s.mu.Unlock()
		if ok {
			close(c)
		}
	}
	return nil
}

// Replay asks the driver to send the whole current state again, through the same ordered
// stream, and returns once the handler given to Run has received all of it (or ctx ends, or
// the feed ends).
func (s *Source) Replay(ctx context.Context) error { return s.replay(ctx, nil) }

// Gain implements source.ShareLoader: it asks the driver for the state of the services the
// handler wants now and did not before (g.Before), only, as the Kubernetes source lists only
// the gained share, and returns once the handler has received it. The cluster's services are
// known from the hello (gen.Config), so the source names them by index.
func (s *Source) Gain(ctx context.Context, g source.Gained) error {
	h := s.hello.Load()
	if h == nil {
		return errors.New("feed: gain before the feed connected")
	}
	var want func(string, string) bool
	if w := s.want.Load(); w != nil {
		want = *w
	}
	cfg := h.Cluster
	only := make([]byte, (cfg.Services+7)/8)
	gained := 0
	for i := range cfg.Services {
		ns, name := cfg.Namespace(i), gen.ServiceName(i)
		if (want == nil || want(ns, name)) && (g.Before == nil || !g.Before(ns, name)) {
			only[i/8] |= 1 << (i % 8)
			gained++
		}
	}
	if gained == 0 {
		return nil
	}
	return s.replay(ctx, only)
}

// Release implements source.ShareLoader: the source keeps nothing to release.
func (s *Source) Release() {}

// replay asks the driver for the whole state (only nil) or that of the services whose bits
// only sets, and waits until the handler has received it.
func (s *Source) replay(ctx context.Context, only []byte) error {
	h := s.hello.Load()
	if h == nil {
		return errors.New("feed: replay before the feed connected")
	}
	tok := s.token.Add(1)
	c := make(chan struct{})
	s.mu.Lock()
	s.waiters[tok] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, tok)
		s.mu.Unlock()
	}()
	u := "http://" + s.addr + "/replay?subscriber=" + strconv.FormatUint(h.Subscriber, 10) + "&token=" + strconv.FormatUint(tok, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(only))
	if err != nil {
		return fmt.Errorf("feed replay: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("feed replay: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("feed replay: %s: %s", resp.Status, b)
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return errors.New("feed replay: the feed ended")
	}
}

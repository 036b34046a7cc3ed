package feed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/bench/gen"
)

// DefaultQueueFrames bounds each subscriber's queue of change frames.
const DefaultQueueFrames = 8192

// maxReplayBitmap bounds a partial replay's bitmap: 8 Mi services.
const maxReplayBitmap = 1 << 20

// ServerConfig configures a Server.
type ServerConfig struct {
	// QueueFrames bounds each subscriber's frame queue; when it is full the subscriber's
	// queued frames are dropped and it is sent the whole state instead.
	QueueFrames int
	// DeliverPods is passed to sources in the Hello (see Hello.DeliverPods).
	DeliverPods bool
}

// DefaultServerConfig returns the defaults.
func DefaultServerConfig() ServerConfig { return ServerConfig{QueueFrames: DefaultQueueFrames} }

// Server serves a gen.Cluster to feed sources and applies churn to it. Its methods are safe
// for concurrent use.
type Server struct {
	cfg ServerConfig
	log *zap.Logger

	// mu guards the truth and every subscriber's resync state and tokens; the truth changes
	// and is queued to subscribers under it, so every queue is in change order.
	mu      sync.Mutex
	cluster *gen.Cluster
	subs    map[uint64]*subscriber
	nextID  uint64
	resyncs uint64

	wg sync.WaitGroup // stream handlers
}

type subscriber struct {
	id     uint64
	frames chan []byte   // encoded change frames, shared by all subscribers: read only
	wake   chan struct{} // one-slot: resync or tokens pending
	// Guarded by Server.mu:
	resync bool     // send the whole state before any further frame
	tokens []uint64 // replay tokens to acknowledge after the next whole state
	// only is the union of the partial replays pending (a bitmap of service indices, nil for
	// none): the state of those services is sent after the frames queued before it was taken,
	// and then partialTokens are acknowledged. A whole state pending (resync) takes them over.
	only          []byte
	partialTokens []uint64
}

// NewServer returns a server of cluster, which it owns from now on: read it with Read.
func NewServer(cluster *gen.Cluster, cfg ServerConfig, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.QueueFrames < 1 {
		cfg.QueueFrames = DefaultQueueFrames
	}
	return &Server{cfg: cfg, log: log, cluster: cluster, subs: map[uint64]*subscriber{}}
}

// Read calls fn with the truth, which must not be kept or modified after fn returns. Churn
// waits while fn runs.
func (s *Server) Read(fn func(*gen.Cluster)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.cluster)
}

// Subscribers returns the number of connected sources.
func (s *Server) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Resyncs returns how many times a subscriber's full queue made the server send it the whole
// state.
func (s *Server) Resyncs() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resyncs
}

// Apply makes one churn change (gen.Cluster.Apply), queues the changed slice to every
// subscriber and returns the change and the time it was made. It never blocks on a
// subscriber. pre, when not nil, is called under the server's lock after the change and
// before it is sent, so that the caller can record it before any subscriber can see it.
func (s *Server) Apply(rng *rand.Rand, busy func(uint32) bool, pre func(gen.Change, time.Time)) (gen.Change, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, err := s.cluster.Apply(rng, busy)
	if err != nil {
		return ch, time.Time{}, err
	}
	at := time.Now()
	if pre != nil {
		pre(ch, at)
	}
	frame, err := AppendEndpointSlice(nil, s.cluster.EndpointSlice(ch.Service, ch.Slice), false)
	if err != nil {
		return ch, at, err
	}
	for _, sub := range s.subs {
		if sub.resync {
			continue // the whole state it is about to get includes this change
		}
		select {
		case sub.frames <- frame:
		default:
			sub.resync = true
			s.resyncs++
			poke(sub.wake)
		}
	}
	return ch, at, nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Handler returns the HTTP handler: GET /watch and POST /replay.
func (s *Server) Handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /watch", func(w http.ResponseWriter, r *http.Request) { s.watch(ctx, w, r) })
	mux.HandleFunc("POST /replay", s.replay)
	return mux
}

// Serve serves the handler on lis until ctx ends, then closes every stream and waits for
// their handlers.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	hs := &http.Server{Handler: s.Handler(ctx), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx) // watch handlers end with ctx
	_ = hs.Close()
	if err == nil {
		err = <-errc
	}
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// replay asks for the whole state (an empty body), or for the state of some services (a body:
// a bitmap of service indices, bit i%8 of byte i/8 for service i), to be sent to subscriber
// ID on its stream, followed by the acknowledgement of token N.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	id, err1 := strconv.ParseUint(r.URL.Query().Get("subscriber"), 10, 64)
	tok, err2 := strconv.ParseUint(r.URL.Query().Get("token"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		http.Error(w, "replay: want ?subscriber=ID&token=N: "+err.Error(), http.StatusBadRequest)
		return
	}
	only, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxReplayBitmap))
	if err != nil {
		http.Error(w, "replay: read the bitmap of services: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if n := (s.cluster.Services() + 7) / 8; len(only) > n {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("replay: a bitmap of %d bytes, for %d services (at most %d bytes)", len(only), s.cluster.Services(), n), http.StatusBadRequest)
		return
	}
	sub, ok := s.subs[id]
	if ok {
		if len(sub.tokens)+len(sub.partialTokens) >= 1024 {
			s.mu.Unlock()
			http.Error(w, "replay: too many replays pending", http.StatusTooManyRequests)
			return
		}
		switch {
		case len(only) == 0 || sub.resync: // the whole state, or one that is coming anyway
			sub.resync = true
			sub.tokens = append(sub.tokens, tok)
		default:
			if len(sub.only) < len(only) {
				sub.only = append(sub.only, make([]byte, len(only)-len(sub.only))...)
			}
			for i, b := range only {
				sub.only[i] |= b
			}
			sub.partialTokens = append(sub.partialTokens, tok)
		}
		poke(sub.wake)
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, fmt.Sprintf("replay: no subscriber %d", id), http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) watch(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	s.mu.Lock()
	s.nextID++
	sub := &subscriber{id: s.nextID, frames: make(chan []byte, s.cfg.QueueFrames), wake: make(chan struct{}, 1), resync: true}
	s.subs[sub.id] = sub
	cfg := s.cluster.Config()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sub.id)
		s.mu.Unlock()
	}()
	log := s.log.With(zap.Uint64("subscriber", sub.id), zap.String("remote", r.RemoteAddr))
	log.Debug("feed subscriber connected")

	w.Header().Set("Content-Type", "application/x-meridian-feed")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := bw.Write(AppendHello(nil, Hello{Subscriber: sub.id, Cluster: cfg, DeliverPods: s.cfg.DeliverPods})); err != nil {
		return
	}
	first := true
	rctx := r.Context()
	for {
		s.mu.Lock()
		if sub.resync {
			// Drop what is queued (the state includes it) and take the state; frames queued
			// from now on are newer than it. It includes what partial replays asked for.
			for len(sub.frames) > 0 {
				<-sub.frames
			}
			sub.resync = false
			tokens := append(sub.tokens, sub.partialTokens...)
			sub.tokens, sub.only, sub.partialTokens = nil, nil, nil
			state := s.cluster.Clone()
			s.mu.Unlock()
			if err := writeState(bw, state); err != nil {
				log.Debug("feed subscriber gone", zap.Error(err))
				return
			}
			var tail []byte
			if first {
				tail = AppendFrame(tail, FrameSynced, nil)
				first = false
			}
			for _, t := range tokens {
				tail = AppendReplayDone(tail, t)
			}
			if _, err := bw.Write(tail); err != nil {
				return
			}
			continue
		}
		if sub.only != nil {
			if err := s.writePartial(bw, sub); err != nil {
				log.Debug("feed subscriber gone", zap.Error(err))
				return
			}
			continue
		}
		s.mu.Unlock()
		if len(sub.frames) == 0 {
			if err := bw.Flush(); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			_ = bw.Flush()
			return
		case <-rctx.Done():
			return
		case <-sub.wake:
		case f := <-sub.frames:
			if _, err := bw.Write(f); err != nil {
				return
			}
		}
	}
}

// writePartial, called with s.mu held (it releases it), sends sub the frames queued so far,
// then the state of the services of its pending partial replays, taken with the lock held
// (so those frames are older than it, and any queued after are newer), then acknowledges
// their tokens.
func (s *Server) writePartial(bw *bufio.Writer, sub *subscriber) error {
	only, tokens := sub.only, sub.partialTokens
	sub.only, sub.partialTokens = nil, nil
	older := len(sub.frames)
	state, err := appendServices(nil, s.cluster, only)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for range older {
		if _, err := bw.Write(<-sub.frames); err != nil {
			return err
		}
	}
	for _, t := range tokens {
		state = AppendReplayDone(state, t)
	}
	_, err = bw.Write(state)
	return err
}

// appendServices appends the frames of the Services, and their EndpointSlices, of c whose
// index is set in the bitmap only.
func appendServices(buf []byte, c *gen.Cluster, only []byte) ([]byte, error) {
	cfg := c.Config()
	var err error
	for i := range c.Services() {
		if i/8 >= len(only) || only[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		if buf, err = AppendService(buf, cfg.Service(i), false); err != nil {
			return buf, err
		}
		for k := range c.Slices(i) {
			if buf, err = AppendEndpointSlice(buf, c.EndpointSlice(i, k), false); err != nil {
				return buf, err
			}
		}
	}
	return buf, nil
}

// writeState writes every Service and EndpointSlice of c.
func writeState(w *bufio.Writer, c *gen.Cluster) error {
	cfg := c.Config()
	var buf []byte
	var err error
	for i := range c.Services() {
		buf, err = AppendService(buf[:0], cfg.Service(i), false)
		if err != nil {
			return err
		}
		for k := range c.Slices(i) {
			buf, err = AppendEndpointSlice(buf, c.EndpointSlice(i, k), false)
			if err != nil {
				return err
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

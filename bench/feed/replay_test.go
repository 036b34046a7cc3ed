package feed

import (
	"bytes"
	"context"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/shard/source"
)

// TestGain: when the handler starts wanting more services, Gain delivers the slices of the
// services it gained, and none of those it had; with churn going on around it, the handler
// ends at the truth (the gained state is sent after the changes queued before it).
func TestGain(t *testing.T) {
	var wanted atomic.Pointer[map[string]bool]
	set := func(idx ...int) map[string]bool {
		m := map[string]bool{}
		for _, i := range idx {
			m[gen.ServiceName(i)] = true
		}
		wanted.Store(&m)
		return m
	}
	before := set(1)
	f := startFiltered(t, DefaultServerConfig(), func(_, svc string) bool { return (*wanted.Load())[svc] })
	f.converged(t, "initial state")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gain := func(before map[string]bool) {
		t.Helper()
		if err := f.src.Gain(ctx, source.Gained{Before: func(_, svc string) bool { return before[svc] }}); err != nil {
			t.Fatal(err)
		}
	}

	f.rec.mu.Lock()
	clear(f.rec.sliceDeliveries)
	f.rec.mu.Unlock()
	before, now := before, set(1, 2, 3)
	gain(before)
	f.rec.mu.Lock()
	got := maps.Clone(f.rec.sliceDeliveries)
	f.rec.mu.Unlock()
	// 150 endpoints a service: two slices each.
	if got[gen.ServiceName(1)] != 0 || got[gen.ServiceName(2)] != 2 || got[gen.ServiceName(3)] != 2 || len(got) != 2 {
		t.Fatalf("Gain delivered slices %v, want two each of svc-2 and svc-3 only", got)
	}
	f.converged(t, "after Gain")

	// Gain during churn; nothing gained returns at once.
	var wg sync.WaitGroup
	var churnErr error
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(5, 6))
		for range 2000 {
			if _, _, err := f.srv.Apply(rng, nil, nil); err != nil {
				churnErr = err
				return
			}
		}
	})
	before, now = now, set(1, 2, 3, 4, 5)
	gain(before)
	gain(now)
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	f.converged(t, "after Gain during churn")
}

// gatedWriter is an http.ResponseWriter (and Flusher) whose Write blocks while the gate is
// closed, keeping what is written.
type gatedWriter struct {
	mu      sync.Mutex
	open    chan struct{} // closed: writes go through
	waiting bool          // a write waits for the gate
	buf     bytes.Buffer
	hdr     http.Header
}

func (w *gatedWriter) Header() http.Header { return w.hdr }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Flush()              {}
func (w *gatedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	open := w.open
	w.waiting = true
	w.mu.Unlock()
	<-open
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waiting = false
	return w.buf.Write(p)
}

func (w *gatedWriter) setOpen(o bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if o {
		close(w.open)
	} else {
		w.open = make(chan struct{})
	}
}

// TestPartialReplayAfterQueuedFrames: the state a partial replay sends comes after the
// changes queued before it was taken, so that the subscriber ends at the truth. The stream's
// writes are held while changes to the only service queue, then the replay is asked for.
func TestPartialReplayAfterQueuedFrames(t *testing.T) {
	cfg := smallConfig()
	cfg.Services = 1
	cl, err := gen.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(cl, DefaultServerConfig(), zaptest.NewLogger(t))
	w := &gatedWriter{open: make(chan struct{}), hdr: http.Header{}}
	close(w.open)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/watch", nil)
	var wg sync.WaitGroup
	wg.Go(func() { srv.watch(ctx, w, req) })
	defer func() { cancel(); wg.Wait() }()
	// The initial state must be written before the writes are held: a change made while
	// it is still being taken is part of it, not a frame after it.
	testutil.Eventually(t, 10*time.Second, "the initial state", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		r := NewReader(bytes.NewReader(w.buf.Bytes()))
		for {
			ft, _, err := r.Next()
			if err != nil {
				return false
			}
			if ft == FrameSynced {
				return true
			}
		}
	})
	rng := rand.New(rand.NewPCG(1, 2))
	apply := func() {
		if _, _, err := srv.Apply(rng, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A bitmap longer than the cluster's services need is refused, and changes nothing.
	bad := httptest.NewRecorder()
	long := make([]byte, (srv.cluster.Services()+7)/8+1)
	srv.replay(bad, httptest.NewRequest(http.MethodPost, "/replay?subscriber=1&token=6", bytes.NewReader(long)))
	if bad.Code != http.StatusBadRequest || !strings.Contains(bad.Body.String(), "bitmap of") {
		t.Fatalf("replay with a %d-byte bitmap: %d %s, want 400", len(long), bad.Code, bad.Body)
	}
	// Hold the writes: the first change after it blocks the stream in its flush, the next
	// ones queue.
	w.setOpen(false)
	apply()
	testutil.Eventually(t, 10*time.Second, "the stream to block", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.waiting
	})
	for range 20 {
		apply()
	}
	srv.mu.Lock()
	for _, sub := range srv.subs {
		if n := len(sub.frames); n != 20 {
			t.Errorf("%d frames queued, want 20", n)
		}
	}
	srv.mu.Unlock()
	rec := httptest.NewRecorder()
	srv.replay(rec, httptest.NewRequest(http.MethodPost, "/replay?subscriber=1&token=7", bytes.NewReader([]byte{1})))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("replay: %d %s", rec.Code, rec.Body)
	}
	w.setOpen(true)
	var got bytes.Buffer
	testutil.Eventually(t, 10*time.Second, "the replay's acknowledgement", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		got.Reset()
		got.Write(w.buf.Bytes())
		return bytes.Contains(got.Bytes(), AppendReplayDone(nil, 7))
	})
	// After the initial state, the stream carries the change that blocked it, the 20 queued
	// before the replay, and then the replayed state (its Service and its two slices) and
	// the acknowledgement, last: older changes after the state would take the subscriber
	// back to older versions.
	var seq []FrameType
	r := NewReader(&got)
	for {
		ft, _, err := r.Next()
		if err != nil {
			break
		}
		seq = append(seq, ft)
	}
	synced := slices.Index(seq, FrameSynced)
	want := append(slices.Repeat([]FrameType{FrameEndpointSlice}, 21), FrameService, FrameEndpointSlice, FrameEndpointSlice, FrameReplayDone)
	if synced < 0 || !slices.Equal(seq[synced+1:], want) {
		t.Fatalf("frames after the initial state %v, want %v", seq[synced+1:], want)
	}
}

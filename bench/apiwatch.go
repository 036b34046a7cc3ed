package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// apiWatch is the harness's own watch of every EndpointSlice on the API server, read as the
// replicas read them (protobuf): for each churn write, the time from the API server's answer
// to its watch event. It is the API server's part of propagation, measured in the
// same run as the replicas' figure; what propagation adds to it is Meridian's part. A write
// whose event came before its answer counts from when the change was recorded, as
// propagation does. Its goroutine is owned by the kubeWorld (stop ends it and waits).
type apiWatch struct {
	client kubernetes.Interface
	log    *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
	broken atomic.Pointer[error] // why the watch stopped measuring, if it did

	mu       sync.Mutex
	marks    map[string]watchMark // resourceVersion -> what is known of it so far
	hist     *histogram
	timeline timeline
}

// watchMark is one write's times (UnixNano), each 0 until known.
type watchMark struct{ recorded, returned, seen int64 }

// startAPIWatch opens the watch from the API server's current resourceVersion (a one-item
// list gives it), so that it sees none of the objects already created.
func startAPIWatch(ctx context.Context, client kubernetes.Interface, log *zap.Logger) (*apiWatch, error) {
	l, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices for the API server's watch figures: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &apiWatch{client: client, log: log, cancel: cancel, done: make(chan struct{}),
		marks: map[string]watchMark{}, hist: newHistogram()}
	go a.run(ctx, l.ResourceVersion)
	return a, nil
}

// stop ends the watch and waits for its goroutine.
func (a *apiWatch) stop() {
	a.cancel()
	<-a.done
}

// run follows the watch until ctx ends, reopening it from the last resourceVersion seen when
// the API server ends it.
func (a *apiWatch) run(ctx context.Context, rv string) {
	defer close(a.done)
	for ctx.Err() == nil {
		wi, err := a.client.DiscoveryV1().EndpointSlices("").Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				a.fail(fmt.Errorf("watch EndpointSlices: %w", err))
			}
			return
		}
		for ev := range wi.ResultChan() {
			now := time.Now()
			switch ev.Type {
			case watch.Error:
				wi.Stop()
				if ctx.Err() == nil { // not the stream cut by stop
					a.fail(fmt.Errorf("watch EndpointSlices: %v", apierrors.FromObject(ev.Object)))
				}
				return
			case watch.Modified, watch.Added, watch.Deleted, watch.Bookmark:
				sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
				if !ok {
					continue
				}
				rv = sl.ResourceVersion
				if ev.Type != watch.Bookmark {
					a.seen(rv, now)
				}
			}
		}
		wi.Stop()
	}
}

func (a *apiWatch) fail(err error) {
	if a.broken.CompareAndSwap(nil, &err) {
		a.log.Warn("the API server's own watch stopped; its figures cover what it saw until then", zap.Error(err))
	}
}

// returned records a write's answer: the object's resourceVersion, when the change was
// recorded (before the request) and when the answer came.
func (a *apiWatch) returned(rv string, recorded, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.marks[rv]
	m.recorded, m.returned = recorded.UnixNano(), at.UnixNano()
	a.marks[rv] = a.complete(rv, m)
}

// seen records the watch event of resourceVersion rv.
func (a *apiWatch) seen(rv string, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.marks[rv]
	m.seen = at.UnixNano()
	a.marks[rv] = a.complete(rv, m)
}

// complete records m's latency once both its answer and its event are known, and forgets it.
// a.mu is held.
func (a *apiWatch) complete(rv string, m watchMark) watchMark {
	if m.returned == 0 || m.seen == 0 {
		return m
	}
	from := m.returned
	if m.seen < m.returned {
		from = m.recorded
	}
	d := time.Duration(m.seen - from)
	a.hist.record(d)
	a.timeline.record(time.Unix(0, from), d)
	delete(a.marks, rv)
	return watchMark{}
}

// settleWatch bounds how long fill waits for the events of writes already answered: the
// replicas have seen them by then (the run settled), so the harness's watch is at most a
// moment behind.
const settleWatch = 5 * time.Second

func (a *apiWatch) outstanding() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.outstandingLocked()
}

// outstandingLocked counts the writes answered whose event was not seen. a.mu is held.
func (a *apiWatch) outstandingLocked() int64 {
	var n int64
	for _, m := range a.marks {
		if m.returned != 0 {
			n++
		}
	}
	return n
}

// begin starts the figures of a run's churn anew at start: what an earlier run left is
// dropped.
func (a *apiWatch) begin(start time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.marks)
	a.hist = newHistogram()
	a.timeline.mu.Lock()
	a.timeline.start, a.timeline.secs = start, nil
	a.timeline.mu.Unlock()
}

// fill adds to res what was measured since begin: the latency quantiles, the seconds with a
// sample over SlowMs, and the writes whose event was not seen (a watch that stopped, or
// one still behind after settleWatch).
func (a *apiWatch) fill(res *RunResult) {
	deadline := time.Now().Add(settleWatch)
	for a.outstanding() > 0 && time.Now().Before(deadline) && a.broken.Load() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	res.APIWatchMissed = a.outstandingLocked()
	h := a.hist.h
	res.APIWatchSamples = h.TotalCount()
	if h.TotalCount() > 0 {
		res.APIWatchP50Ms, res.APIWatchP99Ms, res.APIWatchMaxMs = ms(h.ValueAtQuantile(50)), ms(h.ValueAtQuantile(99)), ms(h.Max())
	}
	res.APIWatchSlowSeconds = a.timeline.slowSeconds()
}

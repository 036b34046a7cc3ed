package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/puzpuzpuz/xsync/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
)

const (
	clusterDomain = "cluster.local"
	// maxReconnects bounds how often one stream reopens after it was closed.
	maxReconnects = 20
	// maxRedirectsAtOnce is how many redirects in a row a stream follows at once; it then
	// backs off before the next, from reconnectDelay doubling to maxRedirectDelay, until a
	// stream delivers something, as Meridian's proxy does (proxy/discovery: MaxRedirects,
	// then 100 ms doubling to 5 s): while the ring changes the replicas may name an owner that
	// is gone, or disagree about the owner, for as long as their failure detectors take.
	// Redirects do not count against maxReconnects.
	maxRedirectsAtOnce = 3
	reconnectDelay     = 100 * time.Millisecond
	maxRedirectDelay   = time.Second
)

// histogram is an HdrHistogram of durations in microseconds (1µs .. 10 min), safe for
// concurrent use.
type histogram struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func newHistogram() *histogram {
	return &histogram{h: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)}
}

func (h *histogram) record(d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	h.mu.Lock()
	_ = h.h.RecordValue(min(us, h.h.HighestTrackableValue()))
	h.mu.Unlock()
}

// timeline counts, per second of the run (by the time of the change), the latency samples,
// those over SlowMs, and the largest: whether a tail comes from a few stalls or from a steady
// backlog.
type timeline struct {
	mu    sync.Mutex
	start time.Time
	secs  []SecondLatency
}

// SlowMs is the latency above which timeline counts a sample as slow (the p99 target).
const SlowMs = 20

func (t *timeline) record(at time.Time, d time.Duration) {
	s := max(int(at.Sub(t.start)/time.Second), 0)
	ms := float64(d) / float64(time.Millisecond)
	t.mu.Lock()
	defer t.mu.Unlock()
	if s >= 24*3600 {
		return
	}
	for len(t.secs) <= s {
		t.secs = append(t.secs, SecondLatency{Second: len(t.secs)})
	}
	x := &t.secs[s]
	x.Samples++
	if ms > SlowMs {
		x.Slow++
	}
	x.MaxMs = max(x.MaxMs, ms)
}

// slowSeconds counts the seconds with a sample over SlowMs. t.mu must not be held.
func (t *timeline) slowSeconds() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.secs {
		if s.Slow > 0 {
			n++
		}
	}
	return n
}

// pendingChange is a change not yet seen by every stream of its service.
type pendingChange struct {
	// at is when the change was made (UnixNano): when it was sent to the feed, or when the
	// API server's answer to it came back (until then, when it was recorded).
	at   atomic.Int64
	kind gen.Kind
	left atomic.Int32 // measured streams still to see it
}

// stream is one Get (or GetProfile) stream and, for Get, the view its client holds.
type stream struct {
	svc     int
	profile bool
	measure bool // counts in propagation latency
	slot    int  // connection slot
	replica atomic.Int32

	mu   sync.Mutex
	view addrView
	// prev, from when the stream reopens until its first update, is the view it held before:
	// that update is the whole state, and what it changes from prev is what the stream saw
	// change (a change made while it was away is seen late, one seen before not seen twice).
	prev addrView

	opened     time.Time
	firstAt    time.Time     // written once before firstBatch is closed
	firstBatch chan struct{} // closed at the first message
	firstOnce  sync.Once
}

// load is the client side of a run: connections, streams and what they measured.
type load struct {
	pending    *xsync.MapOf[uint32, *pendingChange]
	changedAt  *xsync.MapOf[uint32, int64] // endpoint serial -> when it last changed (UnixNano)
	subsPerSvc []int32
	latency    *histogram
	storm      *histogram // every storm stream
	stormGets  *histogram // the storm's Get streams only (their first Add)
	timeline   timeline

	bytes, updates       atomic.Int64
	closed, closedByKill atomic.Int64
	applyErrors          atomic.Int64
	kinds                [8]atomic.Int64 // changes made, by gen.Kind
	redirects            atomic.Int64
	stormUnanswered      atomic.Int64
	firstErr             atomic.Pointer[error]

	paths []string // per service: its Get path
	// connMu guards conns and byAddr, which grow when a replica joins during churn.
	connMu sync.RWMutex
	conns  [][]*grpc.ClientConn // per replica (a joining one's empty until it is ready)
	byAddr map[string]int       // replica gRPC address -> index
	mu     sync.Mutex           // guards streams (the storm adds to it)
	dead   []atomic.Bool        // per replica: killed on purpose
	// ready, per replica: ready (its /ready said so). Streams moved off a killed replica go
	// to ready ones only, as a proxy reconnecting through the destination Service reaches
	// only the replicas that are its ready endpoints; redirects go to whichever one a
	// replica names.
	ready   []atomic.Bool
	streams []*stream
	wg      sync.WaitGroup
}

// setReplica makes replica i (at gRPC address addr, reached through conns) one that streams
// are opened on and redirects are followed to, in place of what i was before (a replica
// started again on another address); it returns the connections it replaced.
func (l *load) setReplica(i int, addr string, conns []*grpc.ClientConn) []*grpc.ClientConn {
	l.connMu.Lock()
	defer l.connMu.Unlock()
	if l.byAddr == nil {
		l.byAddr = map[string]int{}
	}
	for a, j := range l.byAddr {
		if j == i {
			delete(l.byAddr, a)
		}
	}
	l.byAddr[addr] = i
	old := l.conns[i]
	l.conns[i] = conns
	return old
}

// replicaAt returns the index of the replica at gRPC address addr.
func (l *load) replicaAt(addr string) (int, bool) {
	l.connMu.RLock()
	defer l.connMu.RUnlock()
	i, ok := l.byAddr[addr]
	return i, ok
}

func newLoad(cfg gen.Config, replicas int) *load {
	paths := make([]string, cfg.Services)
	for i := range paths {
		paths[i] = cfg.Authority(i, clusterDomain)
	}
	return &load{
		paths:      paths,
		pending:    xsync.NewMapOf[uint32, *pendingChange](),
		changedAt:  xsync.NewMapOf[uint32, int64](),
		subsPerSvc: make([]int32, cfg.Services),
		latency:    newHistogram(),
		storm:      newHistogram(),
		stormGets:  newHistogram(),
		dead:       make([]atomic.Bool, replicas),
		ready:      make([]atomic.Bool, replicas),
	}
}

// busy reports whether an endpoint has a change in flight (churn leaves it alone, so that
// every change is observable on its own).
func (l *load) busy(serial uint32) bool {
	_, ok := l.pending.Load(serial)
	return ok
}

// recordChange registers a change before any stream can see it.
func (l *load) recordChange(ch gen.Change, at time.Time) {
	l.recordChanged(ch, at)
	if int(ch.Kind) < len(l.kinds) {
		l.kinds[ch.Kind].Add(1)
	}
	n := l.subsPerSvc[ch.Service]
	if n == 0 || ch.Unseen {
		return // nobody to see it
	}
	p := &pendingChange{kind: ch.Kind}
	p.at.Store(at.UnixNano())
	p.left.Store(n)
	l.pending.Store(ch.New, p)
}

// changeReturned moves the time of a change recorded before its API request to the time the
// API server answered: propagation is measured from there. A stream that saw the change
// before then counts from when it was recorded.
func (l *load) changeReturned(ch gen.Change, at time.Time) {
	l.recordChanged(ch, at)
	if p, ok := l.pending.Load(ch.New); ok {
		p.at.Store(at.UnixNano())
	}
}

// missed returns the observations still outstanding.
func (l *load) missed() int64 {
	var n int64
	l.pending.Range(func(_ uint32, p *pendingChange) bool {
		n += int64(max(p.left.Load(), 0))
		return true
	})
	return n
}

func (l *load) observe(ap netip.AddrPort, wantAdd bool, now time.Time) {
	serial, ok := gen.AddrSerial(ap.Addr())
	if !ok {
		return
	}
	p, ok := l.pending.Load(serial)
	if !ok || p.kind.Removes() == wantAdd {
		return
	}
	at := time.Unix(0, p.at.Load())
	l.latency.record(now.Sub(at))
	l.timeline.record(at, now.Sub(at))
	if p.left.Add(-1) <= 0 {
		l.pending.Compute(serial, func(old *pendingChange, loaded bool) (*pendingChange, bool) {
			return old, loaded && old == p
		})
	}
}

func (l *load) fail(err error) {
	l.firstErr.CompareAndSwap(nil, &err)
}

// client returns the connection for a stream, moving it off a killed replica: to a live,
// ready one picked by the stream's connection slot, so that the connections of a killed
// replica spread over the others (each with its streams), as proxies' connections
// reconnecting through the destination Service's address do.
func (l *load) client(st *stream) (grpc.ClientConnInterface, int) {
	l.connMu.RLock()
	defer l.connMu.RUnlock()
	r := int(st.replica.Load())
	if l.dead[r].Load() || len(l.conns[r]) == 0 {
		live := make([]int, 0, len(l.conns))
		for i := range l.conns {
			if !l.dead[i].Load() && l.ready[i].Load() && len(l.conns[i]) > 0 {
				live = append(live, i)
			}
		}
		if len(live) > 0 {
			r = live[st.slot%len(live)]
		}
	}
	st.replica.Store(int32(r))
	cs := l.conns[r]
	return cs[st.slot%len(cs)], r
}

// run follows st until ctx ends, reopening it (bounded) when the server closes it, and
// following redirects (maxRedirectsAtOnce in a row at once, then after a delay).
func (l *load) run(ctx context.Context, st *stream) {
	defer l.wg.Done()
	redirects, delay := 0, reconnectDelay
	for attempt := 0; attempt <= maxReconnects; {
		c, r := l.client(st)
		owner, got, err := l.follow(ctx, st, c)
		if ctx.Err() != nil {
			return
		}
		if got {
			// It delivered: its reconnects and redirects start afresh, as a proxy's do.
			attempt, redirects, delay = 0, 0, reconnectDelay
		}
		wait := reconnectDelay
		if i, ok := l.replicaAt(owner); ok && status.Code(err) == codes.FailedPrecondition {
			// Redirected to the owner: reopen there (not a closed stream).
			l.redirects.Add(1)
			st.replica.Store(int32(i))
			if redirects++; redirects <= maxRedirectsAtOnce {
				continue
			}
			wait, delay = delay, min(2*delay, maxRedirectDelay)
		} else {
			attempt++
			if l.dead[r].Load() {
				l.closedByKill.Add(1)
			} else {
				l.closed.Add(1)
				if err != nil && status.Code(err) != codes.Unavailable {
					l.fail(err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// follow opens the stream and applies what it receives until it ends. owner is the address a
// redirect named, if any. It receives messages undecoded (frameCodec): a stream's first
// message is seen as soon as it has arrived, and the byte count is the messages' length. A
// Get update is read with addrView.applyEncoded; a GetProfile message is only counted.
func (l *load) follow(ctx context.Context, st *stream, cc grpc.ClientConnInterface) (owner string, got bool, _ error) {
	method := pb.Destination_Get_FullMethodName
	if st.profile {
		method = pb.Destination_GetProfile_FullMethodName
	}
	s, err := cc.NewStream(ctx, &serverStream, method, grpc.ForceCodecV2(frameCodec{}))
	if err != nil {
		return "", got, err
	}
	// An io.EOF from SendMsg means the stream has ended: RecvMsg returns its status.
	if err := s.SendMsg(&pb.GetDestination{Scheme: "k8s", Path: l.paths[st.svc]}); err != nil && !errors.Is(err, io.EOF) {
		return "", got, err
	}
	if err := s.CloseSend(); err != nil {
		return "", got, err
	}
	if !st.profile {
		st.reopened()
	}
	var f frame
	for {
		if err := s.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return "", got, nil
			}
			if v := s.Trailer().Get(destclient.OwnerTrailer); len(v) > 0 {
				owner = v[0]
			}
			return owner, got, err
		}
		got = true
		now := time.Now()
		st.firstOnce.Do(func() { st.firstAt = now; close(st.firstBatch) })
		b := f.bytes()
		l.bytes.Add(int64(len(b)))
		l.updates.Add(1)
		if !st.profile {
			err = l.applyGet(st, b, now)
		}
		f.free()
		if err != nil {
			l.applyErrors.Add(1)
			l.fail(err)
			return "", got, err
		}
	}
}

// reopened starts st's view afresh, as a proxy's starts when its stream reopens; what it held
// is kept in prev until its first update (unless a reopening before had no update: it has
// held nothing since).
func (st *stream) reopened() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.prev == nil {
		st.prev = st.view
	}
	st.view = addrView{}
}

// applyGet applies an encoded Get update to st's view, observing its changes if st is
// measured.
func (l *load) applyGet(st *stream, b []byte, now time.Time) error {
	var seen func(netip.AddrPort, bool)
	if st.measure {
		seen = func(ap netip.AddrPort, added bool) { l.observe(ap, added, now) }
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.prev == nil {
		return st.view.applyEncoded(b, seen)
	}
	// The first update of a reopened stream: the whole state, compared with what it held.
	if err := st.view.applyEncoded(b, nil); err != nil {
		return err
	}
	prev := st.prev
	st.prev = nil
	if seen == nil {
		return nil
	}
	for k := range st.view {
		if _, ok := prev[k]; !ok {
			seen(k.AddrPort(), true)
		}
	}
	for k := range prev {
		if _, ok := st.view[k]; !ok {
			seen(k.AddrPort(), false)
		}
	}
	return nil
}

// addrView is what the harness keeps of a Get stream's state: its addresses. A proxy keeps
// their metadata too, but the harness stands in for every proxy of a cluster in one process,
// where the decoded messages of 20,000 streams would take gigabytes and their decoding and
// garbage collection the CPU the replicas are measured on: it reads the addresses straight
// from the encoded updates (applyEncoded) and decodes none in the common case. Its keys hold
// no pointers, so the collector does not scan its millions of entries.
type addrView map[wire.AddrKey]struct{}

// apply applies one decoded update (applyEncoded's fallback), calling seen (when not nil) for each address added or removed. A
// Remove of an address not held is an error (the server sent a delta the client cannot have
// expected), as is a malformed address or an update of unknown kind, as in destclient.View.
func (v addrView) apply(u *pb.Update, seen func(ap netip.AddrPort, added bool)) error {
	switch x := u.GetUpdate().(type) {
	case *pb.Update_Add:
		for _, a := range x.Add.GetAddrs() {
			ap, err := wire.ToAddrPort(a.GetAddr())
			if err != nil {
				return fmt.Errorf("add: %w", err)
			}
			v[wire.KeyOf(ap)] = struct{}{}
			if seen != nil {
				seen(ap, true)
			}
		}
	case *pb.Update_Remove:
		for _, a := range x.Remove.GetAddrs() {
			ap, err := wire.ToAddrPort(a)
			if err != nil {
				return fmt.Errorf("remove: %w", err)
			}
			k := wire.KeyOf(ap)
			if _, ok := v[k]; !ok {
				return fmt.Errorf("remove of %s, which was never added", ap)
			}
			delete(v, k)
			if seen != nil {
				seen(ap, false)
			}
		}
	case *pb.Update_NoEndpoints:
		clear(v)
	default:
		return fmt.Errorf("update of unknown kind %T", u.GetUpdate())
	}
	return nil
}

// mismatches counts the Get streams whose view differs from truth (service -> addresses).
func (l *load) mismatches(truth map[int]map[netip.AddrPort]struct{}) int {
	n := 0
	for _, st := range l.all() {
		if st.profile {
			continue
		}
		want := truth[st.svc]
		st.mu.Lock()
		ok := st.view != nil && len(st.view) == len(want)
		if ok {
			for k := range st.view {
				if _, in := want[k.AddrPort()]; !in {
					ok = false
					break
				}
			}
		}
		st.mu.Unlock()
		if !ok {
			n++
		}
	}
	return n
}

// all returns the streams opened so far.
func (l *load) all() []*stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streams[:len(l.streams):len(l.streams)]
}

package policy

import (
	"sync"
	"sync/atomic"
	"time"
)

// Source says where a port's current policy comes from.
type Source uint8

const (
	// SourceDefault: no policy received yet; the configured default applies.
	SourceDefault Source = iota
	// SourceService: the last policy the policy service sent.
	SourceService
	// SourceInvalid: the service sent a policy that does not compile and none before it
	// did; nothing is authorized.
	SourceInvalid
	// SourceOverflow: too many ports are watched; nothing is authorized on this one.
	SourceOverflow
)

func (s Source) String() string {
	switch s {
	case SourceDefault:
		return "default"
	case SourceService:
		return "service"
	case SourceInvalid:
		return "invalid"
	case SourceOverflow:
		return "overflow"
	}
	return "unknown"
}

// Port is one inbound port's policy, kept current by the Watcher. Its methods are safe for
// concurrent use; Policy is one atomic load.
type Port struct {
	number uint16
	pinned bool // a configured port: watched from the start, never dropped

	state   atomic.Pointer[portState]
	settled chan struct{} // closed once a policy arrived or waiting for one is pointless
	once    sync.Once

	refs     atomic.Int32 // connections holding the port (Lookup .. Release)
	lastUsed atomic.Int64 // unix nanos of the last Release or Lookup
	cancel   func()       // stops the stream; guarded by Watcher.mu

	mu      sync.Mutex
	problem string // why the policy may be stale; "" when the stream is healthy
}

// portState is immutable: a new one replaces it on each change.
type portState struct {
	srv     *Server
	source  Source
	changed chan struct{} // closed when this state is replaced
}

func newPort(number uint16, srv *Server, source Source) *Port {
	p := &Port{number: number, settled: make(chan struct{})}
	p.state.Store(&portState{srv: srv, source: source, changed: make(chan struct{})})
	p.lastUsed.Store(time.Now().UnixNano())
	return p
}

// Number is the port.
func (p *Port) Number() uint16 { return p.number }

// Policy returns the port's current policy (shared: do not modify it).
func (p *Port) Policy() *Server { return p.state.Load().srv }

// Source says where Policy comes from.
func (p *Port) Source() Source { return p.state.Load().source }

// Changed returns a channel closed when the policy changes; then call Policy and Changed
// again.
func (p *Port) Changed() <-chan struct{} { return p.state.Load().changed }

// Release says that a connection that got p from Lookup is done with it; a port that no
// connection holds is dropped after the Watcher's idle timeout. Call it once per Lookup.
func (p *Port) Release() {
	p.lastUsed.Store(time.Now().UnixNano())
	p.refs.Add(-1)
}

func (p *Port) set(srv *Server, source Source) {
	old := p.state.Swap(&portState{srv: srv, source: source, changed: make(chan struct{})})
	close(old.changed)
}

func (p *Port) settle() { p.once.Do(func() { close(p.settled) }) }

func (p *Port) setProblem(s string) {
	p.mu.Lock()
	p.problem = s
	p.mu.Unlock()
}

func (p *Port) getProblem() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.problem
}

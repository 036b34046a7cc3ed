package run

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Component is a long-lived part of a process. Run blocks until ctx ends and then returns nil,
// or returns an error when the component cannot go on; it must return soon after ctx ends.
type Component interface {
	Run(ctx context.Context) error
}

// Readier is implemented by a component that is not ready at once (a source that has not
// synced, a CA without its issuer). Ready returns nil when it is, or what it waits for. It is
// called from admin handlers and must be safe for concurrent use and cheap.
type Readier interface {
	Ready() error
}

// Warner is implemented by a component that can serve while something is wrong that an
// operator should know of (a manifest that does not parse, whose last good objects are kept).
// Warnings returns one line each, or nil; the same contract as Ready.
type Warner interface {
	Warnings() []string
}

// WarningsOf returns c's warnings when it is a Warner, else nil: for a component that passes
// on the warnings of a part it holds.
func WarningsOf(c any) []string {
	if w, ok := c.(Warner); ok {
		return w.Warnings()
	}
	return nil
}

// Func adapts a function to a Component.
type Func func(ctx context.Context) error

// Run implements Component.
func (f Func) Run(ctx context.Context) error { return f(ctx) }

// DefaultStopTimeout is how long a Group waits for its components once they are told to stop.
const DefaultStopTimeout = 10 * time.Second

// Group runs components together. Add them before Run; the zero value is ready to use.
type Group struct {
	// StopTimeout bounds the wait for components after ctx ends or one fails (zero:
	// DefaultStopTimeout). A component still running then is reported in Run's error and
	// abandoned: the process is expected to exit.
	StopTimeout time.Duration

	members []member
	mu      sync.Mutex
	state   string // "" before Run, "running", then the reason it stopped
}

type member struct {
	name string
	c    Component
}

// Add adds a component under a name used in errors, readiness and warnings.
func (g *Group) Add(name string, c Component) { g.members = append(g.members, member{name, c}) }

// Go adds a function as a component.
func (g *Group) Go(name string, fn func(ctx context.Context) error) { g.Add(name, Func(fn)) }

// Ready reports nil when the group is running and every component that implements Readier is
// ready; otherwise what is missing, naming the components.
func (g *Group) Ready() error {
	g.mu.Lock()
	state := g.state
	g.mu.Unlock()
	switch state {
	case "":
		return errors.New("starting")
	case "running":
	default:
		return errors.New("stopping: " + state)
	}
	var missing []string
	for _, m := range g.members {
		if r, ok := m.c.(Readier); ok {
			if err := r.Ready(); err != nil {
				missing = append(missing, m.name+": "+err.Error())
			}
		}
	}
	if len(missing) > 0 {
		return errors.New(strings.Join(missing, "; "))
	}
	return nil
}

// Warnings returns the warnings of every component that implements Warner, each prefixed with
// the component's name, in the order the components were added.
func (g *Group) Warnings() []string {
	var out []string
	for _, m := range g.members {
		for _, s := range WarningsOf(m.c) {
			out = append(out, m.name+": "+s)
		}
	}
	return out
}

// Run runs every component until ctx ends or one of them fails, then cancels the rest and
// waits for them (at most StopTimeout). It returns the first failure, naming its component,
// or nil when ctx ended and everything stopped in time. A component that returns nil before
// ctx ends has simply finished; the others go on. Run must be called once.
func (g *Group) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(g.members))
	g.setState("running")
	for _, m := range g.members {
		go func() {
			err := m.c.Run(ctx)
			results <- result{m.name, err}
		}()
	}
	var first error
	running := make(map[string]int, len(g.members))
	for _, m := range g.members {
		running[m.name]++
	}
	collect := func(r result) {
		if running[r.name]--; running[r.name] == 0 {
			delete(running, r.name)
		}
		if r.err != nil && first == nil && !(ctx.Err() != nil && errors.Is(r.err, context.Canceled)) {
			first = r.err
			if r.name != "" {
				first = fmt.Errorf("%s: %w", r.name, r.err)
			}
			g.setState(first.Error())
			cancel()
		}
	}
	for len(running) > 0 && ctx.Err() == nil {
		select {
		case r := <-results:
			collect(r)
		case <-ctx.Done(): // the stop timeout runs from here, not from the first return
		}
	}
	if first == nil {
		g.setState("shutting down")
	}
	cancel()
	timeout := g.StopTimeout
	if timeout <= 0 {
		timeout = DefaultStopTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(running) > 0 {
		select {
		case r := <-results:
			collect(r)
		case <-timer.C:
			names := make([]string, 0, len(running))
			for n := range running {
				if n == "" {
					n = "(unnamed)"
				}
				names = append(names, n)
			}
			sort.Strings(names)
			err := fmt.Errorf("did not stop within %v: %s", timeout, strings.Join(names, ", "))
			return errors.Join(first, err)
		}
	}
	return first
}

func (g *Group) setState(s string) {
	g.mu.Lock()
	g.state = s
	g.mu.Unlock()
}

// All runs each function as one Group until ctx ends or one of them fails, then cancels the
// rest and waits for all of them. It returns the first error.
func All(ctx context.Context, fns ...func(context.Context) error) error {
	var g Group
	for _, fn := range fns {
		g.Go("", fn) // unnamed: errors are returned as they are
	}
	return g.Run(ctx)
}

// Every calls fn every period until ctx ends, the first time one period from now. It returns
// when ctx ends; fn's calls do not overlap.
func Every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

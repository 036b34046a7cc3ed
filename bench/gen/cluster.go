package gen

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Endpoint is one endpoint of the truth: the serial of its pod (its address follows) and
// whether it is ready.
type Endpoint struct {
	Serial uint32
	Ready  bool
}

// Addr returns the endpoint's address on the target port.
func (e Endpoint) Addr() netip.AddrPort { return netip.AddrPortFrom(SerialAddr(e.Serial), TargetPort) }

// Kind is the kind of a churn change.
type Kind uint8

const (
	// Replace removes one endpoint and adds a new one (a new pod with a new address).
	Replace Kind = iota + 1
	// NotReady marks a ready endpoint not ready: its address leaves the served set.
	NotReady
	// Ready marks a not-ready endpoint ready again: its address returns.
	Ready
	// ScaleUp adds an endpoint (a new pod, ready) to a slice.
	ScaleUp
	// ScaleDown removes an endpoint from a slice.
	ScaleDown
)

var kindNames = [...]string{Replace: "replace", NotReady: "not-ready", Ready: "ready", ScaleUp: "scale-up", ScaleDown: "scale-down"}

// Removes reports whether the change's observable effect is the removal of an address (Old,
// which is then also New), rather than the addition of New.
func (k Kind) Removes() bool { return k == NotReady || k == ScaleDown }

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Change is one churn change applied to a Cluster.
type Change struct {
	Service int
	Slice   int
	Kind    Kind
	// Old is the serial of the endpoint changed (removed by Replace and ScaleDown); New the
	// serial added by Replace and ScaleUp, or Old again for NotReady, Ready and ScaleDown.
	Old, New uint32
	// Unseen: no stream can see the change, since it removes an endpoint that was not ready
	// (a ScaleDown of one, which streams never held).
	Unseen bool
}

// ErrSerialsExhausted is returned by Apply when every pod serial has been used.
var ErrSerialsExhausted = errors.New("gen: pod serials exhausted (10.0.0.0/8 is used up)")

// ErrNoEndpoints is returned by Apply when the cluster has no endpoint to change.
var ErrNoEndpoints = errors.New("gen: the cluster has no endpoints to change")

// Cluster is the truth of a synthetic cluster, kept compactly: per service, its slices as
// lists of endpoints. It is not safe for concurrent use; the owner serialises access.
type Cluster struct {
	cfg  Config
	svcs [][][]Endpoint // service -> slice -> endpoints
	next uint32         // next unused serial
}

// NewCluster generates the initial state of cfg's cluster: service i's endpoints have the
// serials i*EndpointsPerService+1 ... (i+1)*EndpointsPerService, all ready.
func NewCluster(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, svcs: make([][][]Endpoint, cfg.Services)}
	n := cfg.EndpointsPerService
	for i := range c.svcs {
		// One backing array per service keeps allocations down.
		all := make([]Endpoint, n)
		for j := range all {
			all[j] = Endpoint{Serial: uint32(i*n + j + 1), Ready: true}
		}
		ns := (n + MaxSliceEndpoints - 1) / MaxSliceEndpoints
		c.svcs[i] = make([][]Endpoint, ns)
		for k := range ns {
			hi := min(n, (k+1)*MaxSliceEndpoints)
			c.svcs[i][k] = all[k*MaxSliceEndpoints : hi : hi]
		}
	}
	c.next = uint32(cfg.Services*n + 1)
	return c, nil
}

// Config returns the cluster's configuration.
func (c *Cluster) Config() Config { return c.cfg }

// Services returns the number of services.
func (c *Cluster) Services() int { return len(c.svcs) }

// Slices returns the number of slices of service i.
func (c *Cluster) Slices(i int) int { return len(c.svcs[i]) }

// Endpoints returns the endpoints of slice k of service i. The slice is the cluster's own and
// changes with it: copy it to keep it.
func (c *Cluster) Endpoints(i, k int) []Endpoint { return c.svcs[i][k] }

// EndpointSlice synthesizes the current slice k of service i.
func (c *Cluster) EndpointSlice(i, k int) *discoveryv1.EndpointSlice {
	return c.cfg.EndpointSlice(i, k, c.svcs[i][k])
}

// ReadyAddrs appends the addresses service i serves (ready endpoints on the target port) to
// dst and returns it.
func (c *Cluster) ReadyAddrs(dst []netip.AddrPort, i int) []netip.AddrPort {
	for _, sl := range c.svcs[i] {
		for _, e := range sl {
			if e.Ready {
				dst = append(dst, e.Addr())
			}
		}
	}
	return dst
}

// Clone returns a deep copy, for reading while the original changes.
func (c *Cluster) Clone() *Cluster {
	out := &Cluster{cfg: c.cfg, svcs: make([][][]Endpoint, len(c.svcs)), next: c.next}
	for i, sls := range c.svcs {
		n := 0
		for _, sl := range sls {
			n += len(sl)
		}
		all := make([]Endpoint, 0, n)
		out.svcs[i] = make([][]Endpoint, len(sls))
		for k, sl := range sls {
			lo := len(all)
			all = append(all, sl...)
			out.svcs[i][k] = all[lo:len(all):len(all)]
		}
	}
	return out
}

// Apply makes one random change, drawing from rng: it picks a service and one of its
// endpoints uniformly (skipping, a bounded number of times, endpoints for which busy reports
// true; busy may be nil). A not-ready endpoint becomes ready; a ready one is replaced (three
// times in four) or becomes not ready.
func (c *Cluster) Apply(rng *rand.Rand, busy func(serial uint32) bool) (Change, error) {
	ch, e, err := c.pick(rng, busy)
	if err != nil {
		return ch, err
	}
	switch {
	case !e.Ready:
		ch.Kind = Ready
		e.Ready = true
	case rng.IntN(4) == 0:
		ch.Kind = NotReady
		e.Ready = false
	default:
		if c.next > MaxSerial {
			return Change{}, ErrSerialsExhausted
		}
		ch.Kind = Replace
		ch.New = c.next
		c.next++
		*e = Endpoint{Serial: ch.New, Ready: true}
	}
	return ch, nil
}

// pick chooses the endpoint a change applies to, as Apply describes, and returns the change
// with its service, slice and serial (Old and New) filled in. Before any scale change every
// slice is full, and the draws are those Apply has always made; after one, an index past the
// end of a shrunk slice wraps around it.
func (c *Cluster) pick(rng *rand.Rand, busy func(serial uint32) bool) (Change, *Endpoint, error) {
	if c.cfg.EndpointsPerService == 0 {
		return Change{}, nil, ErrNoEndpoints
	}
	var ch Change
	var e *Endpoint
	for try := 0; try < 16; try++ {
		ch.Service = rng.IntN(len(c.svcs))
		j := rng.IntN(c.cfg.EndpointsPerService)
		ch.Slice = j / MaxSliceEndpoints
		sl := c.svcs[ch.Service][ch.Slice]
		if len(sl) == 0 {
			continue
		}
		e = &sl[j%MaxSliceEndpoints%len(sl)]
		if busy == nil || !busy(e.Serial) {
			break
		}
	}
	if e == nil {
		return Change{}, nil, ErrNoEndpoints
	}
	ch.Old, ch.New = e.Serial, e.Serial
	return ch, e, nil
}

// Scale adds a new ready endpoint to a slice (up) or removes one from it (down), chosen as
// Apply chooses. A slice is never scaled down below one endpoint: that draw scales it up
// instead.
func (c *Cluster) Scale(rng *rand.Rand, busy func(serial uint32) bool, up bool) (Change, error) {
	ch, _, err := c.pick(rng, busy)
	if err != nil {
		return ch, err
	}
	sl := c.svcs[ch.Service][ch.Slice]
	if up || len(sl) < 2 {
		if c.next > MaxSerial {
			return Change{}, ErrSerialsExhausted
		}
		ch.Kind, ch.Old, ch.New = ScaleUp, c.next, c.next
		c.next++
		// A slice shares its service's backing array with the next one only up to its
		// capacity, which is its length: append copies it.
		c.svcs[ch.Service][ch.Slice] = append(sl, Endpoint{Serial: ch.New, Ready: true})
		return ch, nil
	}
	ch.Kind = ScaleDown
	for j := range sl {
		if sl[j].Serial == ch.Old {
			ch.Unseen = !sl[j].Ready
			c.svcs[ch.Service][ch.Slice] = append(sl[:j:j], sl[j+1:]...)
			break
		}
	}
	return ch, nil
}

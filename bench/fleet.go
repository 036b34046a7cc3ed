package bench

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/meridian-mesh/meridian/internal/child"
)

// fleet is the replica processes of a run. A replica that joins during churn is added from
// its own goroutine, so every method holds mu. Once stopped, the fleet takes no more
// replicas: a late joiner is killed instead.
type fleet struct {
	mu      sync.Mutex
	reps    []*replica
	stopped bool
}

// add adds rep, or kills it and returns an error when the fleet is already stopped.
func (f *fleet) add(rep *replica) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		rep.Kill()
		return errors.New("the run ended while a replica started")
	}
	f.reps = append(f.reps, rep)
	return nil
}

// get returns replica i (in the order added).
func (f *fleet) get(i int) *replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reps[i]
}

// list returns the replicas added so far.
func (f *fleet) list() []*replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reps)
}

// stop stops every replica at once (SIGTERM, then SIGKILL after 5s) and waits until they
// have exited. A replica being added meanwhile waits, then is killed.
func (f *fleet) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	var wg sync.WaitGroup
	for _, rep := range f.reps {
		wg.Add(1)
		go func() { defer wg.Done(); rep.Stop(5 * time.Second) }()
	}
	wg.Wait()
}

// spec returns replica i's spec on fresh ports.
func (r *run) spec(i int) (ReplicaSpec, error) {
	s := ReplicaSpec{Index: i, Ring: r.ring, NonOwner: r.cfg.NonOwner, GOMAXPROCS: r.res.ReplicaGOMAXPROCS,
		GossipKeyFile: r.gossipKey, Expect: r.n}
	r.world.source(&s)
	var errs [3]error
	for j, addr := range []*string{&s.Addr, &s.AdminAddr, &s.GossipAddr} {
		var port int
		port, errs[j] = child.FreePort()
		*addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	if i == 0 {
		r.seed = s.GossipAddr
	}
	s.Seed = r.seed
	return s, errors.Join(errs[:]...)
}

// startReady starts replica i and waits until it is ready. started, when not nil, is told
// each start's gRPC address before the wait (a replica joins the ring, and others name it
// as an owner, before it is ready). It is added to the fleet once ready, or stopped when the
// run is already over.
func (r *run) startReady(i int, started func(addr string) error) error {
	rep, err := r.launch(i, func(rep *replica) error {
		if started != nil {
			if err := started(rep.spec.Addr); err != nil {
				return err
			}
		}
		return rep.waitReady(r.ctx, r.cfg.ReadyTimeout)
	})
	if err != nil {
		return err
	}
	return r.reps.add(rep)
}

// launch starts replica i and returns it once up(rep) returned nil, or kills it and returns
// up's error. Its ports come from child.FreePort, and another process can take one between
// the probe and the replica's bind, so a replica that fails to bind is started again on
// fresh ports (bounded).
func (r *run) launch(i int, up func(*replica) error) (*replica, error) {
	for attempt := 1; ; attempt++ {
		spec, err := r.spec(i)
		if err != nil {
			return nil, err
		}
		rep, err := startReplica(r.cfg.Binary, r.dir, spec, r.cfg.ExtraReplicaArgs)
		if err != nil {
			return nil, err
		}
		if err = up(rep); err != nil {
			rep.Kill()
			if attempt == 3 || !errors.Is(err, child.ErrAddrInUse) {
				return nil, err
			}
			continue
		}
		return rep, nil
	}
}

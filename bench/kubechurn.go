package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meridian-mesh/meridian/bench/gen"
)

const (
	// patchWorkers is how many churn patches may be in flight at once, so that the churn
	// rate holds when the API server is slow to answer. The patches of one slice all go
	// through one worker, in the order of the truth's changes.
	patchWorkers = 8
	// patchQueue bounds each worker's backlog; a full one makes churn wait.
	patchQueue = 64
)

// patchJob is one change on its way to the API server: the slice's endpoints after it, as
// a JSON merge patch.
type patchJob struct {
	ctx      context.Context
	ch       gen.Change
	at       time.Time // when the change was recorded (pre)
	ns, name string
	body     []byte
	post     func(gen.Change, time.Time)
}

// patcher sends the churn's patches on patchWorkers goroutines, which it owns: stop ends
// them and waits.
type patcher struct {
	w        *kubeWorld
	queues   []chan patchJob
	workers  sync.WaitGroup
	inflight sync.WaitGroup // jobs queued and not yet done

	mu  sync.Mutex
	err error // the first failure
}

func newPatcher(w *kubeWorld) *patcher {
	p := &patcher{w: w, queues: make([]chan patchJob, patchWorkers)}
	for i := range p.queues {
		q := make(chan patchJob, patchQueue)
		p.queues[i] = q
		p.workers.Add(1)
		go func() {
			defer p.workers.Done()
			for job := range q {
				if p.failed() == nil {
					if err := p.send(job); err != nil {
						p.fail(err)
					}
				}
				p.inflight.Done()
			}
		}()
	}
	return p
}

// send creates the pod a change adds (with cfg.KubePods: it exists before the slice names
// it, as a controller's would), then patches the slice, then calls post.
func (p *patcher) send(j patchJob) error {
	if p.w.cfg.KubePods && (j.ch.Kind == gen.Replace || j.ch.Kind == gen.ScaleUp) {
		if err := p.w.createPod(j.ctx, j.ch.Service, j.ch.New); err != nil {
			return err
		}
	}
	got, err := p.w.client.DiscoveryV1().EndpointSlices(j.ns).Patch(j.ctx, j.name, types.MergePatchType, j.body, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch %s/%s (%s): %w", j.ns, j.name, j.ch.Kind, err)
	}
	at := time.Now()
	j.post(j.ch, at)
	if p.w.watch != nil {
		p.w.watch.returned(got.ResourceVersion, j.at, at)
	}
	return nil
}

// enqueue hands j to its slice's worker, waiting while that worker's queue is full. It
// returns the first failure of an earlier job, if any.
func (p *patcher) enqueue(j patchJob) error {
	if err := p.failed(); err != nil {
		return err
	}
	q := p.queues[(j.ch.Service*31+j.ch.Slice)%len(p.queues)]
	p.inflight.Add(1)
	select {
	case q <- j:
		return nil
	case <-j.ctx.Done():
		p.inflight.Done()
		return j.ctx.Err()
	}
}

// flush waits until every queued job is done (the jobs' requests end with their ctx) and
// returns the first failure.
func (p *patcher) flush() error {
	p.inflight.Wait()
	return p.failed()
}

// stop ends the workers once their queues are empty and waits for them. Nothing may be
// enqueued after it.
func (p *patcher) stop() {
	for _, q := range p.queues {
		close(q)
	}
	p.workers.Wait()
}

func (p *patcher) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

func (p *patcher) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

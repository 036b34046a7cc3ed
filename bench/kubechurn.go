package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/bench/gen"
)

const (
	// writeWorkers is how many churn writes may be in flight at once, so that the churn
	// rate holds when the API server is slow to answer. The writes of one slice all go
	// through one worker, in the order of the truth's changes.
	writeWorkers = 8
	// writeQueue bounds each worker's backlog; a full one makes churn wait.
	writeQueue = 64
)

// writeJob is one change on its way to the API server: the slice after it, written whole
// (an Update, in protobuf), as Kubernetes' EndpointSlice controller writes slices. The JSON
// merge patch of the endpoints the harness sent before cost the API server nearly twice the
// CPU (it renders the stored object as JSON, merges, and decodes the result): 19.5 against
// 10.9 CPU seconds for 30 s of 50 changes a second at 500k endpoints, which on a small
// machine set the tail of every figure timed through it.
type writeJob struct {
	ctx   context.Context
	ch    gen.Change
	at    time.Time // when the change was recorded (pre)
	slice *discoveryv1.EndpointSlice
	post  func(gen.Change, time.Time)
}

// sliceWriter sends the churn's writes on writeWorkers goroutines, which it owns: stop ends
// them and waits.
type sliceWriter struct {
	w        *kubeWorld
	queues   []chan writeJob
	workers  sync.WaitGroup
	inflight sync.WaitGroup // jobs queued and not yet done

	mu  sync.Mutex
	err error // the first failure
}

func newSliceWriter(w *kubeWorld) *sliceWriter {
	p := &sliceWriter{w: w, queues: make([]chan writeJob, writeWorkers)}
	for i := range p.queues {
		q := make(chan writeJob, writeQueue)
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
// it, as a controller's would), then writes the slice, then calls post.
func (p *sliceWriter) send(j writeJob) error {
	if p.w.cfg.KubePods && (j.ch.Kind == gen.Replace || j.ch.Kind == gen.ScaleUp) {
		if err := p.w.createPod(j.ctx, j.ch.Service, j.ch.New); err != nil {
			return err
		}
	}
	// Unconditional (no resourceVersion): this worker is the slice's only writer, in order.
	got, err := p.w.writer.DiscoveryV1().EndpointSlices(j.slice.Namespace).Update(j.ctx, j.slice, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update %s/%s (%s): %w", j.slice.Namespace, j.slice.Name, j.ch.Kind, err)
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
func (p *sliceWriter) enqueue(j writeJob) error {
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
func (p *sliceWriter) flush() error {
	p.inflight.Wait()
	return p.failed()
}

// stop ends the workers once their queues are empty and waits for them. Nothing may be
// enqueued after it.
func (p *sliceWriter) stop() {
	for _, q := range p.queues {
		close(q)
	}
	p.workers.Wait()
}

func (p *sliceWriter) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

func (p *sliceWriter) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

package shard

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestKeyQueueContract checks the workqueue contract the index relies on: one entry per key,
// no key handed to two workers at once, a key added while processed handed out again after
// Done, and ShutDown handing out what is left before quit.
func TestKeyQueueContract(t *testing.T) {
	q := newKeyQueue[string]()
	q.Add("a")
	q.Add("b")
	q.Add("a")
	if q.Len() != 2 {
		t.Fatalf("Len %d after adding a, b, a; want 2", q.Len())
	}
	k, quit := q.Get()
	if k != "a" || quit {
		t.Fatalf("Get = %q, %v; want a first", k, quit)
	}
	q.Add("a") // while processed: not handed out again before Done
	if got, _ := q.Get(); got != "b" {
		t.Fatalf("Get = %q while a is processed; want b", got)
	}
	if q.Len() != 0 {
		t.Fatalf("Len %d with a processed and added again; want 0 until Done", q.Len())
	}
	q.Done("a")
	if q.Len() != 1 {
		t.Fatalf("Len %d after Done of a key added meanwhile; want 1", q.Len())
	}
	if got, _ := q.Get(); got != "a" {
		t.Fatalf("Get = %q; want a again", got)
	}
	q.Done("a")
	q.Done("b")
	q.Add("c")
	q.ShutDown()
	q.Add("d") // ignored
	if got, quit := q.Get(); got != "c" || quit {
		t.Fatalf("Get = %q, %v after ShutDown; want what was queued, c", got, quit)
	}
	if _, quit := q.Get(); !quit {
		t.Fatal("Get after ShutDown on an empty queue did not quit")
	}
}

// TestKeyQueueWorkers runs workers over a queue fed concurrently: every key added is
// processed after its last Add, and never by two workers at once; ShutDown ends the workers.
func TestKeyQueueWorkers(t *testing.T) {
	q := newKeyQueue[int]()
	var mu sync.Mutex
	inProgress := map[int]bool{}
	added, processed := map[int]int{}, map[int]int{} // key: generation of its last Add, processed
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				k, quit := q.Get()
				if quit {
					return
				}
				mu.Lock()
				if inProgress[k] {
					mu.Unlock()
					t.Errorf("key %d handed to two workers", k)
					return
				}
				inProgress[k] = true
				gen := added[k]
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				inProgress[k] = false
				processed[k] = max(processed[k], gen)
				mu.Unlock()
				q.Done(k)
			}
		})
	}
	for gen := 1; gen <= 200; gen++ {
		for k := range 50 {
			mu.Lock()
			added[k] = gen
			mu.Unlock()
			q.Add(k)
		}
	}
	testutil.Eventually(t, 10*time.Second, "every key processed after its last Add", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k := range 50 {
			if processed[k] != 200 {
				return false
			}
		}
		return true
	})
	q.ShutDown()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("workers did not quit after ShutDown")
	}
}

// TestKeyQueueLetsBurstGo: once a burst larger than shrinkAbove is drained, the queue holds
// fresh (small) room again.
func TestKeyQueueLetsBurstGo(t *testing.T) {
	q := newKeyQueue[ServiceKey]()
	for i := range 5000 {
		q.Add(NewServiceKey("tenant", fmt.Sprintf("svc-%d", i)))
	}
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
	}
	if cap(q.order) != 0 || q.peak != 0 || len(q.dirty) != 0 {
		t.Fatalf("drained queue keeps order cap %d, peak %d, %d dirty; want its room let go", cap(q.order), q.peak, len(q.dirty))
	}
}

// TestKeyQueueSteadyLoad: a queue that never drains (a key added for each one handed out)
// keeps an array of about the keys queued, not of every key added since it was last empty,
// and hands them out in order.
func TestKeyQueueSteadyLoad(t *testing.T) {
	q := newKeyQueue[int]()
	const queued = 100
	for i := range queued {
		q.Add(i)
	}
	for i := range 100_000 {
		k, _ := q.Get()
		if k != i {
			t.Fatalf("Get = %d, want %d (keys handed out in the order added)", k, i)
		}
		q.Done(k)
		q.Add(i + queued)
		if cap(q.order) > 4*queued+2*compactAbove {
			t.Fatalf("after %d keys: array of %d for %d queued", i+1, cap(q.order), q.Len())
		}
	}
}

// BenchmarkKeyQueueRetained reports the live heap (retained-B/key) a queue keeps after 5,000
// service keys were queued at once and processed: client-go's workqueue, which the index
// used before, and keyQueue.
func BenchmarkKeyQueueRetained(b *testing.B) {
	const n = 5000
	keys := make([]ServiceKey, n)
	for i := range keys {
		keys[i] = NewServiceKey("tenant-17", fmt.Sprintf("service-%05d", i))
	}
	type queue interface {
		Add(ServiceKey)
		Get() (ServiceKey, bool)
		Done(ServiceKey)
		Len() int
	}
	for _, tc := range []struct {
		name string
		make func() queue
	}{
		{"client-go", func() queue { return workqueue.NewTyped[ServiceKey]() }},
		{"keyQueue", func() queue { return newKeyQueue[ServiceKey]() }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				q := tc.make()
				for _, k := range keys {
					q.Add(k)
				}
				for q.Len() > 0 {
					k, _ := q.Get()
					q.Done(k)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
				runtime.KeepAlive(q)
			}
			b.ReportMetric(per, "retained-B/key")
		})
	}
}

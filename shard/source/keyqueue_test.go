package source

import (
	"slices"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// work is what keyQueue.next handed out.
type work struct {
	keys  []string
	batch bool
}

// nextAsync calls q.next(batchMin) on a goroutine of its own and returns the channel its
// result arrives on (closed when the queue is closed).
func nextAsync(q *keyQueue, batchMin int) <-chan work {
	ch := make(chan work, 1)
	go func() {
		keys, batch, ok := q.next(batchMin)
		if ok {
			ch <- work{keys, batch}
		}
		close(ch)
	}()
	return ch
}

func wantWork(t *testing.T, ch <-chan work, keys []string, batch bool) {
	t.Helper()
	w := testutil.Recv(t, ch, 5*time.Second, "keys from the queue")
	if !slices.Equal(w.keys, keys) || w.batch != batch {
		t.Fatalf("next gave %v (batch %v), want %v (batch %v)", w.keys, w.batch, keys, batch)
	}
}

// TestKeyQueueBatch: keys queued at once come out as one batch when there are batchMin of
// them; while it is out, fewer keys come out alone, and more wait for the next batch, except
// those the batch gave back, which come out alone before them and never in a batch; settle
// drops an add made during processing only when the processing is still up to date.
func TestKeyQueueBatch(t *testing.T) {
	const min = 3
	q := newKeyQueue()
	defer q.close()
	q.add("a") // alone below min
	wantWork(t, nextAsync(q, min), []string{"a"}, false)
	q.done("a", false)
	q.addAll([]string{"a", "b", "c"})
	wantWork(t, nextAsync(q, min), []string{"a", "b", "c"}, true)
	q.add("d") // fewer than min while the batch is out: alone
	wantWork(t, nextAsync(q, min), []string{"d"}, false)
	q.done("d", false)
	q.addAll([]string{"e", "f", "g"}) // min while the batch is out: they wait for the next
	waiting := nextAsync(q, min)
	testutil.Never(t, 50*time.Millisecond, "keys handed out while a batch is out and min more wait for the next", func() bool { return len(waiting) > 0 })
	q.giveBack("a") // given back: alone, ahead of the keys that wait
	wantWork(t, waiting, []string{"a"}, false)
	q.done("a", false)
	q.add("b") // during processing: again
	q.settle("b", func() bool { return true })
	q.add("c")
	q.settle("c", func() bool { return false })
	if q.dirty["b"] || !q.dirty["c"] {
		t.Fatalf("after settle: b queued %v (want false, up to date), c queued %v (want true)", q.dirty["b"], q.dirty["c"])
	}
	waiting = nextAsync(q, min)
	q.endBatch()
	wantWork(t, waiting, []string{"e", "f", "g", "c"}, true)
	q.giveBack("e")
	q.giveBack("f")
	q.giveBack("g")
	q.done("c", false)
	q.endBatch()
	// Given back keys come out alone even when there are min of them and no batch is out.
	for _, k := range []string{"e", "f", "g"} {
		wantWork(t, nextAsync(q, min), []string{k}, false)
		if q.idle() {
			t.Fatal("idle while a key is processed")
		}
		q.done(k, false)
	}
	// A given back key added again comes back to batches.
	q.addAll([]string{"e", "f", "g"})
	wantWork(t, nextAsync(q, min), []string{"e", "f", "g"}, true)
	for _, k := range []string{"e", "f", "g"} {
		q.done(k, false)
	}
	q.endBatch()
	if !q.idle() {
		t.Fatal("not idle with nothing queued or processed")
	}
	closed := nextAsync(q, min)
	q.close()
	if _, ok := <-closed; ok {
		t.Fatal("next handed out work after close")
	}
}

// TestKeyQueueGiveBackKeepsFailures: a key given back keeps its failures (the backoff of its
// next failed GET follows the earlier ones); one that fails after being given back is retried.
func TestKeyQueueGiveBackKeepsFailures(t *testing.T) {
	q := newKeyQueue()
	defer q.close()
	q.add("a")
	wantWork(t, nextAsync(q, 1), []string{"a"}, true)
	q.giveBack("a")
	q.endBatch()
	wantWork(t, nextAsync(q, 1), []string{"a"}, false)
	q.done("a", true) // retried after 5ms, in order: a batch of one may take it
	wantWork(t, nextAsync(q, 1), []string{"a"}, true)
	q.giveBack("a")
	q.endBatch()
	wantWork(t, nextAsync(q, 1), []string{"a"}, false)
	q.mu.Lock()
	n := q.failures["a"]
	q.mu.Unlock()
	if n != 1 {
		t.Fatalf("failures after give back: %d, want 1", n)
	}
	q.done("a", false)
	if !q.idle() {
		t.Fatal("not idle")
	}
}

package source

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// filteredWatch passes the events of a watch through a filter (watch.Filter's goroutine
// outlives a Stop when nobody reads its last event; this one ends with Stop, or when the
// watch it reads ends).
type filteredWatch struct {
	in   watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func newFilteredWatch(in watch.Interface, f func(watch.Event) (watch.Event, bool)) *filteredWatch {
	w := &filteredWatch{in: in, out: make(chan watch.Event), done: make(chan struct{})}
	go w.loop(f)
	return w
}

// ResultChan implements watch.Interface.
func (w *filteredWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface.
func (w *filteredWatch) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.in.Stop()
	})
}

func (w *filteredWatch) loop(f func(watch.Event) (watch.Event, bool)) {
	defer close(w.out)
	for {
		select {
		case <-w.done:
			return
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			if e, keep := f(e); keep {
				select {
				case w.out <- e:
				case <-w.done:
					return
				}
			}
		}
	}
}

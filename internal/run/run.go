// Package run runs the long-lived parts of a process together: each is a Run(ctx) error
// that blocks until ctx ends. It imports the standard library only.
package run

import (
	"context"
	"sync"
)

// All runs each function until ctx ends or one of them fails, then cancels the rest and waits
// for all of them. It returns the first error.
func All(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		}()
	}
	wg.Wait()
	return first
}

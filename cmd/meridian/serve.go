package main

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry returns a process's metrics registry with the Go and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// listenBoth listens on a server's address and its admin address, or on neither.
func listenBoth(addr, adminAddr string) (lis, adminLis net.Listener, err error) {
	if lis, err = net.Listen("tcp", addr); err != nil {
		return nil, nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if adminLis, err = net.Listen("tcp", adminAddr); err != nil {
		lis.Close()
		return nil, nil, fmt.Errorf("listen %s: %w", adminAddr, err)
	}
	return lis, adminLis, nil
}

// runAll runs each function until ctx ends or one of them fails, then cancels the rest and
// waits for all of them. It returns the first error.
func runAll(ctx context.Context, fns ...func(context.Context) error) error {
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

package main

import (
	"fmt"
	"net"

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

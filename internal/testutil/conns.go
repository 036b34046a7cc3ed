package testutil

import (
	"net"
	"sync"
	"testing"
)

// ServeConns accepts connections on lis until t ends and calls handle for each on its own
// goroutine. When t ends it closes lis and every connection still open, and waits (within
// StopWithin) for the accept loop and every handle to return; what names the server in the
// failure.
func ServeConns(t testing.TB, lis net.Listener, what string, handle func(net.Conn)) {
	t.Helper()
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					_ = c.Close()
				}()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		Wait(t, StopWithin, what+" to stop", wg.Wait)
	})
}

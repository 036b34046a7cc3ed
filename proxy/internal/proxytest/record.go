package proxytest

import (
	"net"
	"sync"
	"testing"
)

// RecordFound swaps *fn (a proxy's rawio.Ordinary) for one that calls it and records what
// each call found, until the test ends; the func it returns reads the records so far.
func RecordFound(t testing.TB, fn *func(net.Conn) bool) func() []bool {
	var mu sync.Mutex
	var found []bool
	orig := *fn
	*fn = func(c net.Conn) bool {
		ok := orig(c)
		mu.Lock()
		found = append(found, ok)
		mu.Unlock()
		return ok
	}
	t.Cleanup(func() { *fn = orig })
	return func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return append([]bool(nil), found...)
	}
}

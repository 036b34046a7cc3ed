package inbound

import (
	"maps"
	"slices"
	"sync"
)

// pools are connection pools to the applications, one per address, created on first use:
// the lean HTTP/1.1 path's (h1.Pool) and the HTTP/2 relay's (h2.Pool). P's zero value is
// an empty pool.
type pools[P any] struct {
	mu sync.Mutex
	m  map[string]*P
}

func (p *pools[P]) get(addr string) *P {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*P{}
	}
	pl := p.m[addr]
	if pl == nil {
		pl = new(P)
		p.m[addr] = pl
	}
	return pl
}

// each calls f for every pool, outside the lock.
func (p *pools[P]) each(f func(*P)) {
	p.mu.Lock()
	all := slices.Collect(maps.Values(p.m))
	p.mu.Unlock()
	for _, pl := range all {
		f(pl)
	}
}

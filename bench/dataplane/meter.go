package dataplane

import (
	"context"
	"sync"
	"time"

	"github.com/meridian-mesh/meridian/bench/internal/schedstat"
)

// meter accumulates one process's figures over the segments of its variant: CPU time,
// allocations (a Go process with /metrics: the proxies), and resident memory, sampled
// while the load runs. An nginx's meter counts its master and workers together.
type meter struct {
	name    string
	p       *proc
	metrics string // the /metrics URL; "" for a process without Go runtime metrics

	// What the process allocates without load: one /metrics scrape (the scrapes around a
	// segment cost one), and per second.
	scrapeMallocs, idleMallocsPerSec float64

	cpu      float64 // CPU seconds over the segments
	mallocs  float64 // allocations over the segments, as counted (raw)
	net      float64 // the same less scrapes and idle allocation
	requests int64   // requests over the segments
	rssMax   memory  // the sample of the largest RSS under load
}

// pids are the meter's processes: the process and its children (nginx's workers).
func (m *meter) pids() []int { return append([]int{m.p.Pid()}, children(m.p.Pid())...) }

// reading is the meter's counters at one time.
type reading struct {
	cpu, mallocs float64
	at           time.Time
}

func (m *meter) read(ctx context.Context) (reading, error) {
	r := reading{at: time.Now()}
	for _, pid := range m.pids() {
		s, err := schedstat.CPUSeconds(pid)
		if err != nil {
			return r, err
		}
		r.cpu += s
	}
	if m.metrics != "" {
		v, err := scrapeCounter(ctx, m.metrics, "go_memstats_mallocs_total")
		if err != nil {
			return r, err
		}
		r.mallocs = v
	}
	return r, nil
}

// calibrate measures what the process allocates without load: two scrapes back to back,
// then a pause.
func (m *meter) calibrate(ctx context.Context, pause time.Duration) error {
	if m.metrics == "" {
		return nil
	}
	a, err := m.read(ctx)
	if err != nil {
		return err
	}
	b, err := m.read(ctx)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(pause):
	}
	c, err := m.read(ctx)
	if err != nil {
		return err
	}
	m.scrapeMallocs = b.mallocs - a.mallocs
	m.idleMallocsPerSec = max(0, (c.mallocs-b.mallocs-m.scrapeMallocs)/c.at.Sub(b.at).Seconds())
	return nil
}

// add counts one segment of n requests between readings a and b.
func (m *meter) add(a, b reading, n int64) {
	m.cpu += b.cpu - a.cpu
	d := b.mallocs - a.mallocs
	m.mallocs += d
	m.net += max(0, d-m.scrapeMallocs-m.idleMallocsPerSec*b.at.Sub(a.at).Seconds())
	m.requests += n
}

// rss is the resident memory of the meter's processes, summed.
func (m *meter) rss() (memory, error) {
	var total memory
	for _, pid := range m.pids() {
		mem, err := readMemory(pid)
		if err != nil {
			return total, err
		}
		total.RSS += mem.RSS
		total.HWM += mem.HWM
		total.Anon += mem.Anon
		total.File += mem.File
	}
	return total, nil
}

// sampleRSS samples the meters' RSS every interval until the returned stop is called (which
// waits for the sampler).
func sampleRSS(meters []*meter, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			for _, m := range meters {
				if mem, err := m.rss(); err == nil && mem.RSS > m.rssMax.RSS {
					m.rssMax = mem
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// perRequest divides by the requests counted (0 without any).
func (m *meter) perRequest(v float64) float64 {
	if m.requests == 0 {
		return 0
	}
	return v / float64(m.requests)
}

package balance

import (
	"fmt"
	"testing"
	"time"
)

var sizes = []int{3, 100, 1000}

// BenchmarkP2CPickDone is the per-request cost: Pick, Start and Done on one goroutine.
func BenchmarkP2CPickDone(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := NewP2C[int](DefaultConfig(), t0)
			p.Reset(targets(n), t0)
			now := t0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(time.Microsecond)
				e, err := p.Pick(now)
				if err != nil {
					b.Fatal(err)
				}
				p.Start(e).Done(now, time.Duration(i%20)*time.Millisecond, false)
			}
		})
	}
}

// BenchmarkP2CPickDoneParallel is the same from concurrent pickers sharing one balancer.
func BenchmarkP2CPickDoneParallel(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := NewP2C[int](DefaultConfig(), t0)
			p.Reset(targets(n), t0)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				now := t0
				for i := 0; pb.Next(); i++ {
					now = now.Add(time.Microsecond)
					e, err := p.Pick(now)
					if err != nil {
						b.Error(err)
						return
					}
					p.Start(e).Done(now, time.Duration(i%20)*time.Millisecond, false)
				}
			})
		})
	}
}

// BenchmarkLeastConnPickRelease is the per-connection cost of least connections.
func BenchmarkLeastConnPickRelease(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := NewLeastConn[int](DefaultConfig(), t0)
			c.Reset(targets(n), t0)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					e, err := c.Pick(t0)
					if err != nil {
						b.Error(err)
						return
					}
					c.Acquire(e).Release()
				}
			})
		})
	}
}

// BenchmarkReset is the cost of replacing a set of n endpoints with itself (discovery's
// first Add after a reconnect).
func BenchmarkReset(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := NewP2C[int](DefaultConfig(), t0)
			ts := targets(n)
			p.Reset(ts, t0)
			b.ReportAllocs()
			for b.Loop() {
				p.Reset(ts, t0)
			}
		})
	}
}

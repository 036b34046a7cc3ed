package snapshot

import (
	"fmt"
	"testing"
)

func BenchmarkLoad(b *testing.B) {
	s := NewStore(StoreConfig{})
	for i := range 10000 {
		s.Publish(Key{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i), Port: 80}, set(i))
	}
	k := Key{Namespace: "ns", Name: "svc-4242", Port: 80}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s.Load(k) == nil {
				b.Fatal("missing")
			}
		}
	})
}

func BenchmarkDiff(b *testing.B) {
	for _, n := range []int{100, 1000} {
		old := rangeSet(0, n)
		next := rangeSet(1, n+1) // one gone, one new
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d := Diff(old, next)
				if len(d.Add) != 1 || len(d.Remove) != 1 {
					b.Fatal("wrong diff")
				}
			}
		})
	}
}

// BenchmarkFanOut publishes one update to a key with 10k subscribers and has every
// subscriber take its delta.
func BenchmarkFanOut(b *testing.B) {
	const subscribers = 10000
	s := NewStore(StoreConfig{})
	s.Publish(key, rangeSet(0, 100))
	subs := make([]*Subscription, subscribers)
	for i := range subs {
		subs[i] = s.Subscribe(key, DefaultQueueCapacity)
		subs[i].Next()
	}
	defer func() {
		for _, sub := range subs {
			sub.Close()
		}
	}()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s.Publish(key, rangeSet(i, i+100))
		for _, sub := range subs {
			<-sub.C()
			if _, ok := sub.Next(); !ok {
				b.Fatal("no delta")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/subscribers, "ns/subscriber")
}

package shed

import (
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/brownout/brownout/signals"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// The fast path: admit and release with nothing queued, clock reads
// included (the anchor reads the clock in TryAcquirePermit and Record).
func BenchmarkFastPath(b *testing.B) {
	b.Run("shed", func(b *testing.B) {
		s, _ := New(Config{})
		b.ReportAllocs()
		for b.Loop() {
			p, ok := s.TryAcquire(time.Now(), signals.Default, 1)
			if !ok {
				b.Fatal("refused")
			}
			s.Release(time.Now(), p)
		}
	})
	b.Run("shed-given-now", func(b *testing.B) {
		s, _ := New(Config{})
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			p, ok := s.TryAcquire(now, signals.Default, 1)
			if !ok {
				b.Fatal("refused")
			}
			now = now.Add(time.Millisecond)
			s.Release(now, p)
		}
	})
	b.Run("clock-read", func(b *testing.B) {
		var sink time.Time
		for b.Loop() {
			sink = time.Now()
		}
		_ = sink
	})
	b.Run("failsafe-adaptivelimiter", func(b *testing.B) {
		l := adaptivelimiter.NewBuilder[any]().Build()
		b.ReportAllocs()
		for b.Loop() {
			p, ok := l.TryAcquirePermit()
			if !ok {
				b.Fatal("refused")
			}
			p.Record()
		}
	})
	b.Run("shed-parallel", func(b *testing.B) {
		s, _ := New(Config{Gate: GateConfig{Limit: LimitConfig{Initial: 1000, Max: 1000}}})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if p, ok := s.TryAcquire(time.Now(), signals.Default, 1); ok {
					s.Release(time.Now(), p)
				}
			}
		})
	})
}

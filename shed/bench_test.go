package shed

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/brownout/brownout/dimmer"
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

// BenchmarkKeyFraction: the cascade's choice of a client, on the request
// path while it sheds: the unkeyed FNV-1a it used (an outsider could
// compute it) beside the keyed SipHash-2-4, under the Shedder's own seed
// and under a fleet's seed from Config.ShedSeed.
func BenchmarkKeyFraction(b *testing.B) {
	own, _ := New(Config{})
	seed := dimmer.ShedSeed{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	fleet, _ := New(Config{ShedSeed: func() (dimmer.ShedSeed, bool) { return seed, true }})
	var sink float64
	for _, key := range []string{"u:user-1234567", "u:" + strings.Repeat("0123456789abcdef", 4)[:62]} {
		n := strconv.Itoa(len(key))
		b.Run("unkeyed-fnv1a/"+n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink += fnv1a(key)
			}
		})
		b.Run("keyed-siphash/"+n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink += own.keyFraction(key)
			}
		})
		b.Run("keyed-siphash-fleet-seed/"+n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink += fleet.keyFraction(key)
			}
		})
	}
	_ = sink
}

package signals

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

func TestBucketIndexBounds(t *testing.T) {
	// Every bucket's bounds map back to it, buckets tile the range without
	// gaps, and no bucket is wider than 1/32 of its lower bound.
	for i := 0; i < NumBuckets; i++ {
		lo, hi := BucketLower(i), BucketUpper(i)
		require.Less(t, lo, hi, "bucket %d empty", i)
		assert.Equal(t, i, bucketIndex(lo), "lower bound of %d", i)
		assert.Equal(t, i, bucketIndex(hi-1), "upper bound of %d", i)
		if lo >= 2*subCount {
			assert.LessOrEqual(t, float64(hi-lo)/float64(lo), 1.0/subCount, "width of %d", i)
		}
	}
	assert.Equal(t, uint64(MaxValue)+1, BucketUpper(NumBuckets-1))
	assert.Equal(t, NumBuckets-1, bucketIndex(uint64(MaxValue)))
}

func TestBucketMidRelativeError(t *testing.T) {
	// From 1 µs to 60 s every value is within 1/64 of its bucket's midpoint.
	r := rand.New(rand.NewPCG(1, 2))
	worst := 0.0
	for range 200000 {
		v := uint64(math.Exp(r.Float64()*(math.Log(60e9)-math.Log(1e3))) * 1e3)
		mid := bucketMid(bucketIndex(v))
		worst = max(worst, math.Abs(mid-float64(v))/float64(v))
	}
	assert.LessOrEqual(t, worst, 1.0/64, "worst relative error")
}

func TestWindowClampsBadDurations(t *testing.T) {
	w := NewWindow(WindowConfig{})
	w.Summary(t0)
	for _, d := range []time.Duration{-time.Second, 0, math.MaxInt64, MaxValue + 1} {
		w.Record(d)
	}
	w.Record(time.Millisecond)
	s := w.Summary(t0)
	assert.Equal(t, uint64(5), s.Count)
	assert.Equal(t, uint64(4), w.Clamped())
	assert.Equal(t, MaxValue, s.Max)
}

func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[rankFor(q, uint64(len(sorted)))-1]
}

func TestWindowAccuracy(t *testing.T) {
	const n = 100000
	r := rand.New(rand.NewPCG(7, 11))
	dists := map[string]func() time.Duration{
		"uniform": func() time.Duration { return time.Duration(1e6 + r.Float64()*999e6) }, // 1 ms – 1 s
		"lognormal": func() time.Duration {
			return time.Duration(math.Exp(math.Log(50e6) + 0.8*r.NormFloat64()))
		},
		"bimodal": func() time.Duration {
			if r.Float64() < 0.9 {
				return time.Duration(5e6 + 1e6*r.NormFloat64()) // fast path ~5 ms
			}
			return time.Duration(800e6 + 100e6*r.NormFloat64()) // slow path ~800 ms
		},
	}
	for name, gen := range dists {
		t.Run(name, func(t *testing.T) {
			w := NewWindow(WindowConfig{})
			w.Summary(t0)
			samples := make([]time.Duration, n)
			var sum time.Duration
			for i := range samples {
				d := max(gen(), time.Microsecond)
				samples[i] = d
				sum += d
				w.Record(d)
			}
			slices.Sort(samples)
			s := w.Summary(t0.Add(500 * time.Millisecond))
			require.Equal(t, uint64(n), s.Count)
			for _, c := range []struct {
				q   float64
				got time.Duration
			}{{0.5, s.P50}, {0.9, s.P90}, {0.99, s.P99}, {0.999, s.P999}} {
				want := exactQuantile(samples, c.q)
				rel := math.Abs(float64(c.got-want)) / float64(want)
				assert.LessOrEqual(t, rel, 0.02, "p%v: got %v, want %v", c.q*100, c.got, want)
			}
			assert.Equal(t, samples[n-1], s.Max, "max")
			assert.InEpsilon(t, float64(sum/n), float64(s.Mean), 1.0/64, "mean")
		})
	}
}

func TestWindowSlides(t *testing.T) {
	w := NewWindow(WindowConfig{Slices: 3, Width: time.Second})
	w.Summary(t0)
	w.Record(10 * time.Millisecond)
	w.Summary(t0.Add(1100 * time.Millisecond)) // second slice
	w.Record(20 * time.Millisecond)
	w.Record(20 * time.Millisecond)
	s := w.Summary(t0.Add(2500 * time.Millisecond))
	assert.Equal(t, uint64(3), s.Count, "all three slices live")
	s = w.Summary(t0.Add(3 * time.Second)) // the first slice expires
	assert.Equal(t, uint64(2), s.Count, "first slice expired")
	assert.InDelta(t, float64(20*time.Millisecond), float64(s.Max), float64(time.Millisecond))
	s = w.Summary(t0.Add(time.Hour)) // long idle: everything expires at once
	assert.Equal(t, uint64(0), s.Count)
	assert.Equal(t, time.Duration(0), s.P99)

	var total uint64
	w.Cumulative(t0.Add(time.Hour), func(_ *[NumBuckets]uint64, sum float64, count uint64) {
		total = count
		assert.InEpsilon(t, float64(50*time.Millisecond), sum, 1.0/64)
	})
	assert.Equal(t, uint64(3), total, "cumulative keeps expired samples")
}

var durs = func() []time.Duration {
	r := rand.New(rand.NewPCG(3, 4))
	d := make([]time.Duration, 4096)
	for i := range d {
		d[i] = time.Duration(math.Exp(math.Log(20e6) + r.NormFloat64()))
	}
	return d
}()

func BenchmarkRecord(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		w := NewWindow(WindowConfig{})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			w.Record(durs[i&4095])
		}
	})
	b.Run("ours-parallel", func(b *testing.B) {
		w := NewWindow(WindowConfig{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(4096)
			for pb.Next() {
				w.Record(durs[i&4095])
				i++
			}
		})
	})
	// 32 goroutines per P, like a server's connections: several writers
	// share each P, which is where the pinned build (one shard per P) and
	// the default (one shard per goroutine) differ most.
	b.Run("ours-parallel-x32", func(b *testing.B) {
		w := NewWindow(WindowConfig{})
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(4096)
			for pb.Next() {
				w.Record(durs[i&4095])
				i++
			}
		})
	})
	b.Run("client_golang-classic", func(b *testing.B) {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.DefBuckets})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			h.Observe(durs[i&4095].Seconds())
		}
	})
	b.Run("client_golang-classic-parallel", func(b *testing.B) {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.DefBuckets})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(4096)
			for pb.Next() {
				h.Observe(durs[i&4095].Seconds())
				i++
			}
		})
	})
}

func BenchmarkRotateP99(b *testing.B) {
	b.Run("shards=default", func(b *testing.B) { benchRotateP99(b, NewWindow(WindowConfig{})) })
	b.Run("shards=1", func(b *testing.B) { benchRotateP99(b, NewWindow(WindowConfig{Shards: 1})) })
}

func benchRotateP99(b *testing.B, w *Window) {
	now := t0
	w.Summary(now)
	for i := range 10 {
		for _, d := range durs {
			w.Record(d)
		}
		now = now.Add(time.Second)
		w.Summary(now)
		_ = i
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second) // every call rotates one slice
		w.Record(durs[0])
		if _, ok := w.Quantile(now, 0.99); !ok {
			b.Fatal("empty")
		}
	}
}

// TestWindowWriterHeldUpWhileTheRingTurns takes Record's steps one at a
// time and turns the ring all the way round between any two of them, as a
// writer preempted mid-Record sees it: the sample, the smallest and then the
// largest ever, is counted by the next read whatever the point, and in the
// window while its count landed in a live slot. (A slot's
// extremes bounded the scan before: a writer whose slot had been read and
// left before it marked it lost its count for good — the concurrent test
// below lost 139 of 80000 so once in CI.)
func TestWindowWriterHeldUpWhileTheRingTurns(t *testing.T) {
	steps := []func(w *Window, v uint64){
		(*Window).widen,
		func(w *Window, v uint64) { w.shards[shardHint()&w.mask][bucketIndex(v)].Add(1) },
		(*Window).markSlot,
	}
	for _, v := range []uint64{uint64(time.Microsecond), uint64(time.Second)} {
		for turnAt := range steps {
			w := NewWindow(WindowConfig{Slices: 3, Width: time.Millisecond})
			now := t0
			w.Record(time.Millisecond)
			w.Summary(now)
			for i, step := range steps {
				if i == turnAt {
					for range 4 { // past every slot, the writer's own among them
						now = now.Add(time.Millisecond)
						w.Summary(now)
					}
				}
				step(w, v)
			}
			w.Cumulative(now, func(_ *[NumBuckets]uint64, _ float64, count uint64) {
				assert.Equal(t, uint64(2), count, "%v, ring turned before step %d", time.Duration(v), turnAt)
			})
			inWindow := uint64(1) // the ring turned before its count landed
			if turnAt > 1 {
				inWindow = 0 // it landed in a slot that has since gone
			}
			assert.Equal(t, inWindow, w.Summary(now).Count, "%v, ring turned before step %d", time.Duration(v), turnAt)
		}
	}
}

// TestWindowConcurrentConservation runs writers against a rotating reader
// (under -race in CI) and checks that no sample is lost from the cumulative
// counts.
func TestWindowConcurrentConservation(t *testing.T) {
	w := NewWindow(WindowConfig{Slices: 3, Width: time.Millisecond})
	const writers, per = 4, 20000
	done := make(chan struct{})
	go func() {
		now := t0
		for {
			select {
			case <-done:
				return
			default:
				now = now.Add(time.Millisecond)
				w.Summary(now)
			}
		}
	}()
	finished := make(chan struct{}, writers)
	for g := range writers {
		go func() {
			for i := range per {
				w.Record(durs[(g*per+i)&4095])
			}
			finished <- struct{}{}
		}()
	}
	for range writers {
		<-finished
	}
	close(done)
	w.Cumulative(t0.Add(time.Hour), func(_ *[NumBuckets]uint64, _ float64, count uint64) {
		assert.Equal(t, uint64(writers*per), count, "samples lost")
	})
}

// TestWindowShards: a window keeps the shards it is configured with
// (rounded up to a power of two, at most maxShards; by GOMAXPROCS when
// 0), and what it reads does not depend on them — concurrent writers
// included, whatever shard their hint picks.
func TestWindowShards(t *testing.T) {
	for _, tc := range []struct{ cfg, want int }{{0, shardCount()}, {1, 1}, {3, 4}, {8, 8}, {100, maxShards}} {
		assert.Len(t, NewWindow(WindowConfig{Shards: tc.cfg}).shards, tc.want, "Shards %d", tc.cfg)
	}
	var sums []Summary
	for _, n := range []int{1, 0} {
		w := NewWindow(WindowConfig{Shards: n})
		w.Summary(t0)
		done := make(chan struct{})
		for g := range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := range 2000 {
					w.Record(time.Duration(1+(g*2000+i)%997) * time.Millisecond)
				}
			}()
		}
		for range 4 {
			<-done
		}
		sums = append(sums, w.Summary(t0.Add(time.Second)))
	}
	assert.Equal(t, uint64(8000), sums[0].Count)
	assert.Equal(t, sums[1], sums[0], "one shard reads as many")
}

// TestRecorderSojournWindowTakesTheLatencys: a sojourn window without
// slices takes the latency window's, whether or not it sets its shards.
func TestRecorderSojournWindowTakesTheLatencys(t *testing.T) {
	lat := WindowConfig{Slices: 3, Width: 2 * time.Second, Shards: 2}
	for _, tc := range []struct {
		sojourn WindowConfig
		shards  int
	}{{WindowConfig{}, 2}, {WindowConfig{Shards: 1}, 1}} {
		r := NewRecorder(Config{Latency: lat, Sojourn: SojournConfig{Window: tc.sojourn}})
		w := r.sojourn[0].w
		assert.Len(t, w.mu.ext, 3, "%+v: the latency's slices", tc.sojourn)
		assert.Equal(t, 2*time.Second, w.mu.cfg.Width, "%+v", tc.sojourn)
		assert.Len(t, w.shards, tc.shards, "%+v", tc.sojourn)
	}
}

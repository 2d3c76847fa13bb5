package dimmer

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/signals"
)

// flapP99 is the p99 of the sojourns of an M/M/1 queue's completions over
// the last ticks, each tick's sojourns Exp(μᵢ − λ) (10 s where μᵢ ≤ λ).
func flapP99(mus []float64, lam float64) float64 {
	tail := func(x float64) float64 {
		s := 0.0
		for _, mu := range mus {
			if mu <= lam*1.001 {
				s += 1
				continue
			}
			s += math.Exp(-(mu - lam) * x)
		}
		return s / float64(len(mus))
	}
	lo, hi := 0.0, 10.0
	if tail(hi) > 0.01 {
		return 10
	}
	for range 60 {
		mid := (lo + hi) / 2
		if tail(mid) > 0.01 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// runFlap runs a gateless service (its load and its requests' own work
// measured, no gate) at lam requests a second whose all-off work flaps
// after the first minute: slow for slowFor seconds, fast for fastFor. It
// returns the share of the periods after the first minute whose p99 is
// over target, the falls of the all-off work the law found, the periods
// it held stale (see correctK's staleWork), and K at the end.
func runFlap(t *testing.T, seed uint64, lam, fast, slow float64, slowFor, fastFor int, secs int) (overFrac float64, falls, stale int, kEnd float64) {
	const target = 0.3
	costs := []float64{0.5, 0.3}
	rng := rand.New(rand.NewPCG(seed, 11))
	c, err := New(Config{
		Targets:  []Target{{Signal: signals.LatencyP99, Target: target}},
		Features: []Feature{{Name: "recommendations", Cost: 0.5}, {Name: "reviews", Cost: 0.3, Rank: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	levels := []float64{1, 1}
	var mus []float64
	over, n := 0, 0
	lastBaseAt := time.Time{}
	for i := range secs {
		now = now.Add(time.Second)
		w0 := fast
		if i >= 60 && (i-60)%(slowFor+fastFor) < slowFor {
			w0 = slow
		}
		w := w0 * (1 + costs[0]*levels[0] + costs[1]*levels[1])
		mus = append(mus, 1/w)
		if len(mus) > 10 {
			mus = mus[1:]
		}
		p := flapP99(mus, lam) * (1 + 0.05*rng.NormFloat64())
		var work signals.Moments
		for range int(lam) {
			work.Add(w * rng.ExpFloat64())
		}
		var s signals.Snapshot
		s.Time = now
		s.Window = 10 * time.Second
		s.Set(signals.LatencyP99, p)
		s.Set(signals.ArrivalRate, lam)
		s.Set(signals.Throughput, lam)
		s.Work = work
		s.Recent = signals.ClassCounts{Arrived: uint64(lam), Completed: uint64(lam)}
		s.RecentSpan, s.RecentAt = time.Second, now
		st := c.Step(now, s)
		levels[0], levels[1] = st.LevelAt(0, -1), st.LevelAt(1, -1)
		m := &c.mu.mdl
		if !m.baseAt.Equal(lastBaseAt) {
			lastBaseAt = m.baseAt
			if m.baseFell {
				falls++
			}
		}
		if m.baseFell && !m.baseAt.IsZero() && now.Sub(m.baseAt) < 10*time.Second {
			stale++
		}
		if i >= 60 {
			n++
			if p > target {
				over++
			}
		}
	}
	return float64(over) / float64(n), falls, stale, c.mu.mdl.capacity.k
}

// TestModelLawFlappingWork: a service without a gate whose dependency
// flaps — every request's all-off work 4 ms, then 8 ms, every few seconds
// — at 100 requests a second, where 8 ms with every feature on is more
// than the service can do. Each fall of the work holds the next window
// stale (see correctK), K is given back for the faster work, and the
// regime sums start afresh: the p99 of the 10-s window is over target
// 0.84 of the time on average over the nine runs (0.80–0.92; a service
// slow throughout, 0.05) — a window's pressure cannot follow a service
// that changes within it. With the sums kept through the stale windows,
// 0.68, but the slow answers' last feature back 15 s after them, not 7.
// The bound holds the law to what it does: with windows held stale after
// the work's rises too, 0.94.
func TestModelLawFlappingWork(t *testing.T) {
	sum, n := 0.0, 0
	for _, tc := range []struct{ slowFor, fastFor int }{{4, 4}, {6, 3}, {3, 5}} {
		for seed := uint64(1); seed <= 3; seed++ {
			of, falls, stale, k := runFlap(t, seed, 100, 0.004, 0.008, tc.slowFor, tc.fastFor, 300)
			t.Logf("slow %d s / fast %d s, seed %d: p99 over target %.2f of the time after the first minute; falls %d, periods held stale %d; K %.3f", tc.slowFor, tc.fastFor, seed, of, falls, stale, k)
			assert.Positive(t, falls, "the falls are found")
			sum += of
			n++
		}
	}
	t.Logf("p99 over target %.2f of the time on average", sum/float64(n))
	assert.Less(t, sum/float64(n), 0.88, "the share of the time over target, on average")
}

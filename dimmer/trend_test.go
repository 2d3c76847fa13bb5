package dimmer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// poisson is a period's arrival rate at load lam over one second: Poisson,
// by its normal approximation (the loads here are 50/s and more).
func poisson(rng *rand.Rand, lam float64) float64 {
	return max(0, math.Round(lam+math.Sqrt(lam)*rng.NormFloat64()))
}

// runTrend feeds the bank n periods of Poisson arrivals at load(i) and
// returns the RMS error of its predictions of the next period's load
// (the true rate, not the count) over the periods from warm on, each of
// its filters' own, and the bank.
func runTrend(seed uint64, n, warm int, load func(i int) float64) (float64, [len(trendPaces)]float64, *trend) {
	rng := rand.New(rand.NewPCG(11, seed))
	var b trend
	var sum float64
	var each [len(trendPaces)]float64
	for i := range n {
		x := poisson(rng, load(i))
		v := max(x, 1)
		if !b.ok {
			b.restart(x, v)
			continue
		}
		if i >= warm {
			e := b.predict(1) - load(i)
			sum += e * e
			for j, f := range b.f {
				e := f.level + f.slope - load(i)
				each[j] += e * e
			}
		}
		b.update(x, v, false)
	}
	for j := range each {
		each[j] = math.Sqrt(each[j] / float64(n-warm))
	}
	return math.Sqrt(sum / float64(n-warm)), each, &b
}

// TestTrendFollowsASwing: on a sine the bank predicts the next period's
// load better than the load's tracker (which follows a level, and runs
// behind), and within a few per cent of the best of its paces, whichever
// that is.
func TestTrendFollowsASwing(t *testing.T) {
	for _, tc := range []struct {
		name           string
		mean, amp, per float64
	}{
		{"one worker's, 30 s", 50, 25, 30},
		{"four workers', 30 s", 200, 100, 30},
		{"ten seconds", 200, 80, 10},
		{"a minute", 50, 20, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := func(i int) float64 { return tc.mean + tc.amp*math.Sin(2*math.Pi*float64(i)/tc.per) }
			const seeds = 5
			var bank, track float64
			var each [len(trendPaces)]float64
			for seed := range uint64(seeds) {
				rms, e, _ := runTrend(seed, 300, 60, load)
				bank += rms / seeds
				for j := range each {
					each[j] += e[j] / seeds
				}
				// The tracker, as the law runs it for the load.
				rng := rand.New(rand.NewPCG(11, seed))
				tr := tracker{moves: true}
				var sum float64
				for i := range 300 {
					x := poisson(rng, load(i))
					if i >= 60 {
						e := tr.est - load(i)
						sum += e * e
					}
					tr.update(x, max(x, 1), fastWeight(5), true)
				}
				track += math.Sqrt(sum/240) / seeds
			}
			best := slices.Min(each[:])
			t.Logf("RMS error of the next period's load: the bank %.1f/s, its best pace alone %.1f/s (of %.1f), the tracker %.1f/s; a period's noise %.1f/s", bank, best, each, track, math.Sqrt(tc.mean))
			assert.Less(t, bank, 1.1*best, "within a tenth of its best pace")
			assert.Less(t, bank, 0.8*track, "ahead of the tracker")
		})
	}
}

// TestTrendMargin: the bank's margin is what its predictions miss beyond
// the periods' noise — for a load that holds, the predictions' own
// uncertainty, under a period's noise; on a fast swing, the size of its
// misses.
func TestTrendMargin(t *testing.T) {
	var holds, swings float64
	for seed := range uint64(5) {
		_, _, b := runTrend(seed, 300, 60, func(int) float64 { return 200 })
		holds = max(holds, b.margin(200))
		_, _, b = runTrend(seed, 300, 60, func(i int) float64 { return 200 + 100*math.Sin(2*math.Pi*float64(i)/10) })
		swings = min(swings+b.margin(200), math.Inf(1))
	}
	t.Logf("margin: %.1f/s at most for a load that holds, %.1f/s on average on a 10 s swing of ±100/s", holds, swings/5)
	assert.Less(t, holds, math.Sqrt(200), "a load that holds: within a period's noise")
	assert.Greater(t, swings/5, 2*math.Sqrt(200), "a fast swing: twice a period's noise and more")
}

// TestTrendIgnoresWhatIsNoValue: a value or variance that is not a
// number, or a variance that is not positive, moves nothing; a period not
// measured moves each filter on by its slope.
func TestTrendIgnoresWhatIsNoValue(t *testing.T) {
	var b trend
	b.update(100, 100, false) // not started: nothing
	assert.False(t, b.ok)
	b.restart(100, 100)
	for i := range 20 {
		b.update(100+5*float64(i+1), 100, false)
	}
	before := b
	for _, bad := range [][2]float64{{math.NaN(), 100}, {math.Inf(1), 100}, {200, 0}, {200, -1}, {200, math.NaN()}, {200, math.Inf(1)}} {
		b.update(bad[0], bad[1], false)
		assert.Equal(t, before, b, "x %v v %v", bad[0], bad[1])
	}
	p := b.predict(2)
	b.update(0, 100, true) // a period held out: the filters move on
	assert.InDelta(t, p, b.predict(1), 1e-9, "a period not measured moves the prediction on by a period")
	assert.Equal(t, before.n, b.n, "and is no error of the bank's")
	assert.False(t, math.IsNaN(b.predict(1)))
}

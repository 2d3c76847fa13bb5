package dimmer

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// tickTallies draws one tick of n requests whose all-off work is base
// seconds (exponential), each feature on with its level, independently,
// adding its extra seconds.
func tickTallies(rng *rand.Rand, n int, base float64, names []string, extra, levels []float64) []signals.Tally {
	ts := make([]signals.Tally, len(names))
	for i := range ts {
		ts[i].Feature = names[i]
	}
	on := make([]bool, len(names))
	for range n {
		work := base
		for i := range names {
			on[i] = rng.Float64() < levels[i]
			if on[i] {
				work += extra[i]
			}
		}
		x := work * rng.ExpFloat64()
		for i := range names {
			if on[i] {
				ts[i].On.Add(x)
			} else {
				ts[i].Off.Add(x)
			}
		}
	}
	return ts
}

// TestCostsLearned: two features of 0.5 and 0.2 of the all-off request's
// work, at fractional levels, 200 requests a tick with exponential service
// times: within a minute both are known within 20 % or 0.05, the bound of
// the acceptance.
func TestCostsLearned(t *testing.T) {
	names := []string{"recommendations", "reviews"}
	c := newCosts([]Feature{{Name: names[0]}, {Name: names[1]}})
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(0, 0)
	for range 60 {
		now = now.Add(time.Second)
		c.observe(now, time.Time{}, time.Time{}, 0, tickTallies(rng, 200, 0.010, names, []float64{0.005, 0.002}, []float64{0.5, 0.3}), 1)
	}
	for i, want := range []float64{0.5, 0.2} {
		e := c.estimate(i)
		require.True(t, e.Known())
		assert.InDelta(t, want, e.Value, max(0.2*want, 0.05), "%s: %.3f ± %.3f", names[i], e.Value, e.SE)
		assert.Less(t, e.SE, 0.05)
		assert.Equal(t, 60, e.Contrasted)
	}
	assert.InEpsilon(t, 0.010, c.estimate(0).Base, 0.1)
}

// TestCostsNotPooledAcrossTicks: the load rises and falls; when it is high
// every request is slower (the base doubles) and the feature's level is
// low. Pooling the requests of all ticks would read the rendered requests
// as the cheap ones; within each tick the contrast holds.
func TestCostsNotPooledAcrossTicks(t *testing.T) {
	names := []string{"recommendations"}
	c := newCosts([]Feature{{Name: names[0]}})
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Unix(0, 0)
	var pooled signals.Tally
	for k := range 120 {
		now = now.Add(time.Second)
		base, level := 0.010, 0.9
		if k%20 >= 10 {
			base, level = 0.030, 0.1 // busy: slower, and dimmed
		}
		ts := tickTallies(rng, 200, base, names, []float64{0.3 * base}, []float64{level})
		pooled.Merge(ts[0])
		c.observe(now, time.Time{}, time.Time{}, 0, ts, 1)
	}
	e := c.estimate(0)
	assert.InEpsilon(t, 0.3, e.Value, 0.15, "%.3f ± %.3f", e.Value, e.SE)
	naive := (pooled.On.Mean() - pooled.Off.Mean()) / pooled.Off.Mean()
	assert.Less(t, naive, 0.0, "pooled across ticks, the feature would look free (%.2f)", naive)
}

// TestCostsUnknownAndBadInput: a feature always on is never contrasted
// and stays unknown; tallies of unknown features, empty sides and NaNs
// change nothing.
func TestCostsUnknownAndBadInput(t *testing.T) {
	c := newCosts([]Feature{{Name: "a"}, {Name: "b"}})
	now := time.Unix(0, 0)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10 {
		now = now.Add(time.Second)
		ts := tickTallies(rng, 100, 0.01, []string{"a", "b"}, []float64{0.005, 0.005}, []float64{1, 0.5})
		ts = append(ts, signals.Tally{Feature: "nope", On: signals.Moments{N: 9, Sum: math.NaN()}})
		c.observe(now, time.Time{}, time.Time{}, 0, ts, 1)
	}
	assert.False(t, c.estimate(0).Known(), "always on: unknown")
	assert.True(t, c.estimate(1).Known())
	assert.Zero(t, c.estimate(0).Contrasted)
	c.observe(now.Add(time.Second), time.Time{}, time.Time{}, 0, nil, 1)
	c.observe(now.Add(2*time.Second), time.Time{}, time.Time{}, 0, []signals.Tally{{Feature: "b", On: signals.Moments{N: 10, Sum: math.Inf(1), SumSq: math.Inf(1)}, Off: signals.Moments{N: 10, Sum: 1, SumSq: 1}}}, 1)
	assert.False(t, math.IsNaN(c.estimate(1).Value) || math.IsInf(c.estimate(1).Value, 0))
}

// TestCostsStepAllocatesNothing: folding a tick's tallies into the
// estimates allocates nothing.
func TestCostsStepAllocatesNothing(t *testing.T) {
	c := newCosts([]Feature{{Name: "a"}, {Name: "b"}})
	ts := tickTallies(rand.New(rand.NewPCG(7, 8)), 100, 0.01, []string{"a", "b"}, []float64{0.005, 0.002}, []float64{0.5, 0.5})
	now := time.Unix(0, 0)
	allocs := testing.AllocsPerRun(100, func() {
		now = now.Add(time.Second)
		c.observe(now, time.Time{}, time.Time{}, 0, ts, 1)
	})
	assert.Zero(t, allocs)
}

// TestCostsUnbiased: over 40 runs of the minute above, the mean estimate
// is within 3 % of each cost (weighing ticks by their sample variances
// read the feature of 0.2 as 0.17).
func TestCostsUnbiased(t *testing.T) {
	names := []string{"recommendations", "reviews"}
	want := []float64{0.5, 0.2}
	sum := make([]float64, 2)
	const runs = 40
	for seed := uint64(1); seed <= runs; seed++ {
		c := newCosts([]Feature{{Name: names[0]}, {Name: names[1]}})
		rng := rand.New(rand.NewPCG(seed, 2))
		now := time.Unix(0, 0)
		for range 60 {
			now = now.Add(time.Second)
			c.observe(now, time.Time{}, time.Time{}, 0, tickTallies(rng, 200, 0.010, names, []float64{0.005, 0.002}, []float64{0.5, 0.3}), 1)
		}
		for i := range sum {
			sum[i] += c.estimate(i).Value
		}
	}
	for i := range sum {
		assert.InEpsilon(t, want[i], sum[i]/runs, 0.03, names[i])
	}
}

// TestCostsTinyBaseIsNotKnown: a base so small that the cost divides to
// infinity is not an estimate (it must not reach /v1/state's JSON).
func TestCostsTinyBaseIsNotKnown(t *testing.T) {
	c := newCosts([]Feature{{Name: "a"}})
	now := time.Unix(0, 0)
	on := signals.Moments{N: 5, Sum: 5, SumSq: 5}
	off := signals.Moments{N: 5, Sum: 5e-310, SumSq: 0}
	c.observe(now, time.Time{}, time.Time{}, 0, []signals.Tally{{Feature: "a", On: on, Off: off}}, 1)
	c.observe(now.Add(time.Second), time.Time{}, time.Time{}, 0, []signals.Tally{{Feature: "a", On: signals.Moments{}, Off: signals.Moments{N: 1005, Sum: 1e-307}}}, 1)
	e := c.estimate(0)
	assert.False(t, math.IsInf(e.Value, 0) && e.Known(), "%+v", e)
	assert.False(t, e.Known() && (math.IsInf(e.Value, 0) || math.IsInf(e.SE, 0)))
}

// mergeTallies adds b's moments into a's, feature by feature (the same
// features in the same order).
func mergeTallies(a, b []signals.Tally) []signals.Tally {
	for i := range a {
		a[i].On.Merge(b[i].On)
		a[i].Off.Merge(b[i].Off)
	}
	return a
}

// TestCostsSkipATickOfTwoSetsOfLevels: the tick after the levels fell
// from all on to all off tallies requests of both — those that began
// before drew both features, those after neither — and reviews' contrast
// there holds recommendations' cost too (a Δ of 20 ms where reviews cost
// 5). Where both features' levels moved within a tick of the interval,
// the contrast is skipped; where only the other feature's moved, the two
// populations do not differ in reviews, and it is kept.
func TestCostsSkipATickOfTwoSetsOfLevels(t *testing.T) {
	names := []string{"recommendations", "reviews"}
	extra := []float64{0.015, 0.005}
	learn := func() (*costs, *rand.Rand, time.Time) {
		c := newCosts([]Feature{{Name: names[0]}, {Name: names[1]}})
		rng := rand.New(rand.NewPCG(5, 6))
		now := time.Unix(0, 0)
		for range 60 {
			now = now.Add(time.Second)
			c.observe(now, now.Add(-time.Second), now, time.Second, tickTallies(rng, 200, 0.010, names, extra, []float64{0.5, 0.5}), 1)
		}
		return c, rng, now
	}
	// A tick of 300 requests that began at all on and 100 at all off.
	mixedTick := func(rng *rand.Rand) []signals.Tally {
		return mergeTallies(tickTallies(rng, 300, 0.010, names, extra, []float64{1, 1}), tickTallies(rng, 100, 0.010, names, extra, []float64{0, 0}))
	}

	c, rng, now := learn()
	before := c.estimate(1)
	c.movedAt[0], c.movedAt[1] = now, now // both fell at the last tick
	now = now.Add(time.Second)
	for range 5 {
		c.observe(now, now.Add(-time.Second), now, time.Second, mixedTick(rng), 1)
	}
	after := c.estimate(1)
	assert.Equal(t, before.Seconds, after.Seconds, "reviews' contrast taken from a tick of two sets of levels")

	c, rng, now = learn()
	before = c.estimate(1)
	c.movedAt[0], c.movedAt[1] = now, now
	now = now.Add(2 * time.Second) // a tick later: its requests all began after the move
	c.observe(now, now.Add(-time.Second), now, time.Second, tickTallies(rng, 200, 0.010, names, extra, []float64{0.5, 0.5}), 1)
	assert.NotEqual(t, before.Seconds, c.estimate(1).Seconds, "a tick whose requests began after the move is contrasted")

	c, rng, now = learn()
	before = c.estimate(1)
	now = now.Add(time.Second)
	c.movedAt[0], c.movedAt[1] = now.Add(time.Second), now.Add(time.Second) // after the interval ended
	c.observe(now, now.Add(-time.Second), now, time.Second, tickTallies(rng, 200, 0.010, names, extra, []float64{0.5, 0.5}), 1)
	assert.NotEqual(t, before.Seconds, c.estimate(1).Seconds, "a move after the interval ended is not its requests'")

	c, rng, now = learn()
	c.movedAt[0] = now // recommendations fell, reviews held at 0.5
	now = now.Add(time.Second)
	for range 20 {
		t := mergeTallies(tickTallies(rng, 300, 0.010, names, extra, []float64{1, 0.5}), tickTallies(rng, 100, 0.010, names, extra, []float64{0, 0.5}))
		c.observe(now, now.Add(-time.Second), now, time.Second, t, 1)
	}
	e := c.estimate(1)
	assert.InDelta(t, extra[1], e.Seconds, max(0.2*extra[1], 3*e.SE), "reviews, held while recommendations fell: %.4f ± %.4f", e.Seconds, e.SE)
}

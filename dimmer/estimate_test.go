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
		c.observe(now, tickTallies(rng, 200, 0.010, names, []float64{0.005, 0.002}, []float64{0.5, 0.3}), 1)
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
		c.observe(now, ts, 1)
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
		c.observe(now, ts, 1)
	}
	assert.False(t, c.estimate(0).Known(), "always on: unknown")
	assert.True(t, c.estimate(1).Known())
	assert.Zero(t, c.estimate(0).Contrasted)
	c.observe(now.Add(time.Second), nil, 1)
	c.observe(now.Add(2*time.Second), []signals.Tally{{Feature: "b", On: signals.Moments{N: 10, Sum: math.Inf(1), SumSq: math.Inf(1)}, Off: signals.Moments{N: 10, Sum: 1, SumSq: 1}}}, 1)
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
		c.observe(now, ts, 1)
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
			c.observe(now, tickTallies(rng, 200, 0.010, names, []float64{0.005, 0.002}, []float64{0.5, 0.3}), 1)
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
	c.observe(now, []signals.Tally{{Feature: "a", On: on, Off: off}}, 1)
	c.observe(now.Add(time.Second), []signals.Tally{{Feature: "a", On: signals.Moments{}, Off: signals.Moments{N: 1005, Sum: 1e-307}}}, 1)
	e := c.estimate(0)
	assert.False(t, math.IsInf(e.Value, 0) && e.Known(), "%+v", e)
	assert.False(t, e.Known() && (math.IsInf(e.Value, 0) || math.IsInf(e.SE, 0)))
}

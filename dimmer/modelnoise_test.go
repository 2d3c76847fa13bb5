package dimmer

// The model law's noise band (withinNoise) against what must still move
// the levels: the ends, an overload, and a reason that says what held.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
)

// TestModelOverloadAtTheFloorsReachesThem: the law's budget is 0 (the
// floors do not fit the load) and the latency is three times its target at
// a full gate: the levels must be at their floors, the only place the
// cascade (which needs b ≤ 0 and CascadeHold over CascadeAt) can start
// from. (The noise band held them at 0.002, and shedding started two
// periods late.)
func TestModelOverloadAtTheFloorsReachesThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(0, 9))
	r := newModelRig(t)
	r.workers = 1
	r.periods(60, 60)
	for range 11 {
		r.period(math.Round(91 + math.Sqrt(91)*rng.NormFloat64()))
	}
	for i := range 10 {
		lam := math.Round(91 + math.Sqrt(91)*rng.NormFloat64())
		s := r.snap(lam, r.c.State(), 5*time.Second)
		s.Set(signals.LatencyP99, 0.9) // 3× the 300 ms target
		s.Set(signals.GateBusy, 1)
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		st := r.c.Step(r.now, s)
		c := r.c
		c.mu.Lock()
		b, budget, p, high := c.mu.brightness, c.mu.why.budget, c.mu.pressure, c.cfg.High
		c.mu.Unlock()
		if budget <= 0 && p >= high {
			assert.LessOrEqual(t, b, 0.0, "period %d, pressure %.2f, budget 0: %s", i, p, st.Reason)
		}
	}
}

// TestModelReachesTheCeilingWhenTheBudgetIsFull: once the law's own
// budget is full brightness (w.budget ≥ the ceiling), the levels go there in
// that period: a move to either end is made however small, and the noise
// band does not hold it (it did: 0.947 for four periods).
func TestModelReachesTheCeilingWhenTheBudgetIsFull(t *testing.T) {
	r := newModelRig(t)
	r.periods(40, 200)
	r.periods(15, 230)
	r.periods(15, 170)
	for i := range 15 {
		r.period(120) // full brightness fits: 4 workers / 0.03 s = 133/s
		c := r.c
		c.mu.Lock()
		b, budget, ceil := c.mu.brightness, c.mu.why.budget, c.ceiling()
		c.mu.Unlock()
		if budget >= ceil {
			assert.Equal(t, ceil, b, "period %d at 120/s: the budget is the ceiling (%.3f), the levels stay at %.3f", i, budget, b)
		}
	}
}

// TestModelReachesTheFloorWhenTheBudgetIsNothing: the same at the
// floors (`!(target <= 0 && b > 0)`): a budget of 0 takes the levels to
// their floors — the only place from which the cascade (b ≤ 0) can start.
// A Poisson load of 91/s where the floors carry about 92/s.
func TestModelReachesTheFloorWhenTheBudgetIsNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(0, 9))
	r := newModelRig(t)
	r.workers = 1
	r.periods(60, 60)
	for i := range 30 {
		r.period(math.Round(91 + math.Sqrt(91)*rng.NormFloat64()))
		c := r.c
		c.mu.Lock()
		b, budget := c.mu.brightness, c.mu.why.budget
		c.mu.Unlock()
		if budget <= 0 {
			assert.LessOrEqual(t, b, 0.0, "period %d: the budget is 0, the levels stay at %.3f", i, b)
		}
	}
}

// TestModelDimsInAnObservedOverload: a Poisson load that steps from
// 25/s (full brightness fits: 1 worker / 0.03 s = 33/s) to 40/s. In a
// period whose pressure is over High (the gate refusing well over its 1 %
// target) and whose own budget lies a minMove or more under the levels, the
// law dims to the budget, however unsure the load's estimate: the pressure
// says the levels are too bright. (The noise band held them, in 8 periods
// of these 10 seeds.)
func TestModelDimsInAnObservedOverload(t *testing.T) {
	riseTo40(t, func(seed uint64, i int, c *Controller, st *State) {
		c.mu.Lock()
		b, budget, p, high := c.mu.brightness, c.mu.why.budget, c.mu.pressure, c.cfg.High
		c.mu.Unlock()
		if p >= high && budget >= 0 && budget <= b-minMove {
			t.Errorf("seed %d, period %d at 40/s: pressure %.1f, the budget %.3f, the levels held at %.3f: %s", seed, i, p, budget, b, st.Reason)
		}
	})
}

// riseTo40 runs the model rig on one worker over 10 seeds: a minute of a
// load of 25/s, then 40 periods of a Poisson load of 40/s, each of these
// checked by check.
func riseTo40(t *testing.T, check func(seed uint64, i int, c *Controller, st *State)) {
	t.Helper()
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 21))
		r := newModelRig(t)
		r.rng = rand.New(rand.NewPCG(seed, 22))
		r.workers = 1
		for range 60 {
			r.period(math.Round(25 + 5*rng.NormFloat64()))
		}
		for i := range 40 {
			st := r.period(math.Round(40 + math.Sqrt(40)*rng.NormFloat64()))
			check(seed, i, r.c, st)
		}
	}
}

// TestModelHoldReasonShowsTheLevels: a step that holds says
// "→ brightness B: holding" with B the law's budget; held within the
// estimates' noise, B may lie a twentieth or more from the levels, and the
// reason then names the levels too.
func TestModelHoldReasonShowsTheLevels(t *testing.T) {
	riseTo40(t, func(seed uint64, i int, c *Controller, _ *State) {
		c.mu.Lock()
		w, b, why := c.mu.why, c.mu.brightness, c.reason()
		c.mu.Unlock()
		if w.kind == whyHold && math.Abs(w.budget-b) >= max(minMove, c.cfg.Quantum) && !strings.Contains(why, fmt.Sprintf("levels' %.2f: holding", b)) {
			t.Errorf("seed %d, period %d: levels %.3f, the step's reason: %q", seed, i, b, why)
		}
	})
}

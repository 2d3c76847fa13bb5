package dimmer

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestTrackerReturnsToTheLevelBeforeItsJump: a request's work (a level
// that holds) at 10 ms for 300 periods, 20 ms for 60 (a dependency
// slowed), then — after a period half of each — 10 ms again, each period's
// mean within 10 %. Back, the two periods that show the return are one
// level with the estimate before the slowdown, and that estimate joins
// them by its precision: within 1 % of it at once. Back at 13 ms instead
// (three of the periods' standard errors from it), it is a new level,
// taken from its own two periods.
func TestTrackerReturnsToTheLevelBeforeItsJump(t *testing.T) {
	for _, tc := range []struct {
		name   string
		back   float64
		joined bool
	}{
		{"back where it was", 0.010, true},
		{"back elsewhere", 0.013, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 9))
			period := func(w float64) (float64, float64) {
				return w * (1 + 0.1*rng.NormFloat64()), 0.1 * w * 0.1 * w
			}
			tr := tracker{own: true}
			for range 300 {
				x, v := period(0.010)
				tr.update(x, v, 0.2, true)
			}
			before, beforeP := tr.est, tr.p
			jumps := 0
			for range 60 {
				x, v := period(0.020)
				if tr.update(x, v, 0.2, true) {
					jumps++
				}
			}
			require.Equal(t, 1, jumps, "the slowdown is one jump")
			tr.update(0.015, 0.0015*0.0015, 0.2, true) // half of each
			jumped := false
			for range 2 {
				x, v := period(tc.back)
				jumped = tr.update(x, v, 0.2, true) || jumped
			}
			require.True(t, jumped, "the return is a jump")
			if tc.joined {
				assert.InDelta(t, before, tr.est, 0.01*before, "the estimate before the slowdown, at once")
				assert.Less(t, tr.p, 0.5*0.5*0.001*0.001/2, "surer than its two periods alone")
				assert.Greater(t, tr.p, beforeP, "and no surer than the estimate before")
			} else {
				assert.InDelta(t, tc.back, tr.est, 0.1*tc.back, "a new level: its own periods")
			}
		})
	}
}

// TestReturnedAtItsEdges: a return weighed at the edges of its inputs
// stays between the two periods' mean and the old level, with a variance
// that is a number and not negative — variances too small to divide
// (5e-324), an old level known exactly, a mean far from it (a new level:
// the mean itself).
func TestReturnedAtItsEdges(t *testing.T) {
	for _, c := range []struct{ m, pv, pr, be, bp, left float64 }{
		{0.01, 5e-324, 5e-324, 0.01, 0, 0.02},
		{0.01, 1e-6, 1e-6, 0.0101, 0, 0.02},
		{0.01, 1e-12, 1e-12, 0.01, 1e-12, 0.01 + 1e-300},
		{1e6, 1e10, 1e10, 1e6 + 1, 1e8, 2e6},
	} {
		est, p := returned(c.m, c.pv, c.pr, c.be, c.bp, c.left)
		assert.False(t, math.IsNaN(est) || math.IsNaN(p) || math.IsInf(p, 0), "%+v: %v, %v", c, est, p)
		assert.GreaterOrEqual(t, p, 0.0, "%+v", c)
		assert.True(t, est >= min(c.m, c.be)-1e-12*c.m && est <= max(c.m, c.be)+1e-12*c.m, "%+v: %v between the mean and the old level", c, est)
	}
	est, _ := returned(0.013, 0.5e-6, 0.5e-6, 0.010, 1e-9, 0.020)
	assert.InDelta(t, 0.013, est, 0.0001, "four standard errors off the old level: a new level")
}

// TestTrackerSettlesOnNoiseAndFollowsSteps: a Poisson rate of 100/s seen
// a period at a time is estimated ever more precisely (within 2 % once two
// minutes of periods are in, where one period is ±10 %); a step to 150/s
// (5 standard errors of a period) is followed within a signal window (five
// periods), and one to 300/s within two; right after a jump the estimate
// follows the latest periods, within two of their standard errors; a ramp
// after a jump is followed, and the estimate settles once the level holds;
// a rise of a load is followed from one period, a fall only from two; a
// shift adds its uncertainty, so that the next periods correct a wrong
// prediction quickly.
func TestTrackerSettlesOnNoiseAndFollowsSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := tracker{moves: true}
	fast := fastWeight(5)
	for i := range 600 {
		x := 100 + 10*rng.NormFloat64() // a count of 100 a second: σ 10
		assert.False(t, tr.update(x, 100, fast, true), "period %d: noise is not a jump", i)
		if i >= 120 {
			assert.InDelta(t, 100, tr.est, 2, "period %d: the estimate within 2 %% of the rate", i)
		}
	}
	jumped := -1
	for i := range 5 {
		if tr.update(150+12*rng.NormFloat64(), 150, fast, true) && jumped < 0 {
			jumped = i
		}
	}
	assert.True(t, jumped >= 0 && jumped <= 4, "a step of 50 %% is followed within a window of five periods: %d", jumped)
	assert.InDelta(t, 150, tr.est, 24)
	for range 2 {
		tr.update(300+17*rng.NormFloat64(), 300, fast, true)
	}
	assert.InDelta(t, 300, tr.est, 30, "a step of 100 %% is followed in two periods")
	// A level that jumped and goes on moving is followed, where levels may
	// move (a ramp of 10/s:
	// within three periods of it), and once it holds the estimate settles again.
	for i := range 30 {
		l := 300 + 10*float64(i+1)
		tr.update(l+18*rng.NormFloat64(), l, fast, true)
		if i >= 5 {
			assert.InDelta(t, l, tr.est, 36, "ramp, period %d: within two standard errors of a period", i)
		}
	}
	for i := range 120 {
		tr.update(600+24*rng.NormFloat64(), 600, fast, true)
		if i >= 60 {
			assert.InDelta(t, 600, tr.est, 12, "settled again, period %d", i)
		}
	}

	// A load that triples is followed from its first period; one that
	// falls to a third, from its second.
	var up tracker
	up.moves = true
	for range 200 {
		up.update(100+10*rng.NormFloat64(), 100, fast, true)
	}
	assert.True(t, up.update(300, 300, fast, true), "a rise: at once")
	assert.InDelta(t, 300, up.est, 1e-9)
	var down tracker
	down.moves = true
	for range 200 {
		down.update(300+17*rng.NormFloat64(), 300, fast, true)
	}
	assert.False(t, down.update(100, 100, fast, true), "a fall: not from one period")
	assert.True(t, down.update(100, 100, fast, true), "…from two")
	assert.InDelta(t, 100, down.est, 1e-9)

	// Settled, and without jumps allowed: a step is followed only slowly.
	var slow tracker
	for range 200 {
		slow.update(100, 100, fast, false)
	}
	for range 5 {
		slow.update(150, 150, fast, false)
	}
	assert.Less(t, slow.est, 110.0)
}

// TestCapacityCorrectionsConverge: a correction moves K by the mean error
// times the step, once due; the step keeps while they go the same way and
// halves at each reversal, which doubles the wait; a saturation that
// brings K down after a move up is a reversal; a change of regime starts
// them afresh.
func TestCapacityCorrectionsConverge(t *testing.T) {
	t0 := time.Unix(0, 0)
	hold, win := 5*time.Second, 5*time.Second
	var e capacity
	e.saturated(t0, 10, 0, true, true, hold)
	assert.InDelta(t, setShare*10, e.k, 1e-9, "the first saturated period sets K")
	now := t0
	assert.False(t, e.due(now.Add(time.Second), win), "not within the wait")
	now = now.Add(hold)
	require.True(t, e.due(now, win))
	e.correct(now, 0.5, 10)
	assert.InDelta(t, 9+stepStart*0.5*10, e.k, 1e-9, "half a band under the set point: half a step")
	now = now.Add(hold)
	e.correct(now, 1, 10)
	assert.InDelta(t, stepStart, e.step, 1e-9, "the same way: the step stays")
	now = now.Add(hold)
	e.correct(now, -1, 10)
	assert.InDelta(t, stepStart/2, e.step, 1e-9, "a reversal halves it")
	assert.Equal(t, 2*hold, e.wait, "…and doubles the wait")
	assert.False(t, e.due(now.Add(hold), win))
	now = now.Add(2 * hold)
	require.True(t, e.due(now, win))
	e.correct(now, 1, 10)
	assert.Equal(t, 4*hold, e.wait)
	for range 10 {
		now = now.Add(maxWait)
		e.correct(now, -1, 10)
		now = now.Add(maxWait)
		e.correct(now, 1, 10)
	}
	assert.Equal(t, maxWait, e.wait)
	assert.Equal(t, stepMin, e.step)
	e.reset(now, hold)
	assert.Equal(t, stepStart, e.step)
	assert.Equal(t, hold, e.wait)
	// A saturated period over K keeps K; one under it brings K down.
	k := e.k
	e.saturated(now, 2*e.c, 0, true, true, hold)
	assert.Equal(t, k, e.k)
	e.saturated(now, k/2, 0, true, true, hold)
	assert.LessOrEqual(t, e.k, e.c)
	e.reset(now, hold)
	now = now.Add(hold)
	e.correct(now, 1, 10)
	e.saturated(now, e.c-6*(e.c-e.k)-1, 0, true, true, hold) // Ĉ falls under K
	assert.Equal(t, stepStart/2, e.step, "a saturation under K after a move up halves the step")
	assert.Equal(t, 2*hold, e.wait, "…and doubles the wait")
}

// modelRig drives a controller on the model law with synthetic periods: a
// server of `workers` busy seconds a second, requests of base seconds plus
// each feature's seconds when on.
type modelRig struct {
	t       *testing.T
	c       *Controller
	now     time.Time
	workers float64
	base    float64
	costs   []float64
	rng     *rand.Rand
	// instances is every snapshot's Instances (0: a process's own).
	instances float64
}

func newModelRig(t *testing.T) *modelRig { return newModelRigWith(t, nil) }

// newModelRigWith is newModelRig with its configuration changed by edit.
func newModelRigWith(t *testing.T, edit func(*Config)) *modelRig {
	cfg := Config{
		Targets: []Target{
			{Signal: signals.LatencyP99, Target: 0.3},
			{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true},
		},
		Features: []Feature{{Name: "recommendations", Rank: 0, Cost: 1.5}, {Name: "reviews", Rank: 1, Cost: 0.5}},
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return &modelRig{t: t, c: c, now: time.Unix(1000, 0), workers: 4, base: 0.01, costs: []float64{0.015, 0.005}, rng: rand.New(rand.NewPCG(3, 4))}
}

// period steps one second at offered load lam with the levels published.
func (r *modelRig) period(lam float64) *State {
	s := r.snap(lam, r.c.State(), 5*time.Second)
	r.now = r.now.Add(time.Second)
	s.Time = r.now
	return r.c.Step(r.now, s)
}

// untilBaseJumps steps at most n periods at offered load lam, until the
// tracker of the all-off work jumps; it reports whether it did.
func (r *modelRig) untilBaseJumps(n int, lam float64) bool {
	for range n {
		r.period(lam)
		if r.c.mu.mdl.baseAt.Equal(r.now) {
			return true
		}
	}
	return false
}

// periods steps n periods at offered load lam and returns the last state.
func (r *modelRig) periods(n int, lam float64) *State {
	st := r.c.State()
	for range n {
		st = r.period(lam)
	}
	return st
}

// snap is a second's snapshot at offered load lam, every feature at the
// levels of st, over a signal window of window: the second's counts in
// Recent (RecentSpan 1 s) and its tallies, each request of the base
// work plus the costs of the features it got, ±20 %.
func (r *modelRig) snap(lam float64, st *State, window time.Duration) signals.Snapshot {
	var tallies [2]signals.Tally
	tallies[0].Feature, tallies[1].Feature = "recommendations", "reviews"
	work := r.base
	for i := range r.costs {
		l, _ := st.Level(tallies[i].Feature, "")
		work += l * r.costs[i]
	}
	served := min(lam, r.workers/work)
	n := int(served)
	for range n {
		s, on := r.request(st, true)
		for i := range tallies {
			if on[i] {
				tallies[i].On.Add(s)
			} else {
				tallies[i].Off.Add(s)
			}
		}
	}
	s := signals.Snapshot{Window: window, Tallies: tallies[:], RecentSpan: time.Second, Instances: r.instances}
	s.Recent.Arrived, s.Recent.Completed = uint64(lam), uint64(n)
	s.Set(signals.ArrivalRate, lam)
	s.Set(signals.Throughput, served)
	s.Set(signals.RejectRatio, max(lam-served, 0)/lam)
	u := lam * work / r.workers
	busy := 0.0
	if u >= 1 {
		busy = 1
	}
	s.Set(signals.GateBusy, busy)
	s.Set(signals.LatencyP99, 0.05+0.2*min(u, 1))
	return s
}

// request draws one request's work at the levels of st: the base work
// plus, where it evaluates the features, the costs of those it gets (by
// the levels), ±20 %; on says which it got.
func (r *modelRig) request(st *State, evaluates bool) (work float64, on [2]bool) {
	work = r.base
	if evaluates {
		names := [2]string{"recommendations", "reviews"}
		for i := range r.costs {
			l, _ := st.Level(names[i], "")
			if r.rng.Float64() < l {
				work += r.costs[i]
				on[i] = true
			}
		}
	}
	return work * (0.8 + 0.4*r.rng.Float64()), on
}

// TestModelFollowsTheLoad: the first saturated period measures the
// capacity and the levels fall at once to what fits; a load that doubles
// dims within two periods, one that halves brightens within two, without a
// search.
func TestModelFollowsTheLoad(t *testing.T) {
	r := newModelRig(t)
	st := r.period(300) // all on: 30 ms a request, 9 s of work a second for 4
	for range 2 {
		st = r.period(300)
	}
	assert.Less(t, st.Brightness, 0.5, "dimmed at once: %s", st.Reason)
	assert.Contains(t, st.Reason, "measured while saturated")
	for range 20 {
		st = r.period(200)
	}
	b200 := st.Brightness
	assert.Greater(t, b200, 0.0)
	assert.Less(t, b200, 1.0)
	for range 2 {
		st = r.period(100)
	}
	assert.Greater(t, st.Brightness, b200+0.1, "a load halved brightens at once: %s", st.Reason)
	for range 2 {
		st = r.period(300)
	}
	assert.Less(t, st.Brightness, b200, "a load tripled dims at once: %s", st.Reason)
	assert.Contains(t, st.Reason, "load ")
	assert.Contains(t, st.Reason, "s of service a second")
}

// TestModelStepAllocatesNothing: a step that publishes nothing allocates
// nothing on the model law either.
func TestModelStepAllocatesNothing(t *testing.T) {
	r := newModelRig(t)
	for range 30 {
		r.period(100)
	}
	s := signals.Snapshot{Time: r.now, Window: 5 * time.Second, RecentSpan: time.Second}
	s.Recent.Arrived, s.Recent.Completed = 100, 100
	s.Set(signals.ArrivalRate, 100)
	s.Set(signals.Throughput, 100)
	s.Set(signals.LatencyP99, 0.1)
	s.Set(signals.GateBusy, 0)
	r.c.Step(r.now, s)
	allocs := testing.AllocsPerRun(50, func() {
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		r.c.Step(r.now, s)
	})
	assert.Zero(t, allocs)
	assert.False(t, math.IsNaN(r.c.State().Brightness))
}

// TestModelLearnsThePriorsScale: with every configured cost three times too
// low, the moves' measured changes of a request's work teach a scale over
// 1.5 on the priors within a minute of a load that swings.
func TestModelLearnsThePriorsScale(t *testing.T) {
	r := newModelRig(t)
	r.c.mu.Lock()
	r.c.cfg.Features[0].Cost, r.c.cfg.Features[1].Cost = 0.5, 0.5/3 // the truth: 1.5 and 0.5
	r.c.mu.Unlock()
	for i := range 60 {
		lam := 200.0
		if i/10%2 == 1 {
			lam = 400
		}
		r.period(lam)
	}
	scale := r.scaleOf()
	assert.Greater(t, scale, 1.5, "the priors' scale")
	assert.LessOrEqual(t, scale, maxScale)
}

// TestTrackerHoldsAfterAStep: after a load steps and holds, the estimate
// averages the periods since the step within a few of them instead of
// following each period's count for half a minute (the drift allowed
// after a jump): over 50 runs of a Poisson step 80 → 150/s (a period ±12),
// the estimate's error over the minute after the step is under a third of
// a period's (4/s RMS; following the counts, as before, 8), and it is
// still followed from its first periods.
func TestTrackerHoldsAfterAStep(t *testing.T) {
	fast := fastWeight(5)
	var sq, n float64
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 3))
		tr := tracker{moves: true}
		for i := range 90 {
			lam := 80.0
			if i >= 30 {
				lam = 150
			}
			x := math.Round(lam + math.Sqrt(lam)*rng.NormFloat64())
			tr.update(x, max(tr.est, x, 1), fast, true)
			if i == 32 {
				assert.InDelta(t, 150, tr.est, 2*math.Sqrt(150), "seed %d: the step followed within three periods", seed)
			}
			if i >= 33 {
				sq += (tr.est - lam) * (tr.est - lam)
				n++
			}
		}
	}
	t.Logf("RMS error after the step: %.2f/s", math.Sqrt(sq/n))
	assert.Less(t, math.Sqrt(sq/n), 4.0, "the estimate's RMS error after the step")
}

// TestTrackerMovesOnlyAfterAJump: a level that holds begins to move only
// where a jump test finds it. After a step the moving filter's weight
// falls and stays fallen while the load holds (with a chance of 1/60 a
// period that the level begins to move, it went back up to 0.14–0.25 in
// the three minutes after, and the estimate followed each period's count
// with it); the next step restarts it, and the estimate follows that one
// too.
func TestTrackerMovesOnlyAfterAJump(t *testing.T) {
	fast := fastWeight(5)
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 5))
		tr := tracker{moves: true}
		most := 0.0
		for i := range 300 {
			lam := 80.0
			if i >= 30 && i < 270 {
				lam = 150
			}
			x := math.Round(lam + math.Sqrt(lam)*rng.NormFloat64())
			tr.update(x, max(tr.est, x, 1), fast, true)
			if i >= 90 && i < 270 {
				most = max(most, tr.mu)
			}
		}
		assert.Less(t, most, 0.01, "seed %d: the moving filter's weight while the load held, a minute after the step", seed)
		assert.InDelta(t, 80, tr.est, 3*math.Sqrt(80/5.0), "seed %d: the step back followed", seed)
	}
}

// TestTrackerMovingChanceUnderflows: a chance that the level moves decays
// by moveToHold's factor every period while the load holds; where it has
// fallen past the smallest floats, a period the two filters read far
// apart made its odds overflow (∞·0) and the estimate NaN. Under
// minMoving it is none.
func TestTrackerMovingChanceUnderflows(t *testing.T) {
	tr := tracker{moves: true}
	for range 10 {
		tr.update(1000, 1000, fastWeight(5), true)
	}
	tr.mu = 1e-310
	tr.sub[0].p, tr.sub[1].p = 0.01, 1e4
	tr.fold(1000+40, 1)
	assert.False(t, math.IsNaN(tr.est) || math.IsNaN(tr.p) || math.IsNaN(tr.mu), "est %v, p %v, mu %v", tr.est, tr.p, tr.mu)
	assert.Zero(t, tr.mu)
}

// TestTrackerHoldsAnExceedanceOut: a period far from the estimate is not
// folded into it, so that the next period of a fall is tested against the
// load before it: a fall from 152 to about 85 whose second period (94)
// lies 3.7 standard errors from the estimate dragged by the first (81)
// is still a fall (it crept down at the estimate's gain for twenty
// periods).
func TestTrackerHoldsAnExceedanceOut(t *testing.T) {
	tr := tracker{moves: true}
	fast := fastWeight(5)
	for range 300 {
		tr.update(152, 152, fast, true)
	}
	assert.False(t, tr.update(81, 152, fast, true), "a fall: not from one period")
	assert.InDelta(t, 152, tr.est, 1e-6, "the first period of the fall held out")
	assert.True(t, tr.update(94, 143, fast, true), "…but from two")
	assert.InDelta(t, 87.5, tr.est, 1e-9)

	// An outlier alone is held out and forgotten: the estimate does not
	// move for it, and the next period is folded in as usual.
	out := tracker{moves: true}
	for range 300 {
		out.update(152, 152, fast, true)
	}
	out.update(60, 152, fast, true)
	out.update(150, 152, fast, true)
	assert.InDelta(t, 152, out.est, 0.5)

	// Two outliers in a row, one each way: each is folded in, neither
	// lost (either alone would have moved the estimate by 0.2).
	two := tracker{moves: true}
	for range 300 {
		two.update(152, 152, fast, true)
	}
	a := two.p / (two.p + 152)
	two.update(94, 152, fast, true)
	two.update(210, 152, fast, true)
	two.update(152, 152, fast, true)
	assert.InDelta(t, 152, two.est, 40*a, "both outliers folded in: %.3f", two.est)

	// A rescale while a period is held out moves it too: the held value
	// was measured before what is measured changed.
	sh := tracker{}
	for range 300 {
		sh.update(100, 100, fast, true)
	}
	sh.update(160, 100, fast, true)
	require.True(t, sh.held)
	sh.rescale(2)
	assert.InDelta(t, 320, sh.heldX, 1e-9)
}

// TestTrackerJumpReadsTheSpread: a request's work is skewed, and two
// periods whose samples lack the slow tail — a small mean and a small
// variance of their own — stand four of their own standard errors under a
// settled estimate: read with the periods' usual spread (tracker.jv) they
// are no jump, and a doubling of the work still is.
func TestTrackerJumpReadsTheSpread(t *testing.T) {
	const n = 100.0 // requests a period
	settle := func(jv float64) *tracker {
		var tr tracker
		tr.jv = jv
		for range 200 {
			tr.update(0.010, 0.010*0.010/n, fastWeight(5), true) // mean 10 ms, σ 10 ms
		}
		return &tr
	}
	// Without the slow requests: mean 8.5 ms, σ 3 ms.
	tail := func(tr *tracker) bool {
		j := tr.update(0.0085, 0.003*0.003/n, fastWeight(5), true)
		return tr.update(0.0085, 0.003*0.003/n, fastWeight(5), true) || j
	}
	assert.True(t, tail(settle(0)), "read with its own variance, a period without the tail makes a jump")
	assert.False(t, tail(settle(0.010*0.010/n)), "read with the usual spread, it does not")
	// A real step — the work doubles, a slower dependency — still is one
	// within two periods.
	tr := settle(0.010 * 0.010 / n)
	j := tr.update(0.020, 0.020*0.020/n, fastWeight(5), true)
	assert.True(t, tr.update(0.020, 0.020*0.020/n, fastWeight(5), true) || j, "a doubling of the work")
}

// TestModelHoldsWithinTheEstimatesNoise: the levels hold where the
// brightness lies between what the load and a request's work allow one
// standard error (moveZ) either way, and only there: a precise estimate
// leaves a narrow band around the levels it sets; one as uncertain as the
// demand itself (a standard error over the estimate) allows every
// brightness over the heavier end — it held nothing before.
func TestModelHoldsWithinTheEstimatesNoise(t *testing.T) {
	r := newModelRig(t)
	r.periods(60, 200)
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu.mdl
	k, lam := m.capacity.k, m.load.est
	require.Positive(t, k)
	target := c.solve(k/lam, 1)
	require.True(t, target > 0.1 && target < 0.9, "the rig dims the levels part way: %.2f", target)
	m.load.p = 1e-6 * lam * lam
	m.base.p = 0
	assert.True(t, c.withinNoise(target, k, lam, m.load.p/(lam*lam), 1), "the levels the estimates set")
	assert.False(t, c.withinNoise(target+0.2, k, lam, m.load.p/(lam*lam), 1), "a precise estimate: a narrow band")
	assert.False(t, c.withinNoise(target-0.2, k, lam, m.load.p/(lam*lam), 1))
	m.load.p = 4 * lam * lam // a standard error of twice the load
	assert.True(t, c.withinNoise(1, k, lam, m.load.p/(lam*lam), 1), "any brightness the lighter end allows")
}

// TestModelRebasesKWhenTheServiceSlows: the law rebases K at the period
// the all-off work's tracker jumps, measured from the requests' tallies —
// a service three times as slow takes from K what its idle under Ĉ lacks
// of η·w₀ — and gives it back when the service is fast again.
func TestModelRebasesKWhenTheServiceSlows(t *testing.T) {
	r := newModelRig(t)
	r.periods(40, 150)
	e := &r.c.mu.mdl.capacity
	require.Greater(t, e.c, 0.0, "Ĉ measured")
	k0, eta := e.k, r.c.cfg.queueIdle()
	r.base *= 3
	jumped := false
	for range 10 {
		before, at, c := e.k, e.at, e.c
		r.period(150)
		if r.c.mu.mdl.baseAt.Equal(r.now) {
			jumped = true
			w0 := r.c.mu.mdl.w0
			assert.Greater(t, e.held, 0.0, "a slower service takes from K")
			assert.Contains(t, r.c.State().Reason, "lowered: the service got slower", "the reason says why")
			assert.InDelta(t, max(before-eta*(w0-at), min(before, c-eta*w0), minKShare*before), e.k, 1e-9,
				"η times the all-off work's growth, or what the idle under Ĉ lacks of η·w₀")
			break
		}
	}
	require.True(t, jumped, "the all-off work's tracker jumped")
	kSlow := e.k
	assert.Less(t, kSlow, k0)
	r.base /= 3
	require.True(t, r.untilBaseJumps(10, 150), "the all-off work's tracker jumped back")
	assert.Zero(t, e.held, "given back")
	assert.Greater(t, e.k, kSlow)
}

// TestModelRebasesKForEachInstance: a fleet of three instances that share
// the load, each queueing its own requests, whose service got slower:
// each needs the idle one would, and K gives up three times what one
// process's would (Snapshot.Instances), within the same bounds.
func TestModelRebasesKForEachInstance(t *testing.T) {
	r := newModelRig(t)
	r.instances = 3
	r.periods(40, 150)
	e := &r.c.mu.mdl.capacity
	require.Greater(t, e.c, 0.0, "Ĉ measured")
	eta := 3 * r.c.cfg.queueIdle()
	r.base *= 3
	for range 10 {
		before, at, c := e.k, e.at, e.c
		r.period(150)
		if r.c.mu.mdl.baseAt.Equal(r.now) {
			w0 := r.c.mu.mdl.w0
			assert.Greater(t, before-e.k, 0.0, "a slower fleet takes from K")
			assert.InDelta(t, max(before-eta*(w0-at), min(before, c-eta*w0), minKShare*before), e.k, 1e-9,
				"three times η times the all-off work's growth, or what the idle under Ĉ lacks of 3η·w₀")
			return
		}
	}
	t.Fatal("the all-off work's tracker did not jump")
}

// TestModelAdoptsWhatASlowerServiceTook: a controller that adopts the
// checkpoint of one whose service got slower gives K back, as the leader
// would, when the service is fast again.
func TestModelAdoptsWhatASlowerServiceTook(t *testing.T) {
	r := newModelRig(t)
	r.periods(40, 150)
	r.base *= 3
	r.periods(10, 150)
	e := &r.c.mu.mdl.capacity
	require.Greater(t, e.held, 0.0, "a slower service took from K")
	f := newModelRig(t)
	f.now, f.base = r.now, r.base
	_, err := f.c.AdoptAt(f.now, roundTrip(t, r.c.Checkpoint()))
	require.NoError(t, err)
	fe := &f.c.mu.mdl.capacity
	assert.Equal(t, e.held, fe.held)
	assert.Equal(t, e.at, fe.at)
	f.periods(10, 150) // the follower's own tracker of the all-off work starts
	kSlow := fe.k
	f.base /= 3
	require.True(t, f.untilBaseJumps(10, 150), "the all-off work's tracker jumped back")
	assert.Zero(t, fe.held, "given back")
	assert.Greater(t, fe.k, kSlow)
}

// TestModelGivesBackAtMostĈ: a slowdown long enough for K to be carried
// within target again, then the service fast again: K never goes over Ĉ.
func TestModelGivesBackAtMostĈ(t *testing.T) {
	r := newModelRig(t)
	r.periods(40, 150)
	e := &r.c.mu.mdl.capacity
	r.base *= 3
	r.periods(120, 150)
	r.base /= 3
	for range 30 {
		r.period(150)
		assert.LessOrEqual(t, e.k, e.c+1e-9, "K at most Ĉ")
	}
}

// TestModelReconfiguredFeaturesRebaseNothing: a feature taken out of the
// configuration (rendered always since) moves its work into the all-off
// request's; the service is no slower, and K is not rebased.
func TestModelReconfiguredFeaturesRebaseNothing(t *testing.T) {
	r := newModelRig(t)
	r.periods(40, 150)
	r.periods(40, 110)
	e := &r.c.mu.mdl.capacity
	k0 := e.k
	cfg := r.c.Config()
	cfg.Features = cfg.Features[1:]
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	r.base += r.costs[0]
	r.costs[0] = 0
	r.periods(10, 110)
	assert.Zero(t, e.held, "no service got slower")
	assert.GreaterOrEqual(t, e.k, k0)
}

// TestLoadMotion: the load's motion (loadMotion) is a load that moves
// beyond its noise — a sine — and not a load that holds, one that jumped
// once and holds, or one whose arrivals are more dispersed than Poisson's
// (white noise on the rate, which the second differences measure): for
// those, over ten seeds of Poisson arrivals, a period in forty or so may
// read as motion (motionZ), and by little.
func TestLoadMotion(t *testing.T) {
	// moving is, pooled over seeds, the share of the periods after warm
	// in which the load was taken to move, and the most it was taken to
	// move by, with Poisson arrivals at the rate load gives.
	moving := func(t *testing.T, seeds, warm int, load func(i int, rng *rand.Rand) float64) (share, most float64) {
		n, all := 0, 0
		for seed := range seeds {
			r := newModelRig(t)
			rng := rand.New(rand.NewPCG(5, uint64(seed)))
			for i := range 300 {
				lam := load(i, rng)
				r.period(max(0, math.Round(lam+math.Sqrt(lam)*rng.NormFloat64())))
				if i < warm {
					continue
				}
				r.c.mu.Lock()
				m := r.c.loadMotion()
				r.c.mu.Unlock()
				if m > 0 {
					n++
				}
				all++
				most = max(most, m)
			}
		}
		return float64(n) / float64(all), most
	}
	still := func(t *testing.T, load func(i int, rng *rand.Rand) float64) {
		share, most := moving(t, 10, 30, load)
		t.Logf("taken to move in %.1f %% of the periods, by %.1f/s at most", 100*share, most)
		assert.LessOrEqual(t, share, 0.05, "twice the nominal rate at most")
		assert.Less(t, most, 30.0, "by a tenth of the load at most")
	}
	t.Run("holds", func(t *testing.T) { still(t, func(int, *rand.Rand) float64 { return 300 }) })
	t.Run("jumps once", func(t *testing.T) {
		still(t, func(i int, _ *rand.Rand) float64 {
			if i < 90 {
				return 150
			}
			return 300
		})
	})
	for _, sd := range []float64{0.05, 0.1, 0.15} {
		t.Run(fmt.Sprintf("dispersed %.0f %%", 100*sd), func(t *testing.T) {
			still(t, func(_ int, rng *rand.Rand) float64 { return 300 * (1 + sd*rng.NormFloat64()) })
		})
	}
	t.Run("moves", func(t *testing.T) {
		share, most := moving(t, 10, 120, func(i int, _ *rand.Rand) float64 { return 250 + 125*math.Sin(2*math.Pi*float64(i)/20) })
		t.Logf("a sine of ±125/s over 20 s: taken to move in %.0f %% of the periods, by %.1f/s at most", 100*share, most)
		assert.GreaterOrEqual(t, share, 0.9)
		assert.Greater(t, most, 20.0)
	})
}

// TestLoadMotionGoesWithItsCounts: a source that stops giving the
// intervals' counts resets the load's tracker, and the motion with it — a
// margin measured on counts no longer read is not served for.
func TestLoadMotionGoesWithItsCounts(t *testing.T) {
	r := newModelRig(t)
	for i := range 150 {
		r.period(250 + 125*math.Sin(2*math.Pi*float64(i)/20))
	}
	r.c.mu.Lock()
	require.Positive(t, r.c.loadMotion(), "a sine moves")
	r.c.mu.Unlock()
	s := r.snap(250, r.c.State(), 5*time.Second)
	s.RecentSpan, s.RecentAt = 0, time.Time{}
	r.now = r.now.Add(time.Second)
	s.Time = r.now
	r.c.Step(r.now, s)
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	assert.Zero(t, r.c.loadMotion(), "no counts: no tracker, no motion")
}

// TestLoadAheadOnASwing: while the load moves, the law sets the levels
// for the trend's prediction of the period they will serve, and its
// margin; the prediction runs with the load, where the tracker's estimate
// runs behind it; a load that holds is served for its estimate alone.
func TestLoadAheadOnASwing(t *testing.T) {
	// run steps a rig n periods on load, in Poisson counts, and returns
	// the RMS error, from the 60th period on, of the load the levels were
	// set for (loadAhead) and of the tracker's estimate, both against the
	// next period's true load; and the share of those periods at which
	// the two differed, with the margin over the load ahead then.
	run := func(seed uint64, n int, load func(i int) float64) (ahead, est, differ, margin float64) {
		r := newModelRig(t)
		rng := rand.New(rand.NewPCG(7, seed))
		var sa, se float64
		k := 0
		for i := range n {
			lam := load(i)
			r.period(max(0, math.Round(lam+math.Sqrt(lam)*rng.NormFloat64())))
			if i < 60 {
				continue
			}
			r.c.mu.Lock()
			e := r.c.mu.mdl.load.est
			a, _, on := r.c.loadAhead(r.now, e, observation{recentSpan: time.Second})
			if on {
				differ++
				margin = max(margin, r.c.loadMargin())
			}
			r.c.mu.Unlock()
			next := load(i + 1)
			sa += (a - next) * (a - next)
			se += (e - next) * (e - next)
			k++
		}
		return math.Sqrt(sa / float64(k)), math.Sqrt(se / float64(k)), differ / float64(k), margin
	}
	for seed := range uint64(5) {
		ahead, est, differ, margin := run(seed, 200, func(i int) float64 { return 250 + 125*math.Sin(2*math.Pi*float64(i)/20) })
		t.Logf("seed %d, a sine of ±125/s over 20 s: RMS error %.1f/s ahead, %.1f/s the estimate; set ahead in %.0f %% of the periods, margin up to %.1f/s", seed, ahead, est, 100*differ, margin)
		assert.Greater(t, differ, 0.9, "seed %d: the load moves", seed)
		assert.Less(t, ahead, 0.75*est, "seed %d: ahead of the tracker, by a quarter at least", seed)
		assert.Positive(t, margin, "seed %d", seed)
		_, _, differ, _ = run(seed, 200, func(int) float64 { return 250 })
		t.Logf("seed %d, held: set ahead in %.1f %% of the periods", seed, 100*differ)
		assert.LessOrEqual(t, differ, 0.05, "seed %d: a load that holds is served for its estimate", seed)
	}
}

// TestKCorrectedOverHighWhileTheLevelsMove: on a load that moves the
// levels every few periods, the pressure over High for two signal
// windows in a row corrects K down (each level it spans was set for the
// load at K, and each was too bright); runs over High shorter than that —
// a burst stays in the window for one — and the same load under High
// leave K where it was.
func TestKCorrectedOverHighWhileTheLevelsMove(t *testing.T) {
	// run steps a rig on a sine of ±50 % over 12 s around 150/s for 60
	// periods, then 30 more with the p99 of period i at over(i) (0: the
	// rig's own); it returns K before and after the 30, and how many of
	// them moved the levels.
	run := func(over func(i int) float64) (before, after float64, moves int) {
		r := newModelRig(t)
		lam := func(i int) float64 { return 150 + 75*math.Sin(2*math.Pi*float64(i)/12) }
		for i := range 60 {
			r.period(lam(i))
		}
		before = r.c.mu.mdl.capacity.k
		b := r.c.State().Brightness
		for i := 60; i < 90; i++ {
			s := r.snap(lam(i), r.c.State(), 5*time.Second)
			s.Set(signals.RejectRatio, 0)
			if p := over(i); p > 0 {
				s.Set(signals.LatencyP99, p)
			}
			r.now = r.now.Add(time.Second)
			s.Time = r.now
			st := r.c.Step(r.now, s)
			if st.Brightness != b {
				moves++
			}
			b = st.Brightness
		}
		return before, r.c.mu.mdl.capacity.k, moves
	}
	before, after, moves := run(func(int) float64 { return 0.45 }) // 1.5 × the target: over High
	t.Logf("over High: K %.3f → %.3f, the levels moved in %d of 30 periods", before, after, moves)
	require.GreaterOrEqual(t, moves, 6, "the levels move at least once a signal window")
	assert.Less(t, after, before, "corrected down")
	// Over High for 7 s of every 12: more than a window, less than two.
	before, after, moves = run(func(i int) float64 {
		if i%12 < 7 {
			return 0.45
		}
		return 0.2
	})
	t.Logf("over High 7 s in 12: K %.3f → %.3f, the levels moved in %d of 30 periods", before, after, moves)
	assert.GreaterOrEqual(t, after, before, "runs over High shorter than two windows: not corrected down")
	before, after, moves = run(func(int) float64 { return 0 })
	t.Logf("the rig's own p99 (under High): K %.3f → %.3f, the levels moved in %d of 30 periods", before, after, moves)
	assert.GreaterOrEqual(t, after, before, "not corrected down")
}

// TestKCorrectedInALastingSaturation: a saturated period is taken for a
// burst, which restarts the wait before a correction; an overload whose
// periods are saturated and over High for longer than two signal windows
// is the levels', and corrects K down while they can still dim. At the
// floors it is the load over what the service does: Ĉ measures it, and K
// is not corrected under it.
func TestKCorrectedInALastingSaturation(t *testing.T) {
	// run settles a rig at load lam for 60 periods, then steps n more in
	// which the gate is full, the workers busy throughout (the tallies of
	// twice the load: every worker's second), a tenth of the arrivals
	// refused and the completions 1/1.1 of them (a saturated period over
	// High, whose reading is no lower than Ĉ: it does not move K), then
	// 20 of the rig's own; it returns K before the n, after them, and the
	// brightness before them.
	run := func(lam float64, n int) (before, after, b float64) {
		r := newModelRig(t)
		r.periods(60, lam)
		before, b = r.c.mu.mdl.capacity.k, r.c.State().Brightness
		for range n {
			s := r.snap(2*lam, r.c.State(), 5*time.Second)
			s.Recent.Arrived, s.Recent.Completed = uint64(lam), uint64(lam/1.1)
			s.Set(signals.ArrivalRate, lam)
			s.Set(signals.GateBusy, 1)
			s.Set(signals.Throughput, lam/1.1)
			s.Set(signals.RejectRatio, 0.1)
			r.now = r.now.Add(time.Second)
			s.Time = r.now
			r.c.Step(r.now, s)
		}
		r.periods(20, lam)
		return before, r.c.mu.mdl.capacity.k, b
	}
	before, after, b := run(250, 30)
	t.Logf("30 saturated periods over High at brightness %.2f: K %.3f → %.3f", b, before, after)
	require.Greater(t, b, 0.0, "the levels can dim")
	assert.Less(t, after, before, "a lasting saturation corrects K down")
	before, after, _ = run(250, 9)
	t.Logf("9 saturated periods (under two windows): K %.3f → %.3f", before, after)
	assert.GreaterOrEqual(t, after, before, "a burst does not correct K down")
	before, after, b = run(420, 30)
	t.Logf("30 saturated periods over High at the floors (brightness %.2f): K %.3f → %.3f, Ĉ-bound", b, before, after)
	require.LessOrEqual(t, b, 0.0, "at the floors")
	assert.GreaterOrEqual(t, after, before, "at the floors, no correction under what Ĉ measures")
}

// TestModelStopsSheddingWhenTheLoadFalls: shedding stops as soon as the
// load's tracker takes a fall (two intervals), not a period later — and
// not for one interval that reads low (a fleet's interval that misses an
// instance), nor while the backlog at the gate, drained within a window,
// would overload the floors. (A period shed for a load that has gone
// costs answers.)
func TestModelStopsSheddingWhenTheLoadFalls(t *testing.T) {
	var r *modelRig
	queued := 0.0
	period := func(lam float64) *State {
		s := r.snap(lam, r.c.State(), 5*time.Second)
		if b, _ := s.Get(signals.GateBusy); b >= 1 {
			s.Set(signals.LatencyP99, 1) // a queue past the latency's target
		}
		if queued > 0 { // a queue that waits: the gate is full, the latency high
			s.Set(signals.GateQueued, queued)
			s.Set(signals.GateBusy, 1)
			s.Set(signals.LatencyP99, 1)
		}
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		return r.c.Step(r.now, s)
	}
	overload := func() *State {
		r = newModelRig(t) // (each case afresh: a load that went back after a fall is expected to again, returns.go)
		var st *State
		for range 40 {
			st = period(1000) // the floors: 10 s of work a second for 4 workers
		}
		require.Greater(t, st.Shed, 1.0, st.Reason)
		return st
	}
	overload()
	st := period(100) // one interval that reads low
	assert.Greater(t, st.Shed, 0.0, "one interval is no fall: %s", st.Reason)

	overload()
	period(100)
	st = period(100)
	assert.Equal(t, 0.0, st.Shed, "the tracker took the fall: %s", st.Reason)
	assert.Contains(t, st.Reason, "fell below what the floors carry")

	// A fall with the overload's queue still waiting: shedding holds
	// until the queue is drained.
	overload()
	queued = 2000 // 400 a second over a 5-s window, on top of the 100
	for range 3 {
		st = period(100)
	}
	assert.Greater(t, st.Shed, 0.0, "the backlog waits: %s", st.Reason)
	queued = 0
	st = period(100)
	assert.Equal(t, 0.0, st.Shed, st.Reason)
}

// TestModelStopsSheddingOnAWindowsFall: a source that gives a window's
// arrival rate and no per-period counts — the load the law reads is that
// rate — stops shedding in the period the rate falls under what the floors
// carry, not a period later.
func TestModelStopsSheddingOnAWindowsFall(t *testing.T) {
	cfg := testConfig()
	r := newRig(t, cfg)
	r.steps(10, 3, -1, busy(0.01)) // slow pages at a gate with room: the floors
	st := r.steps(8, 3, -1, busy(0.6))
	require.Greater(t, st.Shed, 0.0, st.Reason)
	r.load = 10
	st = r.step(3, -1, busy(0.6))
	assert.Equal(t, 0.0, st.Shed, st.Reason)
	assert.Contains(t, st.Reason, "fell below what the floors carry")
}

// TestModelRaisesAColdKByTheLatencysRoom: a burst at a light load, over
// target before any period measured the capacity, sets K by the cold rule
// (a guess: what the burst carried, scaled down by its latency) and the
// levels fall. The latency, under half the set point afterwards with the
// gate's queue empty and nothing refused, says the service could take
// about twice the work: K rises half way there in logarithm at each
// correction, not by one step — back to full brightness within half a
// minute, where a step a correction took a minute and a half. A refusal
// ratio that reads anything is a limit the latency does not show: then
// the steps alone.
func TestModelRaisesAColdKByTheLatencysRoom(t *testing.T) {
	for _, refused := range []float64{0, 0.002} {
		t.Run(fmt.Sprintf("refused %v", refused), func(t *testing.T) {
			r := newModelRigWith(t, func(c *Config) { c.Hold = 5 * time.Second })
			step := func(p99 float64) *State {
				s := r.snap(100, r.c.State(), 5*time.Second)
				if p99 > 0 {
					s.Set(signals.LatencyP99, p99)
				}
				s.Set(signals.RejectRatio, refused)
				return r.stepSnap(s)
			}
			step(0)
			for range 4 {
				step(0.4) // a burst: p 1.33, the gate with room
			}
			st := r.c.State()
			require.Less(t, st.Brightness, 0.6, "the burst dims: %s", st.Reason)
			require.Contains(t, st.Reason, "at the first overload")
			back := -1
			for i := range 120 {
				if st = step(0); st.Brightness >= 1 {
					back = i + 1
					break
				}
			}
			_, c := r.capOf()
			assert.Zero(t, c, "no saturated period measured Ĉ")
			if refused > 0 {
				assert.Greater(t, back, 60, "seconds to full brightness, by steps: %s", st.Reason)
				return
			}
			assert.Positive(t, back, "full brightness again: %s", st.Reason)
			assert.LessOrEqual(t, back, 30, "seconds to full brightness: %s", st.Reason)
			assert.Contains(t, st.Reason, "raised: the latency has room")
			t.Logf("full brightness %d s after the burst", back)
		})
	}
}

// coldRig is a model rig whose K the cold rule set: a burst at 100 req/s
// (p99 400 ms, the gate with room) over a service with room to spare.
func coldRig(t *testing.T, edit func(*Config)) *modelRig {
	r := newModelRigWith(t, func(c *Config) {
		c.Hold = 5 * time.Second
		if edit != nil {
			edit(c)
		}
	})
	r.roomStep(100, 0.05)
	for range 4 {
		r.roomStep(100, 0.4)
	}
	require.Equal(t, capCold, r.c.mu.mdl.capacity.src, r.c.State().Reason)
	return r
}

// roomStep steps a period at load lam with the gate's queue empty, nothing
// refused, and a p99 of p99.
func (r *modelRig) roomStep(lam, p99 float64) *State {
	s := r.snap(lam, r.c.State(), 5*time.Second)
	s.Set(signals.LatencyP99, p99)
	s.Set(signals.GateBusy, 0)
	s.Set(signals.RejectRatio, 0)
	return r.stepSnap(s)
}

// TestModelRoomRaiseIsBounded: a p99 of nearly nothing allows any work by
// its proportion; the raise stops at the work the ceiling's levels take at
// the load now (100 req/s at 30 ms a page, and the features' priors), and
// K stays finite and checkpoints.
func TestModelRoomRaiseIsBounded(t *testing.T) {
	for _, p99 := range []float64{1e-6, 1e-300, math.SmallestNonzeroFloat64} {
		r := coldRig(t, nil)
		for range 30 {
			r.roomStep(100, p99)
		}
		k, _ := r.capOf()
		r.c.mu.Lock()
		most := 100 * r.c.work(1)
		r.c.mu.Unlock()
		assert.LessOrEqual(t, k, most*(1+1e-9), "p99 %g: K at most the ceiling's work", p99)
		assert.Greater(t, k, 0.9*most, "p99 %g: raised", p99)
		_, err := json.Marshal(r.c.Checkpoint())
		assert.NoError(t, err)
	}
}

// TestModelRoomRaiseEndsAtACut: once a correction has cut the guess (the
// raise went past what the service does: its p99 over target), the
// corrections find K by their steps, and the latency's room raises it no
// more.
func TestModelRoomRaiseEndsAtACut(t *testing.T) {
	r := coldRig(t, nil)
	for range 20 {
		r.roomStep(100, 0.01)
	}
	require.Equal(t, capRoom, r.c.mu.mdl.capacity.src)
	for range 12 {
		r.roomStep(160, 1.0) // over target: K is cut
	}
	require.False(t, r.c.mu.mdl.capacity.guessed, r.c.State().Reason)
	for range 60 {
		r.roomStep(160, 0.01)
		assert.NotEqual(t, capRoom, r.c.mu.mdl.capacity.src, r.c.State().Reason)
	}
}

// TestModelRoomRaiseNotFromAGatesWait: a target on the gate's wait (near
// nothing while it has room, whatever a request's work) leaves no room.
func TestModelRoomRaiseNotFromAGatesWait(t *testing.T) {
	r := newModelRigWith(t, func(c *Config) {
		c.Hold = 5 * time.Second
		c.Targets = []Target{{Signal: signals.SojournP99, Target: 0.05}, {Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}}
	})
	step := func(soj float64) {
		s := r.snap(100, r.c.State(), 5*time.Second)
		s.Set(signals.SojournP99, soj)
		s.Set(signals.GateBusy, 0)
		s.Set(signals.RejectRatio, 0)
		r.stepSnap(s)
	}
	step(0.001)
	for range 4 {
		step(0.1)
	}
	require.True(t, r.c.mu.mdl.capacity.guessed)
	for range 30 {
		step(0.0005)
		assert.NotEqual(t, capRoom, r.c.mu.mdl.capacity.src)
	}
}

// TestModelGuessInTheCheckpoint: the guess is carried by a checkpoint; one
// without it (written before it was kept) holds no guess to raise.
func TestModelGuessInTheCheckpoint(t *testing.T) {
	r := coldRig(t, nil)
	cp := r.c.Checkpoint()
	require.True(t, cp.Guessed)
	raw, err := json.Marshal(cp)
	require.NoError(t, err)
	for _, strip := range []bool{false, true} {
		var mp map[string]any
		require.NoError(t, json.Unmarshal(raw, &mp))
		if strip {
			delete(mp, "guessed")
		}
		b, err := json.Marshal(mp)
		require.NoError(t, err)
		var back Checkpoint
		require.NoError(t, json.Unmarshal(b, &back))
		r2 := newModelRigWith(t, func(c *Config) { c.Hold = 5 * time.Second })
		r2.now = r.now
		_, err = r2.c.AdoptAt(r2.now, back)
		require.NoError(t, err)
		assert.Equal(t, !strip, r2.c.mu.mdl.capacity.guessed, "stripped %v", strip)
	}
}

package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// teachRig is a model rig whose priors' scale is 1 and whose all-off work
// has been tracked at w (each period's mean of variance v) for 200 periods.
func teachRig(t *testing.T, w, v float64) (*modelRig, *modelState) {
	r := newModelRig(t)
	m := &r.c.mu.mdl
	m.scale = 1
	holdBase(m, w, v)
	return r, m
}

// holdBase folds 200 periods of the all-off work w (variance v) into m.
func holdBase(m *modelState, w, v float64) {
	for range 200 {
		m.base.update(w, v, 0.2, true)
	}
}

// TestTeachBoundsOnePeriodThatContradictsTheMove: a small move — the
// priors said the all-off request's work would drop 6 % — followed by a
// period 10 % slower (a GC pause, a cold cache, a downstream that slowed:
// anything but the features) contradicts the model rather than measures
// the scale: the work moved the other way. One such period must not teach
// the priors' scale by more than one step (maxScaleStep), whatever the
// periods' noise: with the step sized by the evidence it teaches 11× for
// 200 requests of ±20 %, and 100× (the scale's floor: every configured
// cost nothing) when the latencies are nearly constant.
func TestTeachBoundsOnePeriodThatContradictsTheMove(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64 // the period's mean's variance
	}{
		{"constant latencies", 1e-12},
		{"200 requests of ±20 %", 0.011 * 0.011 * 0.4 * 0.4 / 12 / 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, m := teachRig(t, 0.01, tc.v)
			m.moveAt, m.movePrior = time.Unix(1, 0), 0.06
			r.c.teach(time.Unix(2, 0), 0.011, tc.v, 0, 0) // every feature off now: the period 10 % slower
			assert.GreaterOrEqual(t, m.scale, 1/maxScaleStep, "one contradicting period taught a scale of %.3g", m.scale)
		})
	}
}

// TestTeachRestatesTheWorkNoSurerThanItsPeriod: a move from full brightness
// to every feature off, whose first period read the all-off work 15 %
// under the truth (at 150 requests a second a period's mean is within
// ±8 %), restates the tracked all-off work from that period alone. The
// periods after it measure the all-off work whole, and must correct it
// within a few: restated with the variance the tracker had after 200
// periods, they moved it by a two-hundredth each, and the levels stood
// for twenty periods on a work 15 % light (the lab's step brightened on
// it, and dimmed back).
func TestTeachRestatesTheWorkNoSurerThanItsPeriod(t *testing.T) {
	const truth, v = 0.006, 0.0005 * 0.0005   // the all-off work, a period's mean's variance
	r, m := teachRig(t, truth*1.4/(1+0.4), v) // features on: the priors' share 0.4, the right one
	m.moveAt, m.movePrior = time.Unix(1, 0), 0.4
	r.c.teach(time.Unix(2, 0), 0.85*truth, v, 0, 0) // every feature off now
	require.InDelta(t, 0.85*truth, m.base.est, 0.01*truth, "the work restated from the period")
	for range 5 {
		m.base.update(truth, v, 0.2, true)
	}
	assert.InDelta(t, truth, m.base.est, 0.05*truth, "five periods at the floors after the move")
}

// TestTeachWeighsEachMoveByItsPrecision: two moves, each measured from one
// period of as little noise, one teaching a scale of 2 and the next one of
// 3, leave the scale between them — not at whatever the last period said.
func TestTeachWeighsEachMoveByItsPrecision(t *testing.T) {
	const w0, v = 0.01, 1e-10
	r, m := teachRig(t, w0, v)
	// y for a true scale t, from before to after: A = (1 + t·after)/(1 + t·before).
	y := func(tr, before, after float64) float64 {
		return (1 + tr*after) / (1 + tr*before) * m.base.est * (1 + m.scale*before)
	}
	m.moveAt, m.movePrior = time.Unix(1, 0), 0.4
	r.c.teach(time.Unix(2, 0), y(2, 0.4, 0), v, 0, 0)
	require.InDelta(t, 2, m.scale, 0.02, "the first move is taken whole")
	m.moveAt, m.movePrior = time.Unix(3, 0), 0
	r.c.teach(time.Unix(4, 0), y(3, 0, 0.4), v, 0.4, 0.4)
	assert.Greater(t, m.scale, 2.2)
	assert.Less(t, m.scale, 2.8, "the second move restated the scale from its own period")

	// A follower adopting the checkpoint weighs its next move as this
	// controller would.
	f := newModelRig(t)
	_, err := f.c.AdoptAt(r.now, roundTrip(t, r.c.Checkpoint()))
	require.NoError(t, err)
	assert.Equal(t, m.scale, f.c.mu.mdl.scale)
	assert.Equal(t, m.scaleVar, f.c.mu.mdl.scaleVar)
}

// teachMove drives one move of the priors' share from before to after
// through teach, its period measuring the all-off work's restatement for a
// true scale tr within a relative noise of sd (drawn from rng).
func teachMove(r *modelRig, at int64, tr, before, after, sd float64) {
	m := &r.c.mu.mdl
	a := (1 + tr*after) / (1 + tr*before) * (1 + sd*r.rng.NormFloat64())
	y := a * m.base.est * (1 + m.scale*before)
	m.moveAt, m.movePrior = time.Unix(at, 0), before
	r.c.teach(time.Unix(at+1, 0), y, (sd*y)*(sd*y), after, after)
}

// TestTeachFollowsPriorsThatChange: forty moves teach a scale of 2; then
// the features get three times heavier (a scale of 6) before any is
// contrasted. The scale taught is forgotten over scaleMemory moves, so it
// is within 20 % of the new one within fifteen; a memory of every move
// weighed the forty old ones against each new one, and took hundreds.
func TestTeachFollowsPriorsThatChange(t *testing.T) {
	r, m := teachRig(t, 0.01, 1e-10)
	share := []float64{0.4, 0}
	for i := range 40 {
		teachMove(r, int64(10*i), 2, share[i%2], share[(i+1)%2], 0.03)
	}
	require.InDelta(t, 2, m.scale, 0.2)
	moves := 0
	for i := 40; i < 100 && math.Abs(math.Log(m.scale/6)) > math.Log(1.2); i++ {
		teachMove(r, int64(10*i), 6, share[i%2], share[(i+1)%2], 0.03)
		moves++
	}
	assert.LessOrEqual(t, moves, 15, "moves to within 20 %% of the new scale (scale %.3g)", m.scale)
}

// TestTeachNearThePole: a move between two shares the priors render (0.2 →
// 0.4) whose work rose nearly as far as the shares did — features thirty
// times heavier than the priors say — measures t near its pole (A → P′/P),
// where a small error of A moves t far. It still teaches as far as one
// move may (the step, taken whole): weighed by a standard error taken
// through the pole, the stronger the evidence the less it taught.
func TestTeachNearThePole(t *testing.T) {
	for _, tr := range []float64{30, 100, 300} {
		r, m := teachRig(t, 0.01, 1e-10)
		teachMove(r, 1, tr, 0.2, 0.4, 0.03)
		assert.Greater(t, m.scale, 4.0, "true scale %v", tr)
		assert.False(t, math.IsNaN(m.scaleVar) || math.IsInf(m.scaleVar, 0))
	}
}

// TestTeachAfterAHostileCheckpoint: a checkpoint whose scale variance is
// the largest float (finite, so not refused) is taken as no surer than
// nothing taught; the next move's scale stays a number.
func TestTeachAfterAHostileCheckpoint(t *testing.T) {
	r, _ := teachRig(t, 0.01, 1e-10)
	cp := r.c.Checkpoint()
	cp.Scale, cp.ScaleVar = 1, math.MaxFloat64
	f := newModelRig(t)
	_, err := f.c.AdoptAt(r.now, roundTrip(t, cp))
	require.NoError(t, err)
	fm := &f.c.mu.mdl
	assert.LessOrEqual(t, fm.scaleVar, scalePriorVar)
	holdBase(fm, 0.01, 1e-10)
	teachMove(f, 1, 2, 0.4, 0, 0.03)
	assert.False(t, math.IsNaN(fm.scale) || math.IsInf(fm.scale, 0), "scale %v", fm.scale)
	assert.False(t, math.IsNaN(fm.base.est), "the all-off work %v", fm.base.est)
}

// TestTeachNothingFromAMoveAtALoadJump: a move made in the period the load
// jumped (or arrived), or the one after, is the levels' answer to the load.
// Without a tally, the period that shows it — or a later one the load
// jumped in — is one the load moved a request's work in too (contention,
// the gate's concurrency, a cold start): before against after, it teaches
// nothing of the priors' scale. A move two periods after the jump
// teaches; so does one a tally measures, jump or not.
func TestTeachNothingFromAMoveAtALoadJump(t *testing.T) {
	for _, tc := range []struct {
		name    string
		jumpAgo time.Duration // from the move back to the load's jump
		tallied bool
		teaches bool
	}{
		{"in the move's period", 0, false, false},
		{"a period before the move", time.Second, false, false},
		{"in the period that shows the move", -time.Second, false, false},
		{"after the move, before the period that shows it", -2 * time.Second, false, false},
		{"two periods before the move", 2 * time.Second, false, true},
		{"a tallied move in the jump's period", 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, m := teachRig(t, 0.01, 1e-10)
			require.NotEmpty(t, m.tallied)
			m.tallied[0] = tc.tallied
			move := time.Unix(100, 0)
			m.loadJumpAt = move.Add(-tc.jumpAgo)
			// The work fell as a scale of 2 says, 0.4 of the priors'
			// share off: twice as far as the priors predicted.
			y := (1 + 2*0.0) / (1 + 2*0.4) * m.base.est * (1 + 0.4)
			m.moveAt, m.movePrior = move, 0.4
			r.c.teach(move.Add(max(time.Second, 1-tc.jumpAgo)), y, 1e-12, 0, 0)
			if tc.teaches {
				assert.Greater(t, m.scale, 1.5, "the move taught the scale")
			} else {
				assert.Equal(t, 1.0, m.scale, "the move taught nothing")
			}
		})
	}
}

package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Settled, the trim steps a quantum at a time, and each step waits longer
// than the one before: 10 s after the landing's last move, then 20, 40,
// and 60 s at most.
func TestSettledTrimStepsAQuantumAndBacksOff(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	b := r.land()
	var at []int
	var steps []float64
	for i := 1; i <= 300; i++ {
		st := r.step(0.5, 0) // under Low, not far under: evidence up, no regime run
		if st.Brightness != b {
			at, steps = append(at, i), append(steps, st.Brightness-b)
			b = st.Brightness
		}
	}
	require.GreaterOrEqual(t, len(at), 5, "steps at %v", at)
	for i, s := range steps {
		assert.InDelta(t, 0.01, s, 1e-9, "step %d is a quantum: %v", i, steps)
	}
	wants := []int{20, 40, 60, 60}
	for i, want := range wants {
		gap := at[i+1] - at[i]
		assert.GreaterOrEqual(t, gap, want, "wait before step %d (steps at %v)", i+2, at)
		assert.LessOrEqual(t, gap, want+6, "…but not much longer: evidence is there (steps at %v)", at)
	}
	assert.Contains(t, r.c.Status().Reason, "settled, the next step in", "the wait is in the reason")
}

// Settled, a level over target on average for 30 s (the mean of min(p, 5)
// at least 2.2) steps two quanta down at once, whatever the wait says.
func TestSettledTrimStepsDownWhenClearlyOver(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	b := r.land()
	// Refusals three times their target: a quantum down on the first
	// evidence, another after 20 s; the next would wait 40 s, but 30
	// settled seconds over target on average (the 5 s window after the
	// step not counted) say the level is clearly over.
	type move struct {
		at   int
		step float64
	}
	var moves []move
	for i := 1; i <= 80 && len(moves) < 3; i++ {
		st := r.step(0.5, 0.03)
		if st.Brightness != b {
			moves = append(moves, move{i, st.Brightness - b})
			b = st.Brightness
			if len(moves) == 3 {
				assert.Contains(t, r.c.Status().Reason, "over target on average")
				assert.Equal(t, Dim, st.Action)
			}
		}
	}
	require.Len(t, moves, 3)
	assert.InDelta(t, -0.01, moves[0].step, 1e-9, "a quantum first")
	assert.InDelta(t, -0.01, moves[1].step, 1e-9, "a quantum after the wait")
	assert.Equal(t, 20, moves[1].at-moves[0].at, "the wait")
	assert.InDelta(t, -0.02, moves[2].step, 1e-9, "two quanta at once")
	assert.Equal(t, 34, moves[2].at-moves[1].at, "30 readings from 5 s after the step (its window) on: before the 40 s wait is out")
}

// Settled, a run far under target must last twice as long before it
// counts as a change of conditions (TestTrimSettlesAndRestartsOnAChange
// runs one) — unless it returns to the level a regime fall left — and a
// run far over target too, unless it is heavy (16× target).
func TestSettledRegimeRunsAreLonger(t *testing.T) {
	c, err := New(refusalsConfig())
	require.NoError(t, err)
	for _, tc := range []struct {
		name           string
		settled, guide bool
		p              float64
		wantUp, wantDn float64
	}{
		{"landing", false, false, 5, 10, 10},
		{"settled", true, false, 5, 20, 20},
		{"settled, a level a regime fall left to go back to", true, true, 5, 10, 20},
		{"settled, heavy", true, false, 20, 20, 10},
	} {
		up, down := c.regimeRuns(tc.settled, tc.guide, tc.p)
		assert.InDelta(t, tc.wantUp, up, 1e-9, "%s: far under", tc.name)
		assert.InDelta(t, tc.wantDn, down, 1e-9, "%s: far over", tc.name)
	}
}

// A load that drifts from where the trim settled — slowly enough for the
// load mark to follow, so no fast move — starts the landing afresh: its
// steps grow again, and a slowly changing load is followed.
func TestSettledTrimLandsAfreshWhenTheLoadDrifts(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	for range 40 {
		r.load *= 1.005 // +22 % over 40 s: the mark follows
		st := r.step(0.8, 0.005)
		require.NotContains(t, st.Reason, "dimming", "no fast move")
	}
	assert.Contains(t, r.c.Status().Reason, "landing, holding", "the drift ended the settled phase")
	b := r.c.State().Brightness
	var steps []float64
	for range 60 {
		st := r.step(0.5, 0)
		if st.Brightness != b {
			steps = append(steps, st.Brightness-b)
			b = st.Brightness
		}
	}
	require.GreaterOrEqual(t, len(steps), 3, "steps %v", steps)
	assert.Greater(t, steps[2], 0.01+1e-9, "landing steps double again: %v", steps)
}

// A probe of four quanta or more that proves over goes back to a third of
// it above the last good level; a smaller one all the way back.
func TestFailedProbeGoesBackNearTheLastGoodLevel(t *testing.T) {
	for _, tc := range []struct {
		good, probe, want float64
	}{
		{0.40, 0.52, 0.44},
		{0.40, 0.44, 0.41},
		{0.40, 0.43, 0.40},
	} {
		r := newLabRig(t, refusalsConfig())
		m := &r.c.mu
		now := t0.Add(time.Minute)
		m.started, m.lastFresh, m.dimmed = true, now, true
		m.landAt, m.movedAt = now.Add(-10*time.Second), now.Add(-10*time.Second)
		m.brightness, m.good, m.lastDir, m.loadMark = tc.probe, tc.good, 1, 150
		m.acc = r.c.need()
		r.now = now.Add(-time.Second)
		st := r.step(0.8, 0.02)
		assert.InDelta(t, tc.want, st.Brightness, 1e-9, "good %.2f, probe %.2f", tc.good, tc.probe)
		assert.Contains(t, st.Reason, "back to the last good level")
	}
}

// A fast fall on latency over CascadeAt, from a level the trim held and at
// the same load, is a drop of capacity as a regime fall is: it remembers
// that level, and the capacity's return goes back there. The steps of one
// fall after its first are no level held.
func TestCascadeFallRemembersTheLevelHeld(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	held := r.land() // three fast steps from 1: no level held before them
	r.step(1.6, 0)   // latency over CascadeAt: two fast steps of 0.2
	r.step(1.6, 0)
	require.Zero(t, r.c.State().Brightness, "the fall")
	for range 20 {
		r.step(0.8, 0.005)
	}
	back := r.untilRegimeMove(25, false)
	require.NotNil(t, back, "a regime move up")
	assert.Contains(t, back.Reason, "back to the level before the fall")
	assert.InDelta(t, held, back.Brightness, 1e-9, "back to the level the trim held, not one the fall passed")
}

// With a level a regime fall left to go back to, a run under Low whose
// mean is under Low/2 returns there, though some of its readings are
// between Low/2 and Low: at the floor, a capacity that came back reads
// about Low/2. Without such a level, the same run moves nothing.
func TestReturnToTheLevelBeforeAFallOnAMeanFarUnder(t *testing.T) {
	for _, prior := range []bool{true, false} {
		r := newLabRig(t, refusalsConfig())
		held := r.land()
		if prior {
			r.step(1.6, 0) // two fast steps from the level held
			r.step(1.6, 0)
		}
		for range 20 {
			r.step(0.8, 0.005)
		}
		moved := r.untilRegimeMove(24, true) // under Low, not all under Low/2: the mean is 0.325
		if !prior {
			assert.Nil(t, moved, "no level to go back to: a run that is not far under throughout moves nothing")
			continue
		}
		require.NotNil(t, moved, "back to the level before the fall")
		assert.InDelta(t, held, moved.Brightness, 1e-9)
	}
}

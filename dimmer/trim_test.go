package dimmer

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The trim's first step after a fast fall is sized by how far over the
// signals are: MaxStep·log₂(p/2). Refusals that come down from their peak
// since the fall are in part the admission gate's warm-up after it; ones
// still at their peak say the fall fell short of a deep overload, and the
// step is twice that. Pressure that went under target in between says the
// level the fall reached was enough at times: the refusals after it are a
// burst, and the step is the ordinary first one, MaxStep.
func TestFirstTrimStepAfterAFall(t *testing.T) {
	firstStep := func(rrs ...float64) (fell, step float64) {
		r := newRig(t, Config{
			Targets:  []Target{{Signal: signals.LatencyP99, Target: 1}, {Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}},
			Features: []Feature{{Name: "recommendations"}},
		})
		r.window = 5 * time.Second
		b := 1.0
		for i, rr := range rrs {
			nb := r.step(0.2, rr).Brightness
			switch {
			case i == 0:
				fell = b - nb
			case nb != b:
				return fell, b - nb
			}
			b = nb
		}
		return fell, 0
	}
	// 9× target at t1: a fast fall of 0.25·log₂(4.5). Then 12× for three
	// periods and 9× at t5: counted from 0.3 of the window (heavy), the
	// account is full at t5.
	fellA, easing := firstStep(0.09, 0.12, 0.12, 0.12, 0.09)
	fellB, deep := firstStep(0.09, 0.09, 0.09, 0.09, 0.09)
	require.InDelta(t, fellA, fellB, 1e-9, "the same fall")
	want := 0.12 * math.Log2(4.5)
	assert.InDelta(t, want, easing, 0.011, "coming down from its peak: MaxStep·log₂(p/2)")
	assert.InDelta(t, min(2*want, 1-fellB), deep, 0.011, "still at its peak: twice that")
	// Under target for a period at t2, then 9× again from t3: the
	// account is full at t5, at the peak, but the pressure dipped.
	fellC, burst := firstStep(0.09, 0.005, 0.09, 0.09, 0.09, 0.09)
	require.InDelta(t, fellA, fellC, 1e-9, "the same fall")
	assert.InDelta(t, 0.12, burst, 0.011, "dipped under target since the fall: MaxStep")
}

func TestTrimProbesAndBacksOff(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = 150
	r.steps(3, 1.6, -1) // latency over CascadeAt at 150/s: 0.2 a period
	dimmed := r.step(0.8, -1).Brightness
	require.InDelta(t, 0.4, dimmed, 1e-9)
	// Latency recovers, the load does not: the trim steps up after
	// enough evidence (each period under Low/2 counts 2 of 5).
	var st *State
	for range 2 {
		st = r.step(0.3, -1)
		assert.Equal(t, dimmed, st.Brightness, "not enough evidence yet")
	}
	st = r.step(0.3, -1)
	good := st.Brightness
	assert.InDelta(t, dimmed+0.1, good, 1e-9, "the first step after a fall: half way to the last level that was over (0.6)")
	assert.Contains(t, st.Reason, "probing")
	st = r.steps(3, 0.3, -1)
	probe := st.Brightness
	require.Greater(t, probe, good)
	assert.InDelta(t, good+0.05, probe, 1e-9, "bisecting toward the level that was over")
	// The probe is over: back near the last good level (a third of the
	// probe above it, rounded to a quantum), not further.
	st = r.steps(3, 1.2, -1)
	back := good + math.Round((probe-good)/3/0.01)*0.01
	assert.InDelta(t, back, st.Brightness, 1e-9, "a failed probe returns near the last good level")
	assert.Contains(t, st.Reason, "back to the last good level")
	// A reversal: the next step waits twice as long (10 evidence: 5
	// periods at −2) and is at most half the span.
	for i := range 5 {
		st = r.step(0.3, -1)
		if i < 4 {
			assert.InDelta(t, back, st.Brightness, 1e-9, "backing off: period %d", i)
		}
	}
	assert.Greater(t, st.Brightness, back+0.005, "then a probe")
	assert.Less(t, st.Brightness, probe, "smaller than the one that failed")
	// The load drops by more than the margin: brighten at full speed.
	r.load = 100
	before := r.steps(5, 0.3, -1).Brightness
	st = r.step(0.3, -1)
	assert.InDelta(t, min(before+0.25, 1), st.Brightness, 0.011, "full speed once load fell")
}

// The trim waits for the signals to describe the level it set: for a
// snapshot's Window after each step, periods count for nothing.
func TestTrimWaitsOutTheSignalWindow(t *testing.T) {
	r := newRig(t, testConfig())
	r.load, r.window = 150, 5*time.Second
	b := r.step(1.6, -1).Brightness // the fall, at t0+1s
	for i := range 6 {
		st := r.step(0.3, -1)
		assert.Equal(t, b, st.Brightness, "t0+%ds: within the window of the fall (4 periods), or gathering (2 of 3)", i+2)
	}
	assert.Greater(t, r.step(0.3, -1).Brightness, b, "t0+8s: the third period at −2")
}

// Readings against the trim's last step count before its signal window has
// passed: over target after a step up says the new level is over, whatever
// the older part of the window held. Readings for the step (calm after a
// step up) wait out the window.
func TestTrimCountsEvidenceAgainstAStepEarly(t *testing.T) {
	r := newRig(t, testConfig())
	r.load, r.window = 150, 5*time.Second
	fell := r.step(1.6, -1).Brightness
	// Calm after the fall: a step up once the window has passed.
	var upAt int
	for i := 1; i <= 20 && upAt == 0; i++ {
		if r.step(0.3, -1).Brightness > fell {
			upAt = i
		}
	}
	require.NotZero(t, upAt, "a step up after the fall")
	up := r.c.State().Brightness
	// Calm after the step up: for it, so nothing counts within the window.
	for i := range 5 {
		require.Equal(t, up, r.step(0.3, -1).Brightness, "%d s after the step up: calm waits out the window", i+1)
	}
	// Now over target: against the step, counted from 0.4 of the window
	// (2 s) — back to the good level in 4 periods, not 5 + 3.
	upAgain := 0
	for i := 1; i <= 20 && upAgain == 0; i++ {
		if r.step(0.3, -1).Brightness > up {
			upAgain = i
		}
	}
	require.NotZero(t, upAgain, "a second step up")
	up2 := r.c.State().Brightness
	var back int
	for i := 1; i <= 8 && back == 0; i++ {
		if r.step(1.2, -1).Brightness < up2 {
			back = i
		}
	}
	assert.Equal(t, 4, back, "periods over target until the step up is undone")
	want := up
	if up2-up >= 0.04-1e-9 { // a probe of four quanta or more goes back to a third of it
		want = up + math.Round((up2-up)/3/0.01)*0.01
	}
	assert.InDelta(t, want, r.c.State().Brightness, 1e-9, "back near the last good level")
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

// Reversals near the level the load allows make the trim slower and its
// steps smaller (Kesten's rule); a run far from target one way starts it
// afresh.
func TestTrimSettlesAndRestartsOnAChange(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = 150
	r.steps(3, 1.6, -1)
	var moves []float64
	last := r.step(0.8, -1).Brightness
	for i := range 120 {
		p := 0.5 // under Low: evidence up
		if i%20 >= 10 {
			p = 1.1 // over target: evidence down
		}
		b := r.step(p, -1).Brightness
		if b != last {
			moves = append(moves, b-last)
			last = b
		}
	}
	require.GreaterOrEqual(t, len(moves), 4)
	for i := 2; i < len(moves); i++ {
		assert.LessOrEqual(t, math.Abs(moves[i]), math.Abs(moves[0])+1e-9, "steps shrink: %v", moves)
	}
	// Far under target (Low/2) for a run: conditions changed. The trim
	// has settled (over 45 s since the fall), so the run is twenty
	// periods, not ten: at a level held for minutes, a lull of ten
	// seconds still happens now and then. With no level a regime fall
	// left to go back to, the trim starts afresh from a span (MaxStep) up.
	var st *State
	for i := range 20 {
		last = r.c.State().Brightness
		st = r.step(0.1, -1)
		if i < 19 {
			require.NotContains(t, st.Reason, "conditions changed", "period %d of the run", i+1)
		}
	}
	assert.Contains(t, st.Reason, "conditions changed")
	assert.InDelta(t, last+0.12, st.Brightness, 1e-9, "a span up at once")
}

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

// At the floor, a full account that has nowhere to go does not back the
// settled trim off: only steps double the wait, so the first steps up out
// of the floor wait 20 s, then 40, not a minute each.
func TestHoldWaitGrowsWithoutAStepAtTheFloor(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	r.step(1.6, 0) // a fall on latency over CascadeAt: 0.4 → 0.2 → 0
	r.step(1.6, 0)
	require.Zero(t, r.c.State().Brightness)
	r.run(60*time.Second, 0.9, 0.005) // over High at the floor: the account fills, nothing moves
	r.run(5*time.Second, 0.8, 0.005)  // in the band, settled: the account is still full
	assert.Equal(t, holdFirst, r.c.mu.holdWait, "no step, no backoff")
	at, dv := r.run(200*time.Second, 0.5, 0)
	require.GreaterOrEqual(t, len(at), 3, "%v %v", at, dv)
	assert.Equal(t, 20*time.Second, gaps(at)[0], "the wait after the first settled step (steps at %v)", at)
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

// An episode that starts with a load step (80 → 150 req/s): the slow load
// average restarts at the fall, so its catching up with the step is no
// drift that would land the trim afresh at a load that never moved.
func TestLoadStepAtTheFallIsNoDrift(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.load = 80
	r.run(60*time.Second, 0.5, 0)
	r.load = 150
	for range 3 {
		r.step(1.6, 0)
	}
	settledOnce, relanded := false, time.Duration(0)
	start := r.now
	for range 200 {
		r.step(0.8, 0.005)
		settled := strings.Contains(r.c.Status().Reason, "settled")
		if settled {
			settledOnce = true
		} else if settledOnce && relanded == 0 {
			relanded = r.now.Sub(start)
		}
	}
	require.True(t, settledOnce)
	assert.Zero(t, relanded, "landed afresh at %s with the load constant since the fall", relanded)
}

// A scheduled cap that binds a settled trim: the law's account is full
// (it would brighten) but the ceiling holds it, and the wait does not grow
// without a step. When the window closes the trim lands afresh from the
// cap's level — settled, it would climb back a quantum a minute (the cap
// took 0.15: a quarter of an hour) at a pressure (0.5) under which the
// landing doubles its steps.
func TestSettledTrimCrawlsBackAfterACap(t *testing.T) {
	cfg := refusalsConfig()
	from := t0.Add(54 * time.Second) // just after the trim settled at 0.4
	// recommendations (0.5–1 of brightness) off, reviews (0–0.5) capped
	// at 50 %: a ceiling of 0.25.
	cfg.Schedule = []Cap{
		{Feature: "recommendations", Max: 0, From: from, For: 3 * time.Minute, Reason: "pre-dim"},
		{Feature: "reviews", Max: 0.5, From: from, For: 3 * time.Minute, Reason: "pre-dim"},
	}
	r := newLabRig(t, cfg)
	r.land()
	require.Equal(t, holdFirst, r.c.mu.holdWait)
	for r.now.Before(from.Add(3*time.Minute - time.Second)) {
		st := r.step(0.5, 0) // under Low: the law would brighten
		if !r.now.Before(from) {
			require.InDelta(t, 0.25, st.Brightness, 1e-9, "held at the cap's ceiling: no step")
		}
	}
	assert.Equal(t, holdFirst, r.c.mu.holdWait, "no step under the cap, no backoff")
	at, dv := r.run(10*time.Minute, 0.5, 0)
	t.Logf("after the cap: steps at %v by %v; brightness %.2f", at, dv, r.c.State().Brightness)
	require.GreaterOrEqual(t, len(at), 2)
	assert.LessOrEqual(t, gaps(at)[0], 20*time.Second, "the wait after the first step since the cap (steps at %v)", at)
	assert.Greater(t, r.c.State().Brightness, 0.38, "10 minutes after the cap closed, back near the 0.40 held before it")
}

// No no-op moves: at a scheduled cap's ceiling the trim does not "probe"
// and publish a level that cannot move.
func TestNoProbesAtTheCapCeiling(t *testing.T) {
	cfg := refusalsConfig()
	cfg.Schedule = []Cap{{Feature: "recommendations", Max: 0.4, From: t0, For: time.Hour, Reason: "sale"}}
	r := newRig(t, cfg)
	r.window = 5 * time.Second
	r.steps(3, 2, -1)
	var gens []uint64
	for range 300 {
		gens = append(gens, r.step(0.2, -1).Generation)
	}
	assert.Equal(t, gens[100], gens[len(gens)-1], "nothing new to publish at the ceiling")
}

// stepUpAfterFall dims with one period at p99 1.6, then steps with calm
// readings until the trim steps up.
func (r *rig) stepUpAfterFall() {
	r.t.Helper()
	r.step(1.6, -1)
	for range 200 {
		r.step(0.3, -1)
		if r.c.mu.why.kind == whyTrimUp {
			return
		}
	}
	r.t.Fatal("no trim step up")
}

// A scheduled cap that starts within a window of a trim step up: the
// readings over target that follow describe the level before the cap, and
// must not count against the capped level (they used to, from 0.4 of the
// window on, and dimmed a feature the cap does not touch).
func TestCapAfterAStepUpIsNoFailedProbe(t *testing.T) {
	r := newRig(t, testConfig())
	r.load, r.window = 150, 5*time.Second
	r.stepUpAfterFall()
	cfg := r.c.Config()
	cfg.Schedule = []Cap{{Max: 0, Feature: cfg.Features[0].Name, From: r.now.Add(500 * time.Millisecond), For: time.Hour, Reason: "pre-dim"}}
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	var capped float64
	for i := 1; i <= 10; i++ {
		p := 0.75 // in the band: no evidence either way
		if i <= 4 {
			p = 1.2
		}
		r.step(p, -1)
		if i == 1 {
			capped = r.c.mu.brightness
		}
	}
	assert.GreaterOrEqual(t, r.c.mu.brightness, capped, "the capped level, dimmed on readings of the level before the cap")
}

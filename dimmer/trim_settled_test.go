package dimmer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// With a level a regime fall left within a span above (the trim's span a
// quantum or two after reversals), a regime move returns to it, not a
// span up past it.
func TestBackToPriorOvershootsIt(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	m := &r.c.mu
	// As after a regime fall from 0.45 and a landing back up whose
	// reversals halved the span twice.
	m.prior, m.priorMark, m.span = 0.45, m.loadMark, 0.03
	moved := r.untilRegimeMove(30, true) // under Low, the mean under Low/2: the "back" test
	require.NotNil(t, moved)
	t.Log(moved.Reason)
	assert.InDelta(t, 0.45, moved.Brightness, 1e-9, "back to the level the fall left, not past it")
}

// A fast fall with one period in it under CascadeAt (a windowed p99 that
// wobbles) records no level the fall merely passed through (0.8, a second
// after full brightness, already over CascadeAt) as one the trim held: a
// calm run later moves a span, not back there.
func TestPriorFromALevelTheFallPassed(t *testing.T) {
	for _, wobble := range []bool{false, true} {
		r := newLabRig(t, refusalsConfig())
		r.step(1.6, 0) // 1 → 0.8
		if wobble {
			r.step(1.4, 0) // over High, under CascadeAt: one trim period
		}
		r.step(1.6, 0) // → 0.6
		r.step(1.6, 0) // → 0.4
		r.run(50*time.Second, 0.8, 0.005)
		require.InDelta(t, 0.4, r.c.State().Brightness, 1e-9)
		moved := r.untilRegimeMove(30, false)
		require.NotNil(t, moved)
		t.Logf("wobble %v: prior-driven move to %.2f: %s", wobble, moved.Brightness, moved.Reason)
		assert.NotContains(t, moved.Reason, "back to the level before the fall", "wobble %v: no level was held before the fall", wobble)
		assert.Less(t, moved.Brightness, 0.6, "wobble %v: a span up, not a jump to a level the fall passed", wobble)
	}
}

// A settled regime move needs a run of 20 s, and its reason says so.
func TestSettledRegimeReasonStatesTheRun(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	var moved *State
	n := 0
	for range 40 {
		n++
		if st := r.step(0.1, 0); strings.Contains(st.Reason, "conditions changed") {
			moved = st
			break
		}
	}
	require.NotNil(t, moved)
	t.Logf("after %d periods: %s", n, moved.Reason)
	assert.Contains(t, moved.Reason, "for 20s", "the run it took")
}

// A return on the relaxed run (under Low, its mean under Low/2) says so,
// not "far under target (under 35%)": half its readings were over 35 %.
func TestRelaxedReturnReasonStatesTheRun(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	r.step(1.6, 0) // a fall from the level held: prior 0.4
	r.step(1.6, 0)
	r.run(20*time.Second, 0.8, 0.005)
	moved := r.untilRegimeMove(30, true)
	require.NotNil(t, moved)
	t.Log(moved.Reason)
	assert.NotContains(t, moved.Reason, "(under 35%) for 10s", "the readings were not all under 35 %")
}

// An episode that starts with a load step (80 → 150 req/s): the slow load
// average restarts at the fall, so its catching up with the step is no
// drift that would land the trim afresh at a load that never moved.
func TestLoadStepRelandsSpuriously(t *testing.T) {
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

// Reconfigure to a longer Tick restarts the run counters, which count
// periods: 8 s of a run under Low at 100 ms (80 periods) must not become
// 80 s' worth at 1 s and fire the return to the prior level at once.
func TestReconfigureTickKeepsRunsInPeriods(t *testing.T) {
	cfg := refusalsConfig()
	cfg.Tick = 100 * time.Millisecond
	r := newLabRig(t, cfg)
	for r.c.State().Brightness > 0.45 {
		r.step(1.6, 0)
	}
	r.run(50*time.Second, 0.8, 0.005)
	require.Contains(t, r.c.Status().Reason, "settled, holding")
	r.c.mu.prior, r.c.mu.priorMark = 0.6, r.c.mu.loadMark
	for range 80 { // 8 s under Low/2: not yet the 10 s a regime move needs
		st := r.step(0.2, 0)
		require.NotContains(t, st.Reason, "conditions changed")
	}
	cfg.Tick = time.Second
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	st := r.step(0.2, 0)
	assert.NotContains(t, st.Reason, "conditions changed", "8.1 s of run is no 10 s run")
}

// The relaxed "back" run (under Low, mean under Low/2) is justified by a
// known good level to return to; with a prior whose load mark the load has
// since risen past ("no guide") it moves nothing, as without a prior.
func TestRelaxedRunWithAPriorThatIsNoGuide(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	m := &r.c.mu
	m.prior, m.priorMark = 0.8, m.loadMark/1.3 // held at a load 30 % lower
	moved := r.untilRegimeMove(30, true)
	if moved != nil {
		t.Errorf("the level is no guide: a run that is not far under throughout should move nothing, as without a prior; moved to %.2f: %s", moved.Brightness, moved.Reason)
	}
}

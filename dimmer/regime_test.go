package dimmer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A regime fall (a run far over target: the capacity dipped) remembers the
// level it left; a later run far under target (it came back) returns
// there at once, and a burst over target after that is no reason to go
// back to the floor the dip held. A calm run in a steady load, with no
// such level, moves a span: it is what a lull looks like. A load that
// rose past the margin since — at once, or slowly enough for the load mark
// to follow — makes the level held before no guide.
func TestRegimeMovesReturnToTheLevelBeforeADip(t *testing.T) {
	for _, rise := range []string{"", "at once", "slowly"} {
		name := "steady load"
		if rise != "" {
			name = "load rose " + rise
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, refusalsConfig())
			r.load = 150
			r.steps(3, 1.6, 0) // a fall to 0.4
			// Probes that fail: the trim settles (small steps, much
			// evidence).
			var st *State
			for range 2 {
				b := r.c.State().Brightness
				for st = r.step(0.3, 0); st.Brightness == b; st = r.step(0.3, 0) {
				}
				for st = r.step(1.2, 0); st.Brightness > b; st = r.step(1.2, 0) {
				}
			}
			st = r.steps(30, 0.8, 0.005) // in the band: the trim holds
			held := st.Brightness
			// The capacity dips: refusals 5 times their target,
			// latency held by the gate. Settled, the trim steps a
			// quantum down and waits; a regime fall every run of 20 s
			// (10 s once it lands afresh), to the floor. before is the
			// level the first regime fall left.
			before := -1.0
			n := 40
			if rise == "" {
				n = 60 // the first regime fall waits 20 s
			}
			for i := range n {
				switch {
				case rise == "at once" && i == 12:
					require.Positive(t, st.Brightness)
					r.load = 200 // a third more: a fast fall
				case rise == "slowly" && i >= 12 && r.load < 250:
					r.load *= 1.05 // the mark follows: no fast fall
				}
				b := st.Brightness
				st = r.step(0.8, 0.05)
				if before < 0 && strings.Contains(st.Reason, "conditions changed") {
					before = b
				}
			}
			if rise == "" {
				require.Positive(t, before, "a regime fall")
				assert.InDelta(t, held, before, 0.021, "a settled trim steps a quantum at a time before the regime fall")
			}
			require.Zero(t, st.Brightness, "the dip dimmed to the floor")
			// It comes back: far under target for a run. The trim
			// probes up a quantum at a time from the floor meanwhile.
			var back *State
			for i := range 12 {
				st = r.step(0.1, 0)
				if strings.Contains(st.Reason, "conditions changed") {
					back = st
					t.Logf("back after %d s: %s", i+1, st.Reason)
					break
				}
			}
			require.NotNil(t, back, "a regime move up within 12 s")
			if rise != "" {
				assert.Less(t, back.Brightness, held-0.1, "the load rose: not back to the level held at the lower load")
				return
			}
			assert.InDelta(t, before, back.Brightness, 1e-9, "back to the level the dip's first fall left")
			// A burst over target: an ordinary step down, not back to
			// the floor.
			st = r.steps(8, 0.8, 0.02)
			assert.Less(t, st.Brightness, before, "the burst dims")
			assert.Greater(t, st.Brightness, before-0.1, "a step, not back to the floor")
		})
	}
}

// A regime move up from a lull that proves over, and the descent after it,
// leave no level to go back to: only a regime fall does. The next lull
// moves a span again, not back up to where the failed move went.
func TestRegimeMoveUpThatFailedIsNoLevelToReturnTo(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = 150
	r.steps(3, 1.6, -1)  // a fall to 0.4
	r.steps(30, 0.8, -1) // in the band
	for lull := range 3 {
		var st *State
		var b float64
		for range 24 { // settled: a run twice as long as the landing's 10
			b = r.c.State().Brightness
			if st = r.step(0.1, -1); strings.Contains(st.Reason, "conditions changed") {
				break
			}
		}
		require.Contains(t, st.Reason, "conditions changed", "lull %d", lull)
		assert.InDelta(t, b+0.12, st.Brightness, 1e-9, "lull %d: a span up", lull)
		r.steps(40, 1.2, -1) // the move was over: the trim descends
		r.steps(30, 0.8, -1)
	}
}

// An episode that ends under a scheduled cap (full brightness for the law,
// the cap binding) leaves no level to return to for the next episode.
func TestRegimeLevelDoesNotOutliveItsEpisodeUnderACap(t *testing.T) {
	cfg := refusalsConfig()
	r := newRig(t, cfg)
	r.load = 150
	r.step(1.6, 0)
	r.steps(30, 0.8, 0.005)
	fell := false
	for range 15 {
		if fell = strings.Contains(r.step(0.8, 0.05).Reason, "conditions changed"); fell {
			break
		}
	}
	require.True(t, fell, "a regime fall")
	r.load = 100 // the load fell: brighten at full speed to 1
	for i := 0; r.c.State().Brightness < 1; i++ {
		require.Less(t, i, 30)
		r.step(0.3, 0)
	}
	capped := cfg
	capped.Schedule = []Cap{{Feature: "recommendations", Max: 0.2, From: r.now, For: 10 * time.Minute, Reason: "sale"}}
	require.NoError(t, r.c.ReconfigureAt(r.now, capped))
	r.steps(60, 0.3, 0)
	// A new episode, at the first one's load: what the first learnt
	// about its dip says nothing about this one.
	r.load = 150
	r.steps(3, 1.6, 0.1)
	r.steps(30, 0.8, 0.005)
	for range 12 {
		b := r.c.State().Brightness
		if st := r.step(0.1, 0); strings.Contains(st.Reason, "conditions changed") {
			assert.NotContains(t, st.Reason, "back to the level before the fall")
			assert.LessOrEqual(t, st.Brightness, b+0.12+1e-9, "a span up at most")
			return
		}
	}
	t.Fatal("no regime move up in 12 s")
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

// With a level a regime fall left within a span above (the trim's span a
// quantum or two after reversals), a regime move returns to it, not a
// span up past it.
func TestRegimeReturnStopsAtTheLevelBeforeTheFall(t *testing.T) {
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
func TestNoReturnToALevelTheFallPassed(t *testing.T) {
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

// The relaxed "back" run (under Low, mean under Low/2) is justified by a
// known good level to return to; with a prior whose load mark the load has
// since risen past ("no guide") it moves nothing, as without a prior.
func TestRelaxedRunNeedsALevelThatIsAGuide(t *testing.T) {
	r := newLabRig(t, refusalsConfig())
	r.land()
	m := &r.c.mu
	m.prior, m.priorMark = 0.8, m.loadMark/1.3 // held at a load 30 % lower
	moved := r.untilRegimeMove(30, true)
	if moved != nil {
		t.Errorf("the level is no guide: a run that is not far under throughout should move nothing, as without a prior; moved to %.2f: %s", moved.Brightness, moved.Reason)
	}
}

// Readings counted early (against the trim's last step, within its signal
// window) are evidence about the level, not a change of regime: the regime
// rule's runs count settled periods only. A plant over target above 0.5
// and far under it below makes the trim step back and forth across 0.5.
func TestNoRegimeMoveWithinAWindow(t *testing.T) {
	for _, ev := range []float64{1, 5} {
		for _, w := range []time.Duration{5 * time.Second, 60 * time.Second} {
			cfg := testConfig()
			cfg.Evidence = ev
			r := newRig(t, cfg)
			r.load, r.window = 150, w
			in := 0
			for i := range 1200 {
				moved := r.c.mu.movedAt
				p := 0.2
				if i == 0 || r.c.mu.brightness > 0.5 {
					p = 1.3
				}
				r.step(p, -1)
				if k := r.c.mu.why.kind; (k == whyRegimeUp || k == whyRegimeBack || k == whyRegimeDown) && r.now.Sub(moved) < w {
					in++
				}
			}
			assert.Zero(t, in, "Evidence %v, window %v: regime moves within a window of the last move", ev, w)
		}
	}
}

package dimmer

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLadderOrderAndDimming(t *testing.T) {
	r := newRig(t, testConfig())
	assert.Equal(t, "recommendations", r.c.Config().Features[0].Name, "rank 0 dims first")

	// A little over target at full brightness: evidence first (2 a
	// period, 5 needed), then a step of at most 0.2.
	sts := r.script(1.3, 1.3, 1.3, 0.9)
	assert.Equal(t, 1.0, sts[1].Brightness, "two periods over target are no overload yet")
	assert.Contains(t, sts[1].Reason, "latency.p99 1.3s > 1s target: over 85% of target at full brightness: weighing")
	first := sts[2]
	assert.InDelta(t, 0.8, first.Brightness, 1e-9, "the third confirms it: a step of 0.2")
	rec, _ := first.Feature("recommendations")
	rev, _ := first.Feature("reviews")
	assert.InDelta(t, 0.6, rec.Level, 1e-9, "recommendations dim")
	assert.Equal(t, 1.0, rev.Level, "reviews wait until recommendations are off")
	assert.Contains(t, first.Reason, "latency.p99 1.3s > 1s target: dimming recommendations")
	assert.Equal(t, first.Brightness, sts[3].Brightness, "dimmed, near target: the trim gathers evidence")

	// Latency over CascadeAt dims every period, 0.2 at a time.
	last := r.steps(5, 3, -1)
	rec, _ = last.Feature("recommendations")
	rev, _ = last.Feature("reviews")
	assert.Equal(t, 0.0, rec.Level)
	assert.Equal(t, 0.0, rev.Level, "fast down: far over target, both off in a few periods")
	vip, _ := last.Level("reviews", "vip")
	assert.InDelta(t, 0.6, vip, 1e-9, "VIPs (offset +0.3) keep reviews longer")
}

// A refusal ratio far over its target is a heavy overload: the account
// fills in one period and the fall grows with the pressure.
func TestFallGrowsWithThePressure(t *testing.T) {
	fall := func(rr float64) float64 {
		r := newRig(t, Config{
			Targets:  []Target{{Signal: signals.LatencyP99, Target: 1}, {Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}},
			Features: []Feature{{Name: "recommendations"}},
		})
		return 1 - r.steps(2, 0.2, rr).Brightness
	}
	assert.Equal(t, 0.0, fall(0.015), "1.5× target: evidence (2 a period), no fall yet")
	assert.InDelta(t, 0.25, fall(0.04), 1e-9, "4× target (4 a period): a quarter in the second")
	assert.InDelta(t, 0.5, fall(0.08), 1e-9, "8× (6 a period): half in the first")
	assert.InDelta(t, 0.75, fall(0.16), 1e-9, "16×: three quarters")
}

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

func TestHysteresisHoldsInBandAndBrightensSlowly(t *testing.T) {
	r := newRig(t, testConfig())
	sts := r.script(2, 2) // dim hard
	b := sts[1].Brightness
	require.Less(t, b, 1.0)

	// In the band (0.70–0.85): nothing moves.
	for _, st := range r.script(0.8, 0.75, 0.72) {
		assert.Equal(t, b, st.Brightness, "holding in the band")
	}
	// Under the low watermark: hold for 5 s, then brighten.
	r.now = t0.Add(10 * time.Second)
	r.load = 10 // the load that caused the dimming is gone
	var levels []float64
	for i := range 9 {
		st := r.step(0.3, -1)
		levels = append(levels, st.Brightness)
		if i < 5 {
			assert.Equal(t, b, st.Brightness, "second %d under low: still holding", i)
		}
	}
	assert.Greater(t, levels[8], levels[5], "brightening after the hold")
	assert.LessOrEqual(t, levels[6]-levels[5], 0.25+1e-9, "at most MaxRise per second")
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

func TestCascadeShedsOnlyAtTheFloorAndUnshedsFirst(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = -1
	r.steps(5, 1.6, -1)   // over CascadeAt: 0.2 a period down to the floor
	st := r.step(1.2, -1) // over target but under CascadeAt: no shedding
	assert.Equal(t, 0.0, st.Brightness)
	assert.Equal(t, 0.0, st.Shed, "under CascadeAt: no shedding")
	st = r.steps(3, 3, -1) // runaway latency, held for CascadeHold
	assert.Equal(t, 0.0, st.Shed, "not before CascadeHold")
	st = r.steps(5, 3, -1)
	assert.Greater(t, st.Shed, 0.0, "held over CascadeAt at the floor: shedding")
	assert.Equal(t, 0.0, ShedShare(st.Shed, signals.Critical))
	shed := st.Shed
	st = r.steps(6, 0.2, -1)
	assert.Less(t, st.Shed, shed, "recovering: shedding goes first")
	assert.LessOrEqual(t, st.Brightness, 0.0, "features wait until shedding is over")
	f, _ := st.Feature("recommendations")
	assert.Equal(t, 0.0, f.Level)
}

func TestStaleSignalsHold(t *testing.T) {
	r := newRig(t, testConfig())
	level := r.step(2, -1).Features[0].Level
	for i := 2; i <= 4; i++ {
		st := r.silent()
		assert.Equal(t, level, st.Features[0].Level, "no signal: hold")
		if i < 4 {
			assert.Equal(t, Auto, st.Mode)
		} else {
			assert.Equal(t, Stale, st.Mode, "3 periods without a signal: stale")
			assert.Contains(t, st.Reason, "stale")
		}
	}
	// An old snapshot is no snapshot either, and stale never brightens.
	r.now = t0.Add(10 * time.Second)
	st := r.c.Step(r.now, snap(r.now.Add(-5*time.Second), 0.1, 10))
	assert.Equal(t, Stale, st.Mode)
	assert.Equal(t, level, st.Features[0].Level)
	// Signals return.
	r.load = 10
	st = r.step(0.8, -1)
	assert.Equal(t, Auto, st.Mode)
}

func TestOperatorsPinFreezeShadow(t *testing.T) {
	r := newRig(t, testConfig())
	c, now := r.c, r.now
	st, err := c.PinAt(now, "reviews", 0.25, time.Minute, "provider incident INC-7")
	require.NoError(t, err)
	f, _ := st.Feature("reviews")
	assert.Equal(t, Override, f.Mode)
	assert.Equal(t, 0.25, f.Level)
	vip, _ := st.Level("reviews", "vip")
	assert.Equal(t, 0.25, vip, "a pin applies to every segment")
	assert.Contains(t, st.Reason, "INC-7")

	// The pin expires with its TTL.
	r.load = 10
	r.now = now.Add(60 * time.Second)
	st = r.step(0.1, -1)
	f, _ = st.Feature("reviews")
	assert.Equal(t, Auto, f.Mode)
	assert.Equal(t, 1.0, f.Level)

	for _, bad := range []struct {
		feature string
		level   float64
		ttl     time.Duration
		reason  string
		want    string
		is      error
	}{
		{"nope", 0.5, time.Minute, "x", `unknown feature "nope"`, ErrUnknownFeature},
		{"reviews", 1.5, time.Minute, "x", "want 0 ≤ level ≤ 1", ErrBadPin},
		{"reviews", 0.5, 0, "x", "ttl", ErrBadPin},
		{"reviews", 0.5, time.Minute, " ", "reason is required", ErrBadPin},
		{"reviews", 0.5, time.Minute, strings.Repeat("x", MaxReason+1), "the reason is 501 bytes long: at most 500", ErrBadPin},
	} {
		_, err := c.PinAt(now, bad.feature, bad.level, bad.ttl, bad.reason)
		assert.ErrorContains(t, err, bad.want)
		assert.ErrorIs(t, err, bad.is, "callers branch on it")
	}
	_, err = c.UnpinAt(now, "nope")
	assert.ErrorIs(t, err, ErrUnknownFeature)
	_, err = c.UnpinAt(now, "reviews")
	assert.ErrorIs(t, err, ErrNotPinned)

	st = c.FreezeAt(now, "sale starts")
	assert.Equal(t, Frozen, st.Mode)
	gen := st.Generation
	r.now = now.Add(69 * time.Second)
	st = r.step(5, -1)
	assert.Equal(t, 1.0, st.Features[0].Level, "frozen: overload changes nothing")
	assert.Equal(t, gen, st.Generation)
	r.now = now.Add(71 * time.Second)
	for range 8 { // ticks without any signal: the freeze and its reason stay
		st = r.silent()
	}
	assert.Equal(t, Frozen, st.Mode, "no signal does not undo the operator's freeze")
	assert.Contains(t, st.Reason, "sale starts")
	assert.Equal(t, gen, st.Generation, "no spurious change is published")
	st = c.UnfreezeAt(now)
	assert.Equal(t, Auto, st.Mode)

	st = c.SetShadowAt(now, true)
	assert.Equal(t, Shadow, st.Mode)
	assert.Contains(t, st.Reason, "shadow mode on")
	r.now = now.Add(80 * time.Second)
	st = r.step(5, -1)
	assert.Equal(t, Shadow, st.Mode)
	assert.Equal(t, 1.0, st.Features[0].Level, "shadow: nothing applied")
	assert.Less(t, st.Features[0].Computed, 1.0, "shadow: the computed level is reported")
	assert.Equal(t, 0.0, st.Shed)
}

func TestQuantizedChangesAndSubscribers(t *testing.T) {
	r := newRig(t, testConfig())
	ch, cancel := r.c.Subscribe()
	defer cancel()
	sts := r.script(1.6, 1.6, 1.6, 1.6)
	var gens []uint64
	for _, st := range sts {
		gens = append(gens, st.Generation)
		for _, f := range st.Features {
			assert.InDelta(t, f.Level, float64(int(f.Level*100+0.5))/100, 1e-12, "levels are quantized to 1 %%")
		}
	}
	for i := 1; i < len(gens); i++ {
		assert.GreaterOrEqual(t, gens[i], gens[i-1])
	}
	// The subscriber holds only the newest state; it never blocked Step.
	got := <-ch
	assert.Equal(t, sts[len(sts)-1].Generation, got.Generation)
	select {
	case st := <-ch:
		t.Fatalf("a second state queued: generation %d", st.Generation)
	default:
	}
	// From dimming to holding in the band is a change of action: it is
	// published, with the same levels. Then a step that changes nothing a
	// reader acts on — not the action, not its cause, not a level —
	// publishes nothing, though the numbers in its reason differ.
	st := r.c.State()
	r.now = t0.Add(19 * time.Second)
	hold := r.step(0.78, -1) // in the band
	assert.Equal(t, st.Generation+1, hold.Generation)
	assert.Equal(t, Hold, hold.Action)
	assert.Equal(t, st.Features[0].Level, hold.Features[0].Level)
	again := r.step(0.8, -1)
	assert.Same(t, hold, again)
	assert.Contains(t, r.c.Status().Reason, "800ms", "Status has this tick's readings")
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]func(*Config){
		"no targets":        func(c *Config) { c.Targets = nil },
		"no features":       func(c *Config) { c.Features = nil },
		"declared twice":    func(c *Config) { c.Features = append(c.Features, Feature{Name: "reviews"}) },
		"floor":             func(c *Config) { c.Features[0].Floor = 1 },
		"want 0 < low":      func(c *Config) { c.Low, c.High = 0.9, 0.8 },
		"under 100ms":       func(c *Config) { c.Tick = time.Millisecond },
		"want a positive":   func(c *Config) { c.Targets[0].Target = -1 },
		"cascade at":        func(c *Config) { c.CascadeAt = 0.5 },
		"unique name":       func(c *Config) { c.Segments = append(c.Segments, Segment{Name: "vip"}) },
		"unknown signal 99": func(c *Config) { c.Targets[0].Signal = 99 },
		"max step 0.001":    func(c *Config) { c.MaxStep = 0.001 },
		"setpoint 3":        func(c *Config) { c.Setpoint = 3 },
		"load margin 1":     func(c *Config) { c.LoadMargin = 1 },
		"stale after -1":    func(c *Config) { c.StaleAfter = -1 },
		"1001 features: at most 1000": func(c *Config) {
			c.Features = benchConfig(MaxFeatures + 1).Features
		},
		"33 segments: at most 32": func(c *Config) {
			c.Segments = nil
			for i := range MaxSegments + 1 {
				c.Segments = append(c.Segments, Segment{Name: fmt.Sprint("s", i)})
			}
		},
		"feature 0: name \"xxxxxxxxxxxxxxxxxxxx\"… is 65 bytes long: at most 64": func(c *Config) {
			c.Features[0].Name = strings.Repeat("x", MaxName+1)
		},
		"feature 1: name \"re\\nviews\" contains a control character": func(c *Config) { c.Features[1].Name = "re\nviews" },
		"feature 1: name \"\\xff\" is not valid UTF-8":                func(c *Config) { c.Features[1].Name = "\xff" },
		"segment 0: name \"vip\\x00\" contains a control character":   func(c *Config) { c.Segments[0].Name = "vip\x00" },
	}
	for want, mutate := range cases {
		cfg := testConfig()
		mutate(&cfg)
		_, err := New(cfg)
		assert.ErrorContains(t, err, want)
	}
}

func TestRunStepsEveryTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New(testConfig())
		src := &fakeSource{p99: 3}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx, src) }()
		time.Sleep(3500 * time.Millisecond) // virtual time
		synctest.Wait()
		assert.Equal(t, 3, src.calls)
		assert.Less(t, c.State().Brightness, 1.0)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

type fakeSource struct {
	p99   float64
	calls int
}

func (f *fakeSource) Snapshot(_ context.Context, now time.Time) (signals.Snapshot, error) {
	f.calls++
	return snap(now, f.p99, 100), nil
}

func benchConfig(n int) Config {
	cfg := Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 1}}}
	for i := range n {
		cfg.Features = append(cfg.Features, Feature{Name: fmt.Sprintf("feature-%d", i), Rank: i})
	}
	return cfg
}

// BenchmarkStep measures a steady-state step (the decision does not
// change), 10 features.
func BenchmarkStep(b *testing.B) {
	c, _ := New(benchConfig(10))
	now := t0
	s := snap(now, 0.78, 100) // in the band
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		s.Time = now
		c.Step(now, s)
	}
}

// BenchmarkStepDimmed measures a steady step of a dimmed controller: the
// law's trim path (evidence, settle, the account) without a publish.
func BenchmarkStepDimmed(b *testing.B) {
	c, _ := New(benchConfig(10))
	now := t0
	for range 3 {
		now = now.Add(time.Second)
		c.Step(now, snap(now, 3, 100))
	}
	s := snap(now, 0.8, 100) // in the band: the account holds
	s.Window = 5 * time.Second
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		s.Time = now
		c.Step(now, s)
	}
}

// BenchmarkStepChanging measures steps that publish a new state each time.
func BenchmarkStepChanging(b *testing.B) {
	c, _ := New(benchConfig(10))
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Second)
		p := 3.0
		if i%200 >= 100 {
			p = 0.1
		}
		c.Step(now, snap(now, p, float64(100+i%200)))
	}
}

func BenchmarkStateRead(b *testing.B) {
	c, _ := New(benchConfig(10))
	b.ReportAllocs()
	var sink *State
	for b.Loop() {
		sink = c.State()
	}
	_ = sink
}

func TestReasonReadsWell(t *testing.T) {
	r := newRig(t, Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 1}}, Features: []Feature{{Name: "recommendations"}}})
	st := r.step(1.6, -1)
	assert.Equal(t, "latency.p99 1.6s > 1s target: dimming recommendations", st.Reason)
	assert.False(t, strings.Contains(st.Reason, "%!"))
}

// The cascade refuses only while refusing helps: when the gate is full,
// never while it has room; it unwinds when latency is back under target,
// when the gate has room (and says why), and at once when the load that
// forced it has gone.
func TestCascadeOnlyWhileItHelps(t *testing.T) {
	r := newRig(t, testConfig())
	st := r.steps(10, 3, -1, busy(0.01)) // runaway latency, but the gate has room: slow pages
	assert.Equal(t, 0.0, st.Brightness, "features dim: cheaper pages do lower latency")
	assert.Equal(t, 0.0, st.Shed, "refusing at the door would not")
	assert.Contains(t, r.c.Status().Reason, "the gate has room")

	st = r.steps(8, 3, -1, busy(0.6)) // the gate is full
	require.Greater(t, st.Shed, 0.0, "a full gate and runaway latency: shedding")
	shedding := st.Shed

	st = r.step(3, -1, busy(0.02)) // room again, latency still high
	assert.InDelta(t, max(shedding-1, 0), st.Shed, 1e-9, "unwinds at UnshedRate")
	assert.Contains(t, st.Reason, "shedding does not lower this latency")
	assert.Equal(t, Brighten, st.Action)
	st = r.step(3, -1, busy(0.02))
	assert.Equal(t, 0.0, st.Shed, "gone within two periods")

	// Shedding again; then the load that forced it goes: at once.
	st = r.steps(8, 3, -1, busy(0.6))
	require.Greater(t, st.Shed, 0.0)
	r.load = 50
	st = r.step(3, -1, busy(0.6))
	assert.Equal(t, 0.0, st.Shed, "the load fell below the mark: shedding stops in one period")
	assert.Contains(t, st.Reason, "fell below")

	// And back under target with the gate still busy: unwinds too.
	r.load = 100
	st = r.steps(8, 3, -1, busy(0.6))
	require.Greater(t, st.Shed, 0.0)
	st = r.steps(2, 0.9, -1, busy(0.6))
	assert.Equal(t, 0.0, st.Shed, "latency under target: no reason to refuse")

	// Without the gate's signal (no gate to ask), the cascade works on
	// latency alone, as before.
	st = newRig(t, testConfig()).steps(10, 3, -1)
	assert.Greater(t, st.Shed, 0.0)
}

// A DimOnly target (refusals over a window) is not counted while the gate
// has room: its refusals belong to an overload that is over.
func TestDimOnlyDiscountedWithRoom(t *testing.T) {
	cfg := testConfig()
	cfg.Targets = []Target{{Signal: signals.LatencyP99, Target: 1}, {Signal: signals.RejectRatio, Target: 0.05, DimOnly: true}}
	r := newRig(t, cfg)
	r.now = t0.Add(-time.Second)
	st := r.step(0.2, 0.3, busy(0.5))
	assert.Less(t, st.Brightness, 1.0, "a full gate refusing 30 %%: dim")
	r.step(0.2, 0.3, busy(0))
	st = r.c.Status()
	assert.InDelta(t, 0.2, st.Pressure, 1e-9, "room: only latency counts")
	assert.True(t, st.Signals[1].Discounted)
	assert.False(t, st.Signals[0].Discounted)
}

// A state is published when the action or its cause changes, never for
// the numbers in the reason alone.
func TestPublishOnActionOrCause(t *testing.T) {
	cfg := testConfig()
	cfg.Targets = append(cfg.Targets, Target{Signal: signals.RejectRatio, Target: 0.05, DimOnly: true})
	r := newRig(t, cfg)
	first := r.step(0.78, 0) // in the band: hold, latency
	for _, p := range []float64{0.79, 0.8, 0.81, 0.77} {
		assert.Same(t, first, r.step(p, 0), "hold on latency with other numbers: nothing new")
	}
	byRefusals := r.step(0.5, 0.04) // in the band on refusals: same action, other cause
	assert.Equal(t, first.Generation+1, byRefusals.Generation)
	assert.Equal(t, signals.RejectRatio, byRefusals.Cause)
	assert.Equal(t, Hold, byRefusals.Action)
}

// Near target but not over it, a dimmed controller holds: periods in the
// band count for nothing, and a level is only stepped on evidence. At full
// brightness, over High but under target is no overload.
func TestNearTargetHolds(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = 150
	b := r.step(1.6, -1).Brightness
	require.Less(t, b, 1.0)
	st := r.steps(30, 0.8, -1) // in the band
	assert.Equal(t, b, st.Brightness, "in the band: hold")
	assert.Equal(t, Hold, st.Action)
	st = r.steps(4, 0.9, -1) // over High: 1 a period
	assert.Equal(t, b, st.Brightness, "4 of 5")
	st = r.step(0.9, -1)
	assert.Less(t, st.Brightness, b, "5 of 5: a step down")

	// At full brightness, over High but under target counts 1 a period.
	r = newRig(t, testConfig())
	r.load = 150
	st = r.steps(4, 0.9, -1)
	assert.Equal(t, 1.0, st.Brightness, "4 of 5")
	assert.Less(t, r.step(0.9, -1).Brightness, 1.0, "5 of 5")
}

// With the load that forced dimming still there, calm latency brightens
// by the trim; room at the admission gate (headroom) makes each period
// under Low count double.
func TestHeadroomBrightensDespiteTheLoadMark(t *testing.T) {
	run := func(util float64) float64 {
		r := newRig(t, testConfig())
		r.load = 150
		inUse := reading{signals.GateUtilization, util}
		r.steps(2, 2, -1, busy(0), inUse)                      // a burst at 150/s
		return r.steps(10, 0.5, -1, busy(0), inUse).Brightness // under Low, over Low/2
	}
	assert.Greater(t, run(0.3), run(0.9), "a third of the gate in use: brightens sooner")
}

func TestConfigAndStateCannotBeChangedFromOutside(t *testing.T) {
	in := testConfig()
	r := newRig(t, in)
	c := r.c
	in.Features[0].Cost, in.Targets[0].Target, in.Segments[0].Offset = 99, 99, 0.9
	got := c.Config()
	got.Features[0].Cost, got.Targets[0].Target, got.Segments[0].Name = 42, 42, "x"
	cfg := c.Config()
	assert.Equal(t, 1.0, cfg.Features[0].Cost, "neither New's argument nor Config's result is shared")
	assert.Equal(t, 1.0, cfg.Targets[0].Target)
	assert.Equal(t, "vip", cfg.Segments[0].Name)
	assert.Equal(t, 0.3, cfg.Segments[0].Offset)

	r.script(2, 2, 2) // dimmed
	_, err := c.PinAt(r.now, "reviews", 0.4, time.Hour, "db migration")
	require.NoError(t, err)
	c.FreezeAt(r.now, "sale")
	r.load = -1
	st := r.step(2, -1) // the first frozen tick
	require.False(t, st.Tampered())
	gen, recs, vip := st.Generation, st.Features[0].Level, st.Features[0].Segments[0]
	i, _ := st.FeatureIndex("reviews")

	// Change every exported field a reader might touch.
	st.Generation, st.Mode, st.Shed, st.Reason = 0, Auto, 2, "changed"
	for k := range st.Features {
		f := &st.Features[k]
		f.Name, f.Level, f.Computed, f.Mode = "x", 0.123, 0.123, Shadow
		f.Segments[0] = 0.456
		if f.Pin != nil {
			f.Pin.Reason, f.Pin.Level = "<script>", 1
		}
	}
	assert.True(t, st.Tampered())
	assert.Equal(t, gen, st.Seq())
	assert.Equal(t, Frozen, st.StateMode())
	assert.Equal(t, 0.0, c.ShedLevel())
	lv, ok := c.State().Level("recommendations", "")
	assert.True(t, ok)
	assert.Equal(t, recs, lv, "Level reads the state's own copy")
	lv, _ = c.State().Level("recommendations", "vip")
	assert.Equal(t, vip, lv)
	why, pinned := st.PinReason(i)
	assert.True(t, pinned)
	assert.Equal(t, "db migration", why)
	assert.Equal(t, Override, st.FeatureMode(i))
	assert.Equal(t, 0.4, st.LevelAt(i, -1))

	// Frozen holds what was published, not what a caller wrote; and the
	// next steps publish nothing new.
	for range 4 {
		next := r.step(2, -1)
		assert.Same(t, st, next, "a changed field is not a change: nothing new is published")
		assert.Equal(t, gen, next.Seq())
	}
	st = c.UnfreezeAt(r.now.Add(time.Second))
	assert.Equal(t, recs, st.Features[0].Level, "unfrozen from the published levels")
	assert.False(t, st.Tampered())
}

// TestUnpinWhileStale: an override released (or expired) while the
// signals are stale gives the feature back to the law; the pin's level is
// not held with no end.
func TestUnpinWhileStale(t *testing.T) {
	r := newRig(t, Config{Tick: time.Second, Targets: []Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []Feature{{Name: "a"}, {Name: "b", Rank: 1}}})
	c := r.c
	r.load = -1
	r.now = t0.Add(-time.Second)
	r.step(0.2, -1)
	now := r.now
	_, err := c.PinAt(now, "b", 0.1, 2*time.Second, "incident")
	require.NoError(t, err)
	for range 5 { // no signals: stale
		now = now.Add(time.Second)
		c.Step(now, signals.Snapshot{})
	}
	st := c.State()
	require.Equal(t, Stale, st.StateMode())
	fs, _ := st.Feature("b")
	assert.Equal(t, 1.0, fs.Level, "the pin expired while stale: back to the law's level")
	_, err = c.PinAt(now, "a", 0.2, time.Hour, "again")
	require.NoError(t, err)
	st, err = c.UnpinAt(now, "a")
	require.NoError(t, err)
	fs, _ = st.Feature("a")
	assert.Equal(t, 1.0, fs.Level, "released while stale: back to the law's level")
	c.FreezeAt(now, "war room")
	_, err = c.PinAt(now, "a", 0.3, time.Hour, "while frozen")
	require.NoError(t, err)
	st, _ = c.UnpinAt(now, "a")
	fs, _ = st.Feature("a")
	assert.Equal(t, 1.0, fs.Level, "released while frozen: the held level, not the pin's")
}

// Evidence counts per second of Tick, not per period: at a 250 ms tick an
// overload a little over target is confirmed after 2.5 s, as after 3
// periods of 1 s.
func TestEvidenceIsPerSecond(t *testing.T) {
	cfg := testConfig()
	cfg.Tick = 250 * time.Millisecond
	r := newRig(t, cfg)
	for i := 1; i <= 10; i++ {
		st := r.step(1.3, -1)
		if i < 10 {
			require.Equal(t, 1.0, st.Brightness, "period %d (%v): gathering", i, time.Duration(i)*cfg.Tick)
		} else {
			assert.Less(t, st.Brightness, 1.0, "2.5 s of 2 a second: confirmed")
		}
	}
}

// BenchmarkStepMaxFeatures measures a changing step at the largest ladder
// a configuration may declare (MaxFeatures): every feature's level is
// recomputed from its stretch of the scale.
func BenchmarkStepMaxFeatures(b *testing.B) {
	c, _ := New(benchConfig(MaxFeatures))
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Second)
		p := 3.0
		if i%200 >= 100 {
			p = 0.1
		}
		c.Step(now, snap(now, p, float64(100+i%200)))
	}
}

package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// A rise of the load just over LoadMargin above the mark dims at once (the
// mark is compared before it moves toward the new load).
func TestLoadRiseOverTheMarginDims(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.steps(2, 2, -1)
	r.steps(20, 0.8, -1) // in the band: the trim holds, the mark settles at 100
	b := r.c.State().Brightness
	r.load = 125
	st := r.step(1.2, -1)
	assert.Less(t, st.Brightness, b, "25 %% more load: a fast step")
}

// The load fell below the mark but latency is still over target: the trim
// dims further, it does not hold for good.
func TestFallenButStillOverDims(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.steps(2, 2, -1)
	b := r.c.State().Brightness
	require.Less(t, b, 1.0)
	r.load = 70
	st := r.steps(60, 1.3, -1)
	assert.Less(t, st.Brightness, b, "over target at a lower load: dims")
}

// With only DimOnly targets, their refusals discounted once the load fell
// are a calm reading, not a missing one: the controller brightens instead
// of going stale.
func TestOnlyDimOnlyTargetsBrightenAfterTheLoadFell(t *testing.T) {
	r := newRig(t, Config{Targets: []Target{{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}}, Features: []Feature{{Name: "recs"}}})
	r.window = 5 * time.Second
	r.steps(3, -1, 0.2)
	require.Less(t, r.c.State().Brightness, 1.0)
	r.load = 50
	st := r.steps(30, -1, 0)
	assert.Equal(t, Auto, st.Mode)
	assert.Equal(t, 1.0, st.Brightness)
}

// The trim that brings the level back to full brightness ends the episode:
// no more probing at full brightness, and a new overload is met by the
// full-brightness account and the fast fall.
func TestEpisodeEndsAtFullBrightness(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.steps(3, 2, -1)
	gen := uint64(0)
	for i := range 600 {
		st := r.step(0.2, -1)
		if i == 300 {
			require.Equal(t, 1.0, st.Brightness, "back to full at the same load")
			gen = st.Generation
		}
	}
	assert.Equal(t, gen, r.c.State().Generation, "nothing published once back at full")
	assert.False(t, r.c.mu.dimmed)
	st := r.step(0.2, 0.3) // refusals 30× target: an overload at once
	assert.Less(t, st.Brightness, 0.5)
}

// The account an episode leaves at −8·need relaxes back to −4·need: a day
// later, a burst 4× over target confirms as soon as on a fresh controller.
func TestCooledAccountRelaxes(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.steps(3, 2, -1)
	r.load = 50
	r.steps(200, 0.2, -1) // the load fell: back to full, the episode ends
	require.False(t, r.c.mu.dimmed)
	assert.InDelta(t, -4*r.c.need(), r.c.mu.acc, 1e-9, "relaxed to the calm clamp")
}

// With the cascade off (MaxShed < 0) the brightness is never −0.
func TestNoNegativeZero(t *testing.T) {
	cfg := refusalsConfig()
	cfg.MaxShed = -1
	r := newRig(t, cfg)
	r.window = 5 * time.Second
	st := r.steps(10, 3, -1)
	assert.False(t, math.Signbit(st.Brightness), "brightness %v", st.Brightness)
}

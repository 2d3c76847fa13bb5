package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// The trim never runs while shedding: with High over target, a cascade
// that does not unwind yet is held, not ended by a trim step.
func TestTrimDoesNotEndShedding(t *testing.T) {
	cfg := refusalsConfig()
	cfg.High, cfg.Low, cfg.CascadeAt = 1.2, 0.9, 1.5
	r := newRig(t, cfg)
	r.window = 5 * time.Second
	r.steps(15, 3, -1) // down to the floor, then held over CascadeAt: shedding
	shed := r.c.State().Shed
	require.Greater(t, shed, 0.0)
	st := r.steps(10, 1.1, -1) // over target, under High: no unwind, no trim
	assert.Equal(t, shed, st.Shed)
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

// With the cascade off (MaxShed < 0) the brightness is never −0.
func TestNoNegativeZero(t *testing.T) {
	cfg := refusalsConfig()
	cfg.MaxShed = -1
	r := newRig(t, cfg)
	r.window = 5 * time.Second
	st := r.steps(10, 3, -1)
	assert.False(t, math.Signbit(st.Brightness), "brightness %v", st.Brightness)
}

// Calm at full brightness before Hold has passed is "full brightness", not
// "within the band".
func TestCalmAtFullBrightnessSaysSo(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.step(0.3, -1)
	assert.Contains(t, r.c.Status().Reason, "full brightness")
	assert.NotContains(t, r.c.Status().Reason, "within")
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

package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regressions found by a review that tried to break the law (issue 16).

// stepper2 steps a controller one Tick at a time with p99 (seconds),
// arrival rate and reject.ratio (negative: absent), over a 5 s window.
type stepper2 struct {
	c   *Controller
	now time.Time
}

func (s *stepper2) step(p99, rate, rr float64) *State {
	s.now = s.now.Add(s.c.cfg.Tick)
	var sn signals.Snapshot
	sn.Time, sn.Window = s.now, 5*time.Second
	if p99 >= 0 {
		sn.Set(signals.LatencyP99, p99)
	}
	if rate >= 0 {
		sn.Set(signals.ArrivalRate, rate)
	}
	if rr >= 0 {
		sn.Set(signals.RejectRatio, rr)
	}
	return s.c.Step(s.now, sn)
}

func newStepper2(t *testing.T, cfg Config) *stepper2 {
	c, err := New(cfg)
	require.NoError(t, err)
	return &stepper2{c: c, now: t0}
}

func reviewConfig() Config {
	return Config{
		Targets:  []Target{{Signal: signals.LatencyP99, Target: 1}, {Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}},
		Features: []Feature{{Name: "recs"}, {Name: "reviews", Rank: 1}},
	}
}

// The load fell below the mark but latency is still over target: the trim
// dims further, it does not hold for good.
func TestFallenButStillOverDims(t *testing.T) {
	s := newStepper2(t, reviewConfig())
	for range 2 {
		s.step(2, 100, -1)
	}
	b := s.c.State().Brightness
	require.Less(t, b, 1.0)
	var st *State
	for range 60 {
		st = s.step(1.3, 70, -1)
	}
	assert.Less(t, st.Brightness, b, "over target at a lower load: dims")
}

// With only DimOnly targets, their refusals discounted once the load fell
// are a calm reading, not a missing one: the controller brightens instead
// of going stale.
func TestOnlyDimOnlyTargetsBrightenAfterTheLoadFell(t *testing.T) {
	s := newStepper2(t, Config{Targets: []Target{{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}}, Features: []Feature{{Name: "recs"}}})
	for range 3 {
		s.step(-1, 100, 0.2)
	}
	require.Less(t, s.c.State().Brightness, 1.0)
	var st *State
	for range 30 {
		st = s.step(-1, 50, 0)
	}
	assert.Equal(t, Auto, st.Mode)
	assert.Equal(t, 1.0, st.Brightness)
}

// The trim that brings the level back to full brightness ends the episode:
// no more probing at full brightness, and a new overload is met by the
// full-brightness account and the fast fall.
func TestEpisodeEndsAtFullBrightness(t *testing.T) {
	s := newStepper2(t, reviewConfig())
	for range 3 {
		s.step(2, 100, -1)
	}
	gen := uint64(0)
	for i := range 600 {
		st := s.step(0.2, 100, -1)
		if i == 300 {
			require.Equal(t, 1.0, st.Brightness, "back to full at the same load")
			gen = st.Generation
		}
	}
	assert.Equal(t, gen, s.c.State().Generation, "nothing published once back at full")
	assert.False(t, s.c.mu.dimmed)
	st := s.step(0.2, 100, 0.3) // refusals 30× target: an overload at once
	assert.Less(t, st.Brightness, 0.5)
}

// A rise of the load just over LoadMargin above the mark dims at once (the
// mark is compared before it moves toward the new load).
func TestLoadRiseOverTheMarginDims(t *testing.T) {
	s := newStepper2(t, reviewConfig())
	for range 2 {
		s.step(2, 100, -1)
	}
	for range 20 {
		s.step(0.8, 100, -1) // in the band: the trim holds, the mark settles at 100
	}
	b := s.c.State().Brightness
	st := s.step(1.2, 125, -1)
	assert.Less(t, st.Brightness, b, "25 %% more load: a fast step")
}

// The trim never runs while shedding: with High over target, a cascade
// that does not unwind yet is held, not ended by a trim step.
func TestTrimDoesNotEndShedding(t *testing.T) {
	cfg := reviewConfig()
	cfg.High, cfg.Low, cfg.CascadeAt = 1.2, 0.9, 1.5
	s := newStepper2(t, cfg)
	for range 15 {
		s.step(3, 100, -1) // down to the floor, then held over CascadeAt: shedding
	}
	shed := s.c.State().Shed
	require.Greater(t, shed, 0.0)
	var st *State
	for range 10 {
		st = s.step(1.1, 100, -1) // over target, under High: no unwind, no trim
	}
	assert.Equal(t, shed, st.Shed)
}

// The account an episode leaves at −8·need relaxes back to −4·need: a day
// later, a burst 4× over target confirms as soon as on a fresh controller.
func TestCooledAccountRelaxes(t *testing.T) {
	s := newStepper2(t, reviewConfig())
	for range 3 {
		s.step(2, 100, -1)
	}
	for range 200 {
		s.step(0.2, 50, -1) // the load fell: back to full, the episode ends
	}
	require.False(t, s.c.mu.dimmed)
	assert.InDelta(t, -4*s.c.need(), s.c.mu.acc, 1e-9, "relaxed to the calm clamp")
}

// No no-op moves: at a scheduled cap's ceiling the trim does not "probe"
// and publish a level that cannot move.
func TestNoProbesAtTheCapCeiling(t *testing.T) {
	cfg := reviewConfig()
	cfg.Schedule = []Cap{{Feature: "recs", Max: 0.4, From: t0, For: time.Hour, Reason: "sale"}}
	s := newStepper2(t, cfg)
	for range 3 {
		s.step(2, 100, -1)
	}
	var gens []uint64
	for range 300 {
		gens = append(gens, s.step(0.2, 100, -1).Generation)
	}
	assert.Equal(t, gens[100], gens[len(gens)-1], "nothing new to publish at the ceiling")
}

// With the cascade off (MaxShed < 0) the brightness is never −0.
func TestNoNegativeZero(t *testing.T) {
	cfg := reviewConfig()
	cfg.MaxShed = -1
	s := newStepper2(t, cfg)
	var st *State
	for range 10 {
		st = s.step(3, 100, -1)
	}
	assert.False(t, math.Signbit(st.Brightness), "brightness %v", st.Brightness)
}

// Calm at full brightness before Hold has passed is "full brightness", not
// "within the band".
func TestCalmAtFullBrightnessSaysSo(t *testing.T) {
	s := newStepper2(t, reviewConfig())
	s.step(0.3, 100, -1)
	assert.Contains(t, s.c.Status().Reason, "full brightness")
	assert.NotContains(t, s.c.Status().Reason, "within")
}

// windowStep steps c at now with a snapshot of p99 over a signal window w.
func windowStep(c *Controller, now time.Time, p99 float64, w time.Duration) {
	s := snap(now, p99, 150)
	s.Window = w
	c.Step(now, s)
}

// stepUpAfterFall dims c with one period at p99 1.6, then steps it with calm
// readings until the trim steps up; it returns the driver's clock.
func stepUpAfterFall(t *testing.T, c *Controller, now time.Time, window time.Duration) time.Time {
	t.Helper()
	step := func(p99 float64) {
		now = now.Add(c.cfg.Tick)
		windowStep(c, now, p99, window)
	}
	step(1.6)
	for range 200 {
		step(0.3)
		if c.mu.why.kind == whyTrimUp {
			return now
		}
	}
	t.Fatal("no trim step up")
	return now
}

// A scheduled cap that starts within a window of a trim step up: the
// readings over target that follow describe the level before the cap, and
// must not count against the capped level (they used to, from 0.4 of the
// window on, and dimmed a feature the cap does not touch).
func TestCapAfterAStepUpIsNoFailedProbe(t *testing.T) {
	c, _ := New(testConfig())
	const window = 5 * time.Second
	now := stepUpAfterFall(t, c, t0, window)
	cfg := c.Config()
	cfg.Schedule = []Cap{{Max: 0, Feature: cfg.Features[0].Name, From: now.Add(500 * time.Millisecond), For: time.Hour, Reason: "pre-dim"}}
	require.NoError(t, c.ReconfigureAt(now, cfg))
	var capped float64
	for i := 1; i <= 10; i++ {
		p := 0.75 // in the band: no evidence either way
		if i <= 4 {
			p = 1.2
		}
		now = now.Add(time.Second)
		windowStep(c, now, p, window)
		if i == 1 {
			capped = c.mu.brightness
		}
	}
	assert.GreaterOrEqual(t, c.mu.brightness, capped, "the capped level, dimmed on readings of the level before the cap")
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
			c, _ := New(cfg)
			now := t0
			in := 0
			for i := range 1200 {
				moved := c.mu.movedAt
				p := 0.2
				if i == 0 || c.mu.brightness > 0.5 {
					p = 1.3
				}
				now = now.Add(time.Second)
				windowStep(c, now, p, w)
				if k := c.mu.why.kind; (k == whyRegimeUp || k == whyRegimeBack || k == whyRegimeDown) && now.Sub(moved) < w {
					in++
				}
			}
			assert.Zero(t, in, "Evidence %v, window %v: regime moves within a window of the last move", ev, w)
		}
	}
}

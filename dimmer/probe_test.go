package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// levelsOf is every feature's published level in st.
func levelsOf(st *State) []float64 {
	out := make([]float64, len(st.Features))
	for i, f := range st.Features {
		out[i] = f.Level
	}
	return out
}

// TestProbeMeasuresEveryFeature: at a load where one feature is fractional
// and the other all on or all off, the probe keeps each within its share
// of either end, and within two minutes each feature's cost is learned
// from the contrast (the rig's truth: 1.5 and 0.5 of the all-off
// request), where without the probe the feature that never moved is not
// measured at all.
func TestProbeMeasuresEveryFeature(t *testing.T) {
	for _, lam := range []float64{200, 300} { // reviews all on; recommendations all off
		r := newModelRig(t)
		st := r.periods(120, lam)
		r.c.mu.Lock()
		p := r.c.mu.mdl.probeShare
		r.c.mu.Unlock()
		assert.InDelta(t, r.c.probeShare(lam), p, 0.011, "load %v: the share the load calls for", lam)
		require.Greater(t, p, 0.0)
		require.Greater(t, st.Brightness, 0.0, "load %v: %s", lam, st.Reason)
		for i, l := range levelsOf(st) {
			// (Up by as much of p as a quarter of the optional work pays
			// for: probeBudget.)
			assert.Greater(t, l, 0.0, "load %v, feature %d: probed up", lam, i)
			assert.LessOrEqual(t, l, 1-p+1e-9, "load %v, feature %d: probed down", lam, i)
		}
		for i, e := range r.c.Costs() {
			truth := r.costs[i] / r.base
			if assert.True(t, e.Known(), "load %v, feature %d", lam, i) {
				assert.InDelta(t, truth, e.Value, max(0.2*truth, 0.05), "load %v, feature %d: learned %.3f ± %.3f", lam, i, e.Value, e.SE)
			}
		}

		off := newModelRigWith(t, func(c *Config) { c.Probe = -1 })
		st = off.periods(120, lam)
		never := 0
		for _, e := range off.c.Costs() {
			if e.Contrasted == 0 {
				never++
			}
		}
		assert.Equal(t, 1, never, "load %v without the probe: one feature is never contrasted (%v)", lam, levelsOf(st))
	}
}

// TestProbeShare: the share is what probeSample calls for at the load,
// rounded up to the quantum, within a quantum and Config.Probe.
func TestProbeShare(t *testing.T) {
	c, err := New(Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 1}}, Features: []Feature{{Name: "a"}}})
	require.NoError(t, err)
	assert.InDelta(t, DefaultProbe, c.Config().Probe, 0)
	for lam, want := range map[float64]float64{0: DefaultProbe, 50: DefaultProbe, 200: 0.05, 300: 0.03, 1000: 0.01, 1e6: 0.01} {
		assert.InDelta(t, want, c.probeShare(lam), 1e-9, "load %v", lam)
	}
	// In quanta of 0.02, within a Probe of 0.05: 0.04 at most; in quanta
	// wider than the probe, none.
	for _, tc := range []struct{ quantum, probe, lam, want float64 }{
		{0.02, 0.05, 50, 0.04}, {0.02, 0.05, 300, 0.04}, {0.02, 0.05, 1000, 0.02},
		{0.1, 0.05, 50, 0}, {0.05, 0.05, 50, 0.05},
	} {
		c, err := New(Config{Quantum: tc.quantum, Probe: tc.probe, Targets: []Target{{Signal: signals.LatencyP99, Target: 1}}, Features: []Feature{{Name: "a"}}})
		require.NoError(t, err)
		assert.InDelta(t, tc.want, c.probeShare(tc.lam), 1e-9, "%+v", tc)
	}
}

// TestProbeFollowsAReconfiguredShare: a reload of the same configuration
// keeps the probe; a Probe lowered by Reconfigure holds from the next
// step, one turned off stops it, and so does a switch to the search law.
func TestProbeFollowsAReconfiguredShare(t *testing.T) {
	r := newModelRig(t)
	r.periods(5, 300)
	st := r.periods(10, 100)
	require.InDeltaSlice(t, []float64{0.95, 0.95}, levelsOf(st), 1e-9, st.Reason)
	cfg := r.c.Config()
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	st = r.period(100)
	require.InDeltaSlice(t, []float64{0.95, 0.95}, levelsOf(st), 1e-9, "the same configuration reloaded: the probe holds through the reload")
	cfg.Probe = 0.02
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	st = r.period(100)
	assert.InDeltaSlice(t, []float64{0.98, 0.98}, levelsOf(st), 1e-9)
	cfg.Probe = -1
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	st = r.period(100)
	assert.InDeltaSlice(t, []float64{1, 1}, levelsOf(st), 1e-9)

	// Back to the default.
	cfg.Probe = 0
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	st = r.period(100)
	assert.InDeltaSlice(t, []float64{0.95, 0.95}, levelsOf(st), 1e-9)
}

// TestProbeGivesWay: nothing is probed with the probe off, without tallies, at the floors, at full brightness far under
// K (or before K is measured), and a pin, shadow mode and a freeze decide
// over it.
func TestProbeGivesWay(t *testing.T) {
	probed := func(st *State) bool {
		for _, l := range levelsOf(st) {
			if l > 0 && l < 1 {
				return true
			}
		}
		return false
	}
	// At 100 req/s everything fits (3 s of work a second of the 3.6 the
	// rig's 4 workers carry within target): all on, and probed down once
	// an overload has measured K…
	r := newModelRig(t)
	st := r.periods(10, 100)
	require.Equal(t, 1.0, st.Brightness)
	assert.False(t, probed(st), "K not measured yet: no probe at full brightness: %v", levelsOf(st))
	r.periods(5, 300)
	st = r.periods(10, 100)
	require.Equal(t, 1.0, st.Brightness, st.Reason)
	require.True(t, probed(st), "all on, the load near K, is probed: %v", levelsOf(st))
	// …but not while the load is under half of K: nobody misses a feature
	// for costs that matter only once the load grows.
	st = r.periods(5, 40)
	assert.False(t, probed(st), "all on, far under K: %v", levelsOf(st))
	st = r.periods(5, 100)
	require.True(t, probed(st), "and again near K: %v", levelsOf(st))

	for name, edit := range map[string]func(*Config){
		"probe off": func(c *Config) { c.Probe = -1 },
	} {
		r := newModelRigWith(t, edit)
		r.periods(5, 300)
		st = r.periods(10, 100)
		assert.False(t, probed(st), "%s: %v", name, levelsOf(st))
	}

	// Without tallies: nothing to learn from, nothing probed.
	r = newModelRig(t)
	for i := range 15 {
		lam := 300.0
		if i >= 5 {
			lam = 100
		}
		s := r.snap(lam, r.c.State(), 5*time.Second)
		s.Tallies = nil
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		st = r.c.Step(r.now, s)
	}
	assert.False(t, probed(st), "without tallies: %v", levelsOf(st))

	// A pin, shadow mode, a freeze.
	r = newModelRig(t)
	r.periods(5, 300)
	r.periods(10, 100)
	st, err := r.c.PinAt(r.now, "reviews", 1, time.Hour, "incident")
	require.NoError(t, err)
	l, _ := st.Level("reviews", "")
	assert.Equal(t, 1.0, l, "a pin is the operator's level")
	st = r.c.SetShadowAt(r.now, true)
	assert.Equal(t, []float64{1, 1}, levelsOf(st), "shadow mode publishes full levels")
	r.c.SetShadowAt(r.now, false)
	_, err = r.c.UnpinAt(r.now, "reviews")
	require.NoError(t, err)
	st = r.period(100)
	require.True(t, probed(st))
	held := levelsOf(st)
	r.c.FreezeAt(r.now, "looking")
	st = r.periods(5, 100)
	assert.Equal(t, held, levelsOf(st), "a freeze holds the levels as published")

	// At the floors (an overload the floors do not hold): no probe up.
	r = newModelRig(t)
	st = r.periods(10, 3000)
	require.LessOrEqual(t, st.Brightness, 0.0, "%s", st.Reason)
	assert.Equal(t, []float64{0, 0}, levelsOf(st), "at the floors: %s", st.Reason)
}

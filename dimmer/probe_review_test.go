package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noisyPeriod steps one second at a Poisson-like load around lam.
func (r *modelRig) noisyPeriod(lam float64) *State {
	l := max(math.Round(lam+math.Sqrt(lam)*r.rng.NormFloat64()), 1)
	s := r.snap(l, r.c.State(), 5*time.Second)
	r.now = r.now.Add(time.Second)
	s.Time = r.now
	return r.c.Step(r.now, s)
}

// TestProbeHoldsAtALoadNearHalfOfK: at full brightness, a steady load whose
// noise straddles probeRoom·K neither starts nor stops the probe every few
// seconds: the levels a reader sees (1 ↔ 1 − p) do not flap.
func TestProbeHoldsAtALoadNearHalfOfK(t *testing.T) {
	for _, lam := range []float64{60, 62, 64, 66} {
		r := newModelRig(t)
		for range 5 {
			r.period(300) // K measured
		}
		for range 120 {
			r.noisyPeriod(lam) // (the load's tracker settles)
		}
		g := r.c.State().Generation
		for range 600 {
			st := r.noisyPeriod(lam)
			require.Equal(t, 1.0, st.Brightness, "load %v: %s", lam, st.Reason)
		}
		assert.LessOrEqual(t, r.c.State().Generation-g, uint64(1), "load %v: publishes in 10 min at a steady load", lam)
	}
}

// TestProbeRoomCountsEveryFeatureOn: at full brightness the probe starts
// once the load, at the work of a request with every feature on, passes
// probeRoom of K — a feature's Floor does not make that work lighter.
func TestProbeRoomCountsEveryFeatureOn(t *testing.T) {
	r := newModelRigWith(t, func(c *Config) { c.Features[0].Floor = 0.5 })
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.costs.last = r.now
	c.mu.brightness = 1
	c.mu.mdl.capacity.k = 4
	c.mu.mdl.w0, c.mu.mdl.cost[0], c.mu.mdl.cost[1] = 0.01, 0.015, 0.005
	c.mu.mdl.load.est, c.mu.mdl.load.ok = 75, true // 75 × 0.03 = 2.25 s a second: over half of K
	assert.True(t, c.probing(r.now))
}

// TestProbeReconfigureKeepsItsBudget: a Reconfigure (the same file
// reloaded) publishes the probe as the last step did — not the whole
// share up on the features that are off, unbudgeted, for one period.
func TestProbeReconfigureKeepsItsBudget(t *testing.T) {
	r := newModelRig(t)
	for range 120 {
		r.period(300) // recommendations near off: its probe up is budgeted
	}
	before := levelsOf(r.c.State())
	require.NoError(t, r.c.ReconfigureAt(r.now, r.c.Config()))
	assert.Equal(t, before, levelsOf(r.c.State()), "the reload's own state")
}

// TestProbeReconfigureHoldsTheNewShareAtOnce: a Probe lowered, or a
// quantum widened past it, holds from the Reconfigure's own state: the
// users probed are not all given the features back for a period, and a
// feature off is never given more than Config.Probe.
func TestProbeReconfigureHoldsTheNewShareAtOnce(t *testing.T) {
	r := newModelRig(t)
	r.periods(5, 300)
	r.periods(10, 100)
	require.InDeltaSlice(t, []float64{0.95, 0.95}, levelsOf(r.c.State()), 1e-9)
	cfg := r.c.Config()
	cfg.Probe = 0.02
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	assert.InDeltaSlice(t, []float64{0.98, 0.98}, levelsOf(r.c.State()), 1e-9, "the reload's own state")

	// In quanta of 0.1, wider than a Probe of 0.05: no probe, and never
	// a level of 0.1 for a feature off.
	r = newModelRig(t)
	r.workers = 2
	r.periods(120, 150)
	st := r.c.State()
	require.Less(t, st.Features[0].Level, 0.05, "recommendations near off, probed up")
	cfg = r.c.Config()
	cfg.Quantum = 0.1
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	for n := range 3 {
		r.c.mu.Lock()
		b := r.c.mu.brightness
		want := []float64{r.c.quantize(r.c.ladder(0, b)), r.c.quantize(r.c.ladder(1, b))}
		r.c.mu.Unlock()
		assert.InDeltaSlice(t, want, levelsOf(r.c.State()), 1e-9, "step %d: no probe in quanta wider than it", n)
		r.period(150)
	}
}

// TestProbeSparesASegmentAtItsFloors: a segment whose offset holds it at
// its floors (bots, offset −1) is not probed up — no feature is given to
// it for a cost nobody budgeted; a segment above keeps the probe.
func TestProbeSparesASegmentAtItsFloors(t *testing.T) {
	r := newModelRigWith(t, func(c *Config) {
		c.Segments = []Segment{{Name: "vip", Offset: 0.5}, {Name: "bot", Offset: -1}}
	})
	r.periods(5, 300)
	st := r.periods(60, 150)
	require.Greater(t, st.Brightness, 0.0, st.Reason)
	require.Less(t, st.Brightness, 1.0, st.Reason)
	for _, f := range st.Features {
		vip, _ := st.Level(f.Name, "vip")
		bot, _ := st.Level(f.Name, "bot")
		assert.Equal(t, 0.0, bot, "%s: bots at their floors", f.Name)
		assert.Less(t, vip, 1.0, "%s: vip probed down", f.Name)
	}
	// The main levels at their floors: no segment is probed either.
	st = r.periods(10, 3000)
	require.LessOrEqual(t, st.Brightness, 0.0, st.Reason)
	for _, f := range st.Features {
		vip, _ := st.Level(f.Name, "vip")
		assert.NotEqual(t, 0.95, vip, "%s: vip at the main floors", f.Name)
	}
}

// TestProbeNeedsTalliesOfItsFeatures: tallies that name none of the
// configured features (the app's flag keys differ) teach nothing, and
// start no probe.
func TestProbeNeedsTalliesOfItsFeatures(t *testing.T) {
	r := newModelRig(t)
	step := func(lam float64) *State {
		s := r.snap(lam, r.c.State(), 5*time.Second)
		for i := range s.Tallies {
			s.Tallies[i].Feature = "app." + s.Tallies[i].Feature
		}
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		return r.c.Step(r.now, s)
	}
	for range 5 {
		step(300)
	}
	var st *State
	for range 60 {
		st = step(200)
	}
	for _, e := range r.c.Costs() {
		require.Zero(t, e.Contrasted)
	}
	require.Greater(t, st.Brightness, 0.0, st.Reason)
	for i, f := range r.c.Config().Features {
		r.c.mu.Lock()
		want := r.c.quantize(r.c.ladder(i, r.c.mu.brightness))
		r.c.mu.Unlock()
		assert.InDelta(t, want, st.Features[i].Level, 1e-9, "%s: nothing learned, nothing probed", f.Name)
	}
}

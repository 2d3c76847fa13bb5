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

package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expectedCost is 1 + Σ level·cost·reach/w0 from st and the model's
// estimates, computed apart from noteCost.
func expectedCost(c *Controller, st *State) float64 {
	m := &c.mu.mdl
	w := 1.0
	for i, f := range c.cfg.Features {
		l, _ := st.Level(f.Name, "")
		w += l * m.cost[i] * m.reach[i] / m.w0
	}
	return w
}

// TestRequestCostFollowsThePublishedLevels: on the model law a request is
// charged what the levels it is served make it take, in all-off requests
// — the rig's truth is a base of 10 ms and features of 15 and 5 ms, 3.0
// all on — and it falls as the levels dim, with a pin, and to 1 with
// every feature off.
func TestRequestCostFollowsThePublishedLevels(t *testing.T) {
	r := newModelRig(t)
	assert.Equal(t, 1.0, r.c.RequestCost(), "nothing measured: a request is one")
	st := r.periods(20, 100) // 3 s of work a second for four workers: full brightness
	require.Equal(t, 1.0, st.Brightness)
	assert.InDelta(t, 3.0, r.c.RequestCost(), 0.3, "every feature on: 1 + 1.5 + 0.5")
	assert.InDelta(t, expectedCost(r.c, st), r.c.RequestCost(), 1e-9)

	_, err := r.c.PinAt(r.now, "recommendations", 0, time.Hour, "test")
	require.NoError(t, err)
	assert.InDelta(t, 1.5, r.c.RequestCost(), 0.2, "recommendations pinned off: 1 + 0.5")

	r.c.Unpin("recommendations")
	st = r.periods(30, 220) // 6.6 s a second all on: dimmed
	require.Less(t, st.Brightness, 1.0)
	assert.InDelta(t, expectedCost(r.c, st), r.c.RequestCost(), 1e-9, "the levels published")
	assert.Less(t, r.c.RequestCost(), 2.5)

	st = r.periods(30, 600) // more than the floors carry
	require.LessOrEqual(t, st.Brightness, 0.0)
	assert.InDelta(t, 1.0, r.c.RequestCost(), 1e-9, "every feature off: one all-off request")
}

// TestRequestCostIsOneOnTheSearchLaw: the search law has no model of a
// request's work; a gate charging RequestCost counts requests, as before.
func TestRequestCostIsOneOnTheSearchLaw(t *testing.T) {
	r := newModelRigWith(t, func(c *Config) { c.Model = false })
	for _, lam := range []float64{100, 220, 600} {
		r.periods(20, lam)
		assert.Equal(t, 1.0, r.c.RequestCost(), "load %v", lam)
	}
}

// TestRequestCostAllocatesNothing: the gate asks at every admission.
func TestRequestCostAllocatesNothing(t *testing.T) {
	r := newModelRig(t)
	r.periods(20, 100)
	var sink float64
	assert.Zero(t, testing.AllocsPerRun(100, func() { sink += r.c.RequestCost() }))
	assert.Greater(t, sink, 0.0)
}

// TestRequestCostUnderConcurrentSteps: read while the law steps, reconfigures
// and pins (go test -race).
func TestRequestCostUnderConcurrentSteps(t *testing.T) {
	r := newModelRig(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			if w := r.c.RequestCost(); w < 1 {
				t.Errorf("RequestCost %v under 1", w)
				return
			}
		}
	}()
	for i := range 50 {
		r.period(float64(100 + 10*i))
	}
	<-done
}

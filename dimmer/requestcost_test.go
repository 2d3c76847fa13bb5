package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expectedCost is (1 + Σ level·k)/(1 + Σ k), k = cost·reach/w0, from st
// and the model's estimates, computed apart from noteCost.
func expectedCost(c *Controller, st *State) float64 {
	m := &c.mu.mdl
	w, full := 1.0, 1.0
	for i, f := range c.cfg.Features {
		l, _ := st.Level(f.Name, "")
		k := m.cost[i] * m.reach[i] / m.w0
		w += l * k
		full += k
	}
	return w / full
}

// TestRequestCostFollowsThePublishedLevels: on the model law a request is
// charged what the levels it is served make it take, as a share of a
// full request — the rig's truth is a base of 10 ms and features of 15
// and 5 ms: 1 all on, half with recommendations off, a third all off.
func TestRequestCostFollowsThePublishedLevels(t *testing.T) {
	r := newModelRig(t)
	assert.Equal(t, 1.0, r.c.RequestCost(), "nothing measured: a full request")
	st := r.periods(20, 100) // 3 s of work a second for four workers: full brightness
	require.Equal(t, 1.0, st.Brightness)
	assert.InDelta(t, 1.0, r.c.RequestCost(), 1e-9, "every feature on")

	_, err := r.c.PinAt(r.now, "recommendations", 0, time.Hour, "test")
	require.NoError(t, err)
	assert.InDelta(t, 0.5, r.c.RequestCost(), 0.07, "recommendations pinned off: (1 + 0.5)/3")
	assert.InDelta(t, expectedCost(r.c, r.c.State()), r.c.RequestCost(), 1e-9)

	_, err = r.c.UnpinAt(r.now, "recommendations")
	require.NoError(t, err)
	st = r.periods(30, 220) // 6.6 s a second all on: dimmed
	require.Less(t, st.Brightness, 1.0)
	require.Greater(t, st.Brightness, 0.0)
	assert.InDelta(t, expectedCost(r.c, st), r.c.RequestCost(), 1e-9, "the levels published")
	assert.Less(t, r.c.RequestCost(), 0.9)

	st = r.periods(30, 600) // more than the floors carry
	require.LessOrEqual(t, st.Brightness, 0.0)
	assert.InDelta(t, 1.0/3, r.c.RequestCost(), 0.05, "every feature off: a third of a full request")
	assert.InDelta(t, expectedCost(r.c, st), r.c.RequestCost(), 1e-9)
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
			if w := r.c.RequestCost(); w < minRequestCost || w > 1 {
				t.Errorf("RequestCost %v outside [%v, 1]", w, minRequestCost)
				return
			}
		}
	}()
	for i := range 50 {
		r.period(float64(100 + 10*i))
	}
	<-done
}

// TestRequestCostBounded: an adopted checkpoint's scale is held within
// what a move may teach, and the charge within [minRequestCost, 1] —
// a scale of 1e300 made a request 2e300 all-off ones, which the gate's
// integer counters wrapped to a negative cost in flight.
func TestRequestCostBounded(t *testing.T) {
	src := newModelRig(t)
	src.periods(20, 100)
	cp := src.c.Checkpoint()
	cp.Scale = 1e300
	r := newModelRig(t)
	_, err := r.c.AdoptAt(r.now, cp)
	require.NoError(t, err)
	assert.LessOrEqual(t, r.c.mu.mdl.scale, maxScale)
	for _, lam := range []float64{100, 600} {
		r.periods(10, lam)
		w := r.c.RequestCost()
		assert.GreaterOrEqual(t, w, minRequestCost, "load %v", lam)
		assert.LessOrEqual(t, w, 1.0, "load %v", lam)
	}
}

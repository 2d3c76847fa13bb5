package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestCapacityReadingOverĈReplacesIt: a saturated period's completions
// are at most what the service can do. The first seconds of a run read
// low (four workers behind a gate whose limit is still opening: 1.7 s of
// work a second), K is raised since to what the service carried within
// target, and a later saturated period reads 4.2 ± 0.1: it shows Ĉ too
// low and replaces it — it must not average with the start-up's into a bound
// under K (the average cut a K of 3.6 to 2.6). A reading under Ĉ still
// moves it by measureWeight, and enough of them bring K down.
func TestCapacityReadingOverĈReplacesIt(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var e capacity
	e.saturated(t0, 1.7, 0, true, 5*time.Second)
	assert.InDelta(t, setShare*1.7, e.k, 1e-9, "the first reading sets K")
	e.carried(t0.Add(time.Minute), 3.6)
	e.saturated(t0.Add(5*time.Minute), 4.5, 6, true, 5*time.Second)
	assert.InDelta(t, 3.6+measureWeight*(4.5-3.6), e.c, 1e-9, "a reading over Ĉ within its noise moves it by measureWeight")
	e.saturated(t0.Add(5*time.Minute+time.Second), 4.2, 0.1, true, 5*time.Second)
	assert.InDelta(t, 4.0, e.c, 1e-9, "one beyond its noise replaces it with its lower bound")
	assert.InDelta(t, 3.6, e.k, 1e-9, "K carried within target stays")

	e.saturated(t0.Add(6*time.Minute), 3.0, 0, true, 5*time.Second)
	assert.InDelta(t, 4.0+measureWeight*(3.0-4.0), e.c, 1e-9, "a reading under Ĉ moves it by measureWeight")
	assert.InDelta(t, 3.6, e.k, 1e-9)
	for i := range 5 {
		e.saturated(t0.Add(7*time.Minute+time.Duration(i)*time.Second), 3.0, 0, true, 5*time.Second)
	}
	assert.Less(t, e.k, 3.4, "a service that does less, period after period, bounds K")
	assert.Equal(t, capMeasured, e.src)
}

// TestModelMeasuresCapacityFromTheSecondSaturatedPeriod: a saturated
// period (the gate full, arrivals beyond completions) whose completions
// read far under Ĉ — a burst late in the period, the service idle before
// it — is the first of its run: it measures nothing, and K and Ĉ stay. A
// second in a row, busy throughout, is a measurement.
func TestModelMeasuresCapacityFromTheSecondSaturatedPeriod(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400) // overloaded: Ĉ and K measured
	r.periods(60, 200)
	capOf := func() (k, c float64) {
		r.c.mu.Lock()
		defer r.c.mu.Unlock()
		return r.c.mu.mdl.capacity.k, r.c.mu.mdl.capacity.c
	}
	k0, c0 := capOf()
	require.Greater(t, c0, 0.0, "Ĉ measured in the overload")
	burst := func() *State {
		s := r.snap(20, r.c.State(), 5*time.Second) // 20 completions: 0.2–0.6 s of work
		s.Recent.Arrived = 200
		s.Set(signals.ArrivalRate, 200)
		s.Set(signals.RejectRatio, 0.5)
		s.Set(signals.GateBusy, 1)
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		return r.c.Step(r.now, s)
	}
	burst()
	k, c := capOf()
	assert.Equal(t, k0, k, "the first saturated period of a run moved K")
	assert.Equal(t, c0, c, "the first saturated period of a run moved Ĉ")
	burst()
	_, c = capOf()
	assert.Less(t, c, c0, "the second saturated period in a row measures")
}

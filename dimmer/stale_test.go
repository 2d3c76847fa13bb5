package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/signals"
)

// TestIdleIsNotStale: a source that answers with no request in its window
// (arrival rate 0, nothing in flight) is an idle service, fresh, its
// levels held; one whose requests hang (in flight, none arriving or
// completing), or that measures nothing at all, goes stale.
func TestIdleIsNotStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		load  float64 // the arrival rate; negative: none
		more  []reading
		stale bool
	}{
		{"idle", 0, []reading{{signals.InFlight, 0}}, false},
		{"requests hang", 0, []reading{{signals.InFlight, 3}}, true},
		{"nothing measured", -1, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: []Feature{{Name: "a"}}})
			r.load = tc.load
			st := r.steps(10, -1, -1, tc.more...)
			assert.Equal(t, tc.stale, st.Mode == Stale, "mode %v", st.Mode)
			if !tc.stale {
				assert.Equal(t, Auto, st.Mode)
				assert.Contains(t, r.c.Status().Reason, "idle")
			}
		})
	}
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

package dimmer

import (
	"testing"

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

package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestIdleIsNotStale: a source that answers with no request in its window
// (arrival rate 0, nothing in flight) is an idle service, fresh, its
// levels held; one whose requests hang (in flight, none arriving or
// completing), or that measures nothing at all, goes stale.
func TestIdleIsNotStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snap  func(signals.Snapshot) signals.Snapshot
		stale bool
	}{
		{"idle", func(s signals.Snapshot) signals.Snapshot {
			s.Set(signals.ArrivalRate, 0)
			s.Set(signals.InFlight, 0)
			return s
		}, false},
		{"requests hang", func(s signals.Snapshot) signals.Snapshot {
			s.Set(signals.ArrivalRate, 0)
			s.Set(signals.InFlight, 3)
			return s
		}, true},
		{"nothing measured", func(s signals.Snapshot) signals.Snapshot { return s }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: []Feature{{Name: "a"}}})
			require.NoError(t, err)
			now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
			var st *State
			for range 10 {
				now = now.Add(time.Second)
				st = c.Step(now, tc.snap(signals.Snapshot{Time: now}))
			}
			assert.Equal(t, tc.stale, st.Mode == Stale, "mode %v", st.Mode)
			if !tc.stale {
				assert.Equal(t, Auto, st.Mode)
				assert.Contains(t, c.Status().Reason, "idle")
			}
		})
	}
}

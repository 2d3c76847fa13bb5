package fallback

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transitionsTo scrapes reg for brownout_dependency_breaker_transitions_total
// of the breakers' moves to state to.
func transitionsTo(t *testing.T, reg *prometheus.Registry, to string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "brownout_dependency_breaker_transitions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "to" && l.GetValue() == to {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no transitions to %s", to)
	return 0
}

// TestCollectorTransitionsAreMonotonic: a breaker that has flapped more
// than the 100 transitions Status keeps still counts them all; a counter
// rebuilt from the last 100 at each scrape froze, then went down.
func TestCollectorTransitionsAreMonotonic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := New(Config{Name: "sms", MaxAttempts: 1, Timeout: time.Second,
			BreakerWindow: 1, BreakerFailures: 1, BreakerTrials: 1, BreakerDelay: time.Second})
		require.NoError(t, err)
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(NewCollector([]*Guard{g}, nil)))
		fail := func(context.Context) (int, error) { return 0, errors.New("down") }
		ok := func(context.Context) (int, error) { return 1, nil }
		var last float64
		for cycle := 1; cycle <= 60; cycle++ {
			Call(context.Background(), g, fail) // closed → open
			time.Sleep(time.Second)
			Call(context.Background(), g, ok) // open → half-open → closed
			v := transitionsTo(t, reg, "open")
			require.GreaterOrEqual(t, v, last, "cycle %d: the counter went down", cycle)
			last = v
		}
		assert.Equal(t, 60.0, last, "60 openings")
		assert.Equal(t, 60.0, transitionsTo(t, reg, "closed"))
		assert.Equal(t, 60.0, transitionsTo(t, reg, "half-open"))
		st := g.Status()
		assert.Len(t, st.Transitions, 100, "Status keeps the last 100")
		assert.Equal(t, map[[2]string]uint64{{"closed", "open"}: 60, {"open", "half-open"}: 60, {"half-open", "closed"}: 60},
			st.TransitionTotals)
	})
}

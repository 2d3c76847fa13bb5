package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// pushSnap is what brownoutd's push source reports after a push interval
// of one second at load lam, every feature at the levels of st (snap, over
// the push source's 10 s window) — the same until the next push, however
// often the daemon ticks.
func (r *modelRig) pushSnap(lam float64, st *State) signals.Snapshot {
	return r.snap(lam, st, 10*time.Second)
}

// TestModelCountsARepeatedPeriodOnce: brownoutd ticking every 250 ms over
// instances that push every second sees each push interval four times
// (the push source's Recent and tallies hold until the next push). One
// interval of fewer arrivals — an outlier, not a fall — must not count as
// the two periods in a row the load tracker asks before it takes a fall:
// the levels, steady at 200 req/s, do not brighten for it (and dim back
// a second later). With a tick of one second they do not.
func TestModelCountsARepeatedPeriodOnce(t *testing.T) {
	for _, tick := range []time.Duration{time.Second, 250 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			r := newModelRig(t)
			c, err := New(Config{
				Tick: tick,
				Targets: []Target{
					{Signal: signals.LatencyP99, Target: 0.3},
					{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true},
				},
				Features: []Feature{{Name: "recommendations", Rank: 0, Cost: 1.5}, {Name: "reviews", Rank: 1, Cost: 0.5}},
			})
			require.NoError(t, err)
			r.c = c
			per := int(time.Second / tick)
			push := func(lam float64) (lo, hi float64) {
				s := r.pushSnap(lam, r.c.State())
				lo, hi = 2, -2
				for range per {
					r.now = r.now.Add(tick)
					s.Time = r.now
					st := r.c.Step(r.now, s)
					lo, hi = min(lo, st.Brightness), max(hi, st.Brightness)
				}
				return lo, hi
			}
			for range 90 {
				push(200)
			}
			b := r.c.State().Brightness
			require.Greater(t, b, 0.05)
			require.Less(t, b, 0.95)
			_, hi := push(120) // one interval of 120 arrivals: 5.7 standard errors under 200
			assert.LessOrEqual(t, hi, b+minMove, "one low interval brightened the levels from %.2f to %.2f: %s", b, hi, r.c.State().Reason)
		})
	}
}

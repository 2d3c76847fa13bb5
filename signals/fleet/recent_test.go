package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestPushRecentAfterRestart: an instance that restarted between its last
// two pushes reports, as its Recent, the new run's counts (its increase),
// never a difference with the old run's counters — neither an
// underflowed count (a field of the new run under the old one's while
// its arrivals are over them) nor one short by the old run's total.
func TestPushRecentAfterRestart(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	start := t0.Add(-time.Minute)
	old := signals.NewRecorder(signals.Config{})
	serve(old, c.t, signals.Default, 50, time.Millisecond, 0, 0)
	mustPush(t, src, body(t, old, "a", start, c.t))
	c.t = c.t.Add(time.Second)
	serve(old, c.t, signals.Default, 30, time.Millisecond, 0, 0) // 80 arrived, 80 completed
	mustPush(t, src, body(t, old, "a", start, c.t))

	// The process restarts; its first second: 100 arrivals, 60 of them
	// answered, 40 in flight.
	c.t = c.t.Add(time.Second)
	restarted := c.t.Add(-time.Second)
	fresh := signals.NewRecorder(signals.Config{})
	serve(fresh, c.t, signals.Default, 60, time.Millisecond, 0, 0)
	for range 40 {
		fresh.Arrive(signals.Default)
	}
	mustPush(t, src, body(t, fresh, "a", restarted, c.t))
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Equal(t, uint64(100), snap.Recent.Arrived, "the new run's arrivals are its increase (got the difference with the old run's)")
	assert.Equal(t, uint64(60), snap.Recent.Completed, "the new run's completions, not 60 − 80 wrapped around")
}

// TestPushRecentMixedIntervals: two instances pushing on different
// intervals — one every second at 100 req/s, one every 10 s at 10 req/s —
// are a fleet of 110 req/s; the snapshot's Recent over RecentSpan, which
// the model law reads as the period's arrival rate, should say so, as the
// window's ArrivalRate does.
func TestPushRecentMixedIntervals(t *testing.T) {
	c := &clock{t: t0}
	src := NewPushSource(PushConfig{Now: c.now, Window: 30 * time.Second})
	start := t0.Add(-time.Minute)
	a, b := signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})
	mustPush(t, src, body(t, a, "a", start, c.t))
	mustPush(t, src, body(t, b, "b", start, c.t))
	for i := 1; i <= 20; i++ {
		c.t = c.t.Add(time.Second)
		serve(a, c.t, signals.Default, 100, time.Millisecond, 0, 0)
		serve(b, c.t, signals.Default, 10, time.Millisecond, 0, 0)
		mustPush(t, src, body(t, a, "a", start, c.t))
		if i%10 == 0 {
			mustPush(t, src, body(t, b, "b", start, c.t))
		}
	}
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	rate, _ := snap.Get(signals.ArrivalRate)
	assert.InDelta(t, 110, rate, 1, "the window's rate")
	recent := float64(snap.Recent.Arrived) / snap.RecentSpan.Seconds()
	assert.InDelta(t, 110, recent, 5, "the latest period's rate: Recent %d over %v", snap.Recent.Arrived, snap.RecentSpan)
}

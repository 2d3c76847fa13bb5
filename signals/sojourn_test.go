package signals

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSojournStandingQueue(t *testing.T) {
	s := NewSojourn(SojournConfig{Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond})
	now := t0
	s.Stats(now)
	// A burst passes through: sojourn goes above target, then back below
	// within the interval. Not standing.
	s.Record(80*time.Millisecond, now)
	now = now.Add(40 * time.Millisecond)
	s.Record(10*time.Millisecond, now)
	st := s.Stats(now)
	assert.False(t, st.Standing, "a burst is not a standing queue")
	assert.True(t, st.AboveSince.IsZero(), "below target resets above-since")

	// Now every request waits 70 ms for 300 ms: standing after one interval.
	start := now.Add(10 * time.Millisecond)
	for now = start; now.Before(start.Add(300 * time.Millisecond)); now = now.Add(10 * time.Millisecond) {
		s.Record(70*time.Millisecond, now)
	}
	st = s.Stats(now)
	assert.True(t, st.Standing, "above target for 300 ms")
	assert.True(t, start.Equal(st.AboveSince), "above since %v, want %v", st.AboveSince, start)
	assert.True(t, st.MinOK)
	assert.Equal(t, 70*time.Millisecond, st.Min.Round(time.Millisecond), "min over the last interval")
	assert.Equal(t, uint64(32), st.Count)

	// The queue drains and nothing arrives: no longer standing, no minimum.
	st = s.Stats(now.Add(time.Second))
	assert.False(t, st.Standing, "an idle queue is not standing")
	assert.False(t, st.MinOK, "no samples in the last interval")
}

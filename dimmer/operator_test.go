package dimmer

import (
	"strings"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOperatorsPinFreezeShadow(t *testing.T) {
	r := newRig(t, testConfig())
	c, now := r.c, r.now
	st, err := c.PinAt(now, "reviews", 0.25, time.Minute, "provider incident INC-7")
	require.NoError(t, err)
	f, _ := st.Feature("reviews")
	assert.Equal(t, Override, f.Mode)
	assert.Equal(t, 0.25, f.Level)
	vip, _ := st.Level("reviews", "vip")
	assert.Equal(t, 0.25, vip, "a pin applies to every segment")
	assert.Contains(t, st.Reason, "INC-7")

	// The pin expires with its TTL.
	r.load = 10
	r.now = now.Add(60 * time.Second)
	st = r.step(0.1, -1)
	f, _ = st.Feature("reviews")
	assert.Equal(t, Auto, f.Mode)
	assert.Equal(t, 1.0, f.Level)

	for _, bad := range []struct {
		feature string
		level   float64
		ttl     time.Duration
		reason  string
		want    string
		is      error
	}{
		{"nope", 0.5, time.Minute, "x", `unknown feature "nope"`, ErrUnknownFeature},
		{"reviews", 1.5, time.Minute, "x", "want 0 ≤ level ≤ 1", ErrBadPin},
		{"reviews", 0.5, 0, "x", "ttl", ErrBadPin},
		{"reviews", 0.5, time.Minute, " ", "reason is required", ErrBadPin},
		{"reviews", 0.5, time.Minute, strings.Repeat("x", MaxReason+1), "the reason is 501 bytes long: at most 500", ErrBadPin},
	} {
		_, err := c.PinAt(now, bad.feature, bad.level, bad.ttl, bad.reason)
		assert.ErrorContains(t, err, bad.want)
		assert.ErrorIs(t, err, bad.is, "callers branch on it")
	}
	_, err = c.UnpinAt(now, "nope")
	assert.ErrorIs(t, err, ErrUnknownFeature)
	_, err = c.UnpinAt(now, "reviews")
	assert.ErrorIs(t, err, ErrNotPinned)

	st = c.FreezeAt(now, "sale starts")
	assert.Equal(t, Frozen, st.Mode)
	gen := st.Generation
	r.now = now.Add(69 * time.Second)
	st = r.step(5, -1)
	assert.Equal(t, 1.0, st.Features[0].Level, "frozen: overload changes nothing")
	assert.Equal(t, gen, st.Generation)
	r.now = now.Add(71 * time.Second)
	for range 8 { // ticks without any signal: the freeze and its reason stay
		st = r.silent()
	}
	assert.Equal(t, Frozen, st.Mode, "no signal does not undo the operator's freeze")
	assert.Contains(t, st.Reason, "sale starts")
	assert.Equal(t, gen, st.Generation, "no spurious change is published")
	st = c.UnfreezeAt(now)
	assert.Equal(t, Auto, st.Mode)

	st = c.SetShadowAt(now, true)
	assert.Equal(t, Shadow, st.Mode)
	assert.Contains(t, st.Reason, "shadow mode on")
	r.now = now.Add(80 * time.Second)
	st = r.dim(5)
	assert.Equal(t, Shadow, st.Mode)
	assert.Equal(t, 1.0, st.Features[0].Level, "shadow: nothing applied")
	assert.Less(t, st.Features[0].Computed, 1.0, "shadow: the computed level is reported")
	assert.Equal(t, 0.0, st.Shed)
}

// TestUnpinWhileStale: an override released (or expired) while the
// signals are stale gives the feature back to the law; the pin's level is
// not held with no end.
func TestUnpinWhileStale(t *testing.T) {
	r := newRig(t, Config{Tick: time.Second, Targets: []Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []Feature{{Name: "a"}, {Name: "b", Rank: 1}}})
	c := r.c
	r.load = -1
	r.now = t0.Add(-time.Second)
	r.step(0.2, -1)
	now := r.now
	_, err := c.PinAt(now, "b", 0.1, 2*time.Second, "incident")
	require.NoError(t, err)
	for range 5 { // no signals: stale
		now = now.Add(time.Second)
		c.Step(now, signals.Snapshot{})
	}
	st := c.State()
	require.Equal(t, Stale, st.StateMode())
	fs, _ := st.Feature("b")
	assert.Equal(t, 1.0, fs.Level, "the pin expired while stale: back to the law's level")
	_, err = c.PinAt(now, "a", 0.2, time.Hour, "again")
	require.NoError(t, err)
	st, err = c.UnpinAt(now, "a")
	require.NoError(t, err)
	fs, _ = st.Feature("a")
	assert.Equal(t, 1.0, fs.Level, "released while stale: back to the law's level")
	c.FreezeAt(now, "war room")
	_, err = c.PinAt(now, "a", 0.3, time.Hour, "while frozen")
	require.NoError(t, err)
	st, _ = c.UnpinAt(now, "a")
	fs, _ = st.Feature("a")
	assert.Equal(t, 1.0, fs.Level, "released while frozen: the held level, not the pin's")
}

// TestStateTimeNeverGoesBack: brownoutd's tick takes its now, an
// operator's unfreeze at a later now is published, and then the tick
// steps: its state, of a higher generation, keeps the later time — an app
// that orders the states it holds by time would take it for an older one.
func TestStateTimeNeverGoesBack(t *testing.T) {
	r := newRig(t, testConfig())
	c := r.c
	c.FreezeAt(r.now, "incident")
	tick := r.now.Add(time.Second)
	unfrozen := c.UnfreezeAt(tick.Add(time.Millisecond))
	st := c.Step(tick, snap(tick, 0.5, 100))
	assert.Greater(t, st.Generation, unfrozen.Generation)
	assert.False(t, st.Time.Before(unfrozen.Time), "the state's time went back: %v after %v", st.Time, unfrozen.Time)
}

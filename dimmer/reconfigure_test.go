package dimmer

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReconfigureKeepsTheLevels(t *testing.T) {
	r := newRig(t, testConfig())
	c := r.c
	ch, cancel := c.Subscribe()
	defer cancel()
	before := r.dim(1.6)
	require.Less(t, before.Features[0].Level, 1.0, "dimmed")

	cfg := testConfig()
	cfg.Hold, cfg.High, cfg.Low = 10*time.Second, 0.9, 0.6
	r.now = r.now.Add(3 * time.Second)
	require.NoError(t, c.ReconfigureAt(r.now, cfg))
	st := c.State()
	assert.Equal(t, before.Generation+1, st.Generation, "a reload publishes a state")
	assert.Same(t, st, <-ch, "and tells subscribers")
	assert.Equal(t, before.Brightness, st.Brightness, "the brightness stays")
	for i := range before.Features {
		assert.Equal(t, before.Features[i].Level, st.Features[i].Level, "%s: the level stays", before.Features[i].Name)
		assert.Equal(t, before.Features[i].Segments, st.Features[i].Segments)
	}
	assert.Contains(t, st.Reason, "configuration reloaded: 2 features, 2 targets, 0 scheduled caps")
	assert.Equal(t, 10*time.Second, c.Config().Hold)
	assert.Contains(t, c.Status().Reason, "configuration reloaded")

	// The law goes on from there under the new parameters: 0.85 is now
	// inside the band (0.6–0.9), so it holds.
	st = r.step(0.85, -1)
	assert.Equal(t, before.Brightness, st.Brightness)
	assert.Equal(t, Hold, st.Action)
}

func TestReconfigureFeaturesAndPins(t *testing.T) {
	three := testConfig()
	three.Features = append(three.Features, Feature{Name: "chat", Rank: 2})
	r := newRig(t, three)
	c, now := r.c, r.now
	_, err := c.PinAt(now, "chat", 0.3, time.Hour, "chat vendor down")
	require.NoError(t, err)
	_, err = c.PinAt(now, "reviews", 0.4, time.Hour, "reviews DB migration")
	require.NoError(t, err)

	var logs bytes.Buffer
	cfg := testConfig() // chat removed
	cfg.Features = append(cfg.Features, Feature{Name: "wishlist", Rank: 3})
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	require.NoError(t, c.ReconfigureAt(now, cfg))
	st := c.State()
	_, ok := st.Feature("chat")
	assert.False(t, ok)
	assert.Equal(t, 0.4, level(t, st, "reviews"), "the pin on a kept feature stays")
	assert.Equal(t, Override, mode(t, st, "reviews"))
	assert.Equal(t, 1.0, level(t, st, "wishlist"), "at full brightness a new feature starts at 1")
	assert.Contains(t, st.Reason, "pins dropped on removed features: chat")
	assert.Contains(t, logs.String(), "pin dropped, the feature was removed")
	assert.Contains(t, logs.String(), "feature=chat")
	assert.Contains(t, logs.String(), `reason="chat vendor down"`)
	_, err = c.UnpinAt(now, "chat")
	assert.Error(t, err, "the dropped pin is gone")
	_, err = c.PinAt(now, "chat", 0.3, time.Hour, "x")
	assert.ErrorContains(t, err, `unknown feature "chat"`)

	// Dimmed, a new feature gets the level its place in the ladder says.
	for range 10 {
		if st = r.step(3, -1); st.Brightness <= 0 {
			break
		}
	}
	require.LessOrEqual(t, st.Brightness, 0.0, "every feature at its floor")
	cfg.Features = append(cfg.Features, Feature{Name: "stories", Rank: 4})
	require.NoError(t, c.ReconfigureAt(r.now, cfg))
	assert.Equal(t, 0.0, level(t, c.State(), "stories"), "every feature at its floor: so is the new one")
}

func TestReconfigureRejectsABadConfig(t *testing.T) {
	r := newRig(t, capConfig())
	c := r.c
	r.script(2, 2)
	_, err := c.PinAt(t0.Add(3*time.Second), "reviews", 0.4, time.Hour, "db")
	require.NoError(t, err)
	st, cfg := c.State(), c.Config()

	for name, mutate := range map[string]func(*Config){
		"no targets":              func(c *Config) { c.Targets = nil },
		"unknown feature":         func(c *Config) { c.Schedule[0].Feature = "nope" },
		"want a positive":         func(c *Config) { c.Schedule[0].For = 0 },
		"no features":             func(c *Config) { c.Features = nil },
		"want 0 < low (0.9) < hi": func(c *Config) { c.Low, c.High = 0.9, 0.8 },
	} {
		bad := capConfig()
		mutate(&bad)
		err := c.ReconfigureAt(t0.Add(4*time.Second), bad)
		assert.Error(t, err, name)
		assert.Contains(t, err.Error(), "dimmer: ", name)
		assert.Same(t, st, c.State(), "%s: nothing published", name)
		assert.Equal(t, cfg, c.Config(), "%s: the configuration is unchanged", name)
	}
	why, pinned := c.State().PinReason(1)
	assert.True(t, pinned)
	assert.Equal(t, "db", why)
}

func TestReconfigureAddsASchedule(t *testing.T) {
	r := newRig(t, testConfig())
	c := r.c
	r.now = saleEve.Add(-11 * time.Second)
	r.steps(10, 0.1, -1) // quiet for longer than Hold
	require.NoError(t, c.ReconfigureAt(saleEve, capConfig()))
	st := c.State()
	assert.Equal(t, 0.2, level(t, st, "recommendations"), "the new schedule is evaluated at once")
	assert.Equal(t, Scheduled, mode(t, st, "recommendations"))
	assert.Contains(t, st.Reason, "1 scheduled caps")
	r.now = saleEve
	st = r.step(0.1, -1)
	assert.Equal(t, 0.2, level(t, st, "recommendations"))
	assert.InDelta(t, 0.6, st.Brightness, 1e-9, "the next step puts the integrator at the cap")

	// And a reload without it lifts the cap: the reload keeps the
	// brightness, the next step sets what the load allows (all on).
	require.NoError(t, c.ReconfigureAt(saleEve.Add(2*time.Second), testConfig()))
	assert.Equal(t, 0.2, level(t, c.State(), "recommendations"), "no jump at the reload: the brightness stays")
	r.now = saleEve.Add(2 * time.Second)
	st = r.step(0.1, -1)
	assert.InDelta(t, 1.0, st.Brightness, 1e-9, "then the levels the load allows")
}

func TestReconfigureWhileFrozenHoldsByName(t *testing.T) {
	r := newRig(t, testConfig())
	c := r.c
	r.dim(1.6)
	st := c.FreezeAt(r.now.Add(time.Second), "sale")
	rec, vip := level(t, st, "recommendations"), st.Features[0].Segments[0]
	require.Less(t, rec, 1.0)

	cfg := testConfig()
	cfg.Features = []Feature{{Name: "chat", Rank: -1}, cfg.Features[1]} // chat first in the ladder
	cfg.Segments = []Segment{{Name: "checkout", Offset: 0.5}, {Name: "vip", Offset: 0.3}}
	require.NoError(t, c.ReconfigureAt(r.now.Add(2*time.Second), cfg))
	st = c.State()
	assert.Equal(t, Frozen, st.Mode)
	assert.Equal(t, rec, level(t, st, "recommendations"), "frozen: the published level is held")
	got, _ := st.Level("recommendations", "vip")
	assert.Equal(t, vip, got, "matched by segment name")
	got, _ = st.Level("recommendations", "checkout")
	assert.Equal(t, rec, got, "a new segment holds what its users got before")
	assert.Contains(t, st.Reason, "configuration reloaded")
	assert.Contains(t, c.Status().Reason, "frozen by operator: sale")
	assert.False(t, st.Tampered())
}

// Reconfigure, Step, the operator methods and the readers run at once;
// go test -race checks the locking.
func TestReconfigureConcurrently(t *testing.T) {
	a := testConfig()
	b := testConfig()
	b.Features = append(b.Features, Feature{Name: "chat", Rank: 2})
	b.Segments = nil
	b.Schedule = []Cap{{Max: 0.5, From: t0, For: time.Hour, Reason: "drill"}}
	c, _ := New(a)
	ch, cancel := c.Subscribe()
	defer cancel()
	const n = 200
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			now := t0.Add(time.Duration(i) * time.Second)
			c.Step(now, snap(now, float64(i%7)/3, 100))
		}
	})
	wg.Go(func() {
		for i := range n {
			cfg := a
			if i%2 == 1 {
				cfg = b
			}
			assert.NoError(t, c.ReconfigureAt(t0.Add(time.Duration(i)*time.Second), cfg))
		}
	})
	wg.Go(func() {
		for i := range n {
			now := t0.Add(time.Duration(i) * time.Second)
			_, _ = c.PinAt(now, "chat", 0.5, time.Minute, "drill") // chat comes and goes
			_, _ = c.UnpinAt(now, "chat")
			c.SetShadowAt(now, i%3 == 0)
		}
	})
	wg.Go(func() {
		var last uint64
		for range n {
			st := c.State()
			assert.GreaterOrEqual(t, st.Seq(), last)
			last = st.Seq()
			for i := range st.NumFeatures() {
				_ = st.LevelAt(i, -1)
				_ = st.FeatureMode(i)
			}
			_ = c.Status()
			_ = c.Config()
			_ = c.ShedLevel()
			select {
			case <-ch:
			default:
			}
		}
	})
	wg.Wait()
	assert.False(t, c.State().Tampered())
}

func TestRunFollowsAReconfiguredTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New(testConfig())
		src := &fakeSource{p99: 0.1}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx, src) }()
		time.Sleep(2500 * time.Millisecond) // virtual time: steps at 1 s and 2 s
		synctest.Wait()
		cfg := testConfig()
		cfg.Tick = 5 * time.Second
		require.NoError(t, c.Reconfigure(cfg))
		time.Sleep(11 * time.Second) // the step at 3 s picks up the new tick; then 8 s and 13 s
		synctest.Wait()
		assert.Equal(t, 5, src.calls, "steps at 1, 2, 3, 8 and 13 s")
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

// Reconfigure to a longer Tick restarts the runs the law counts in
// periods: 8 s of a run over High at 100 ms (80 periods) must not become
// 80 s' worth at 1 s.
func TestReconfigureTickKeepsRunsInPeriods(t *testing.T) {
	cfg := refusalsConfig()
	cfg.Tick = 100 * time.Millisecond
	r := newLabRig(t, cfg)
	for range 80 {
		r.step(1.6, 0)
	}
	require.Positive(t, r.c.mu.mdl.overRun)
	cfg.Tick = time.Second
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	assert.Zero(t, r.c.mu.mdl.overRun, "the run over High starts afresh")
	assert.Zero(t, r.c.mu.mdl.standRun, "and the standing queue's")
	assert.Zero(t, r.c.mu.mdl.overSum, "and the change detector's sums")
}

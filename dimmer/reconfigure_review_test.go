package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReviewReconfigureModelState: reloads of every kind in a dimmed
// model law — Tick, features added, removed, re-ranked, segments,
// probe, quantum — never panic nor leave a NaN or a level out of range.
func TestReviewReconfigureModelState(t *testing.T) {
	r := newModelRig(t)
	r.periods(60, 400)
	st := r.c.State()
	t.Logf("dimmed: brightness %.3f K %.4g", st.Brightness, r.c.mu.mdl.capacity.k)
	check := func(what string, n int, lam float64) {
		t.Helper()
		for range n {
			st := r.period(lam)
			require.False(t, math.IsNaN(st.Brightness), what)
			for i := range st.NumFeatures() {
				for j := -1; j < st.NumSegments(); j++ {
					l := st.LevelAt(i, j)
					require.True(t, l >= 0 && l <= 1, "%s: %s %v", what, st.FeatureName(i), l)
				}
			}
			m := &r.c.mu.mdl
			for _, v := range append(append([]float64{m.capacity.k, m.scale, m.w0, m.mean}, m.cost...), m.reach...) {
				require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s: a NaN in the model", what)
			}
		}
		st := r.c.State()
		t.Logf("%s: brightness %.3f K %.4g reason %q", what, st.Brightness, r.c.mu.mdl.capacity.k, st.Reason)
	}
	edits := []struct {
		name string
		edit func(*Config)
	}{
		{"tick 250ms", func(c *Config) { c.Tick = 250 * time.Millisecond }},
		{"tick 2s", func(c *Config) { c.Tick = 2 * time.Second }},
		{"a feature added first", func(c *Config) {
			c.Features = append([]Feature{{Name: "gallery", Rank: -1, Cost: 0.3}}, c.Features...)
		}},
		{"re-ranked", func(c *Config) {
			for i := range c.Features {
				c.Features[i].Rank = -c.Features[i].Rank
			}
		}},
		{"recommendations removed", func(c *Config) {
			var fs []Feature
			for _, f := range c.Features {
				if f.Name != "recommendations" {
					fs = append(fs, f)
				}
			}
			c.Features = fs
		}},
		{"segments", func(c *Config) { c.Segments = []Segment{{Name: "vip", Offset: 0.3}, {Name: "bot", Offset: -0.5}} }},
		{"probe off", func(c *Config) { c.Probe = -1 }},
		{"probe 0.2 quantum 0.1", func(c *Config) { c.Probe, c.Quantum = 0.2, 0.1 }},
		{"back to two", func(c *Config) {
			c.Features = []Feature{{Name: "recommendations", Rank: 0, Cost: 1.5}, {Name: "reviews", Rank: 1, Cost: 0.5}}
			c.Segments = nil
		}},
		{"targets swapped", func(c *Config) { c.Targets = c.Targets[1:] }},
	}
	for _, e := range edits {
		cfg := r.c.Config()
		e.edit(&cfg)
		require.NoError(t, r.c.ReconfigureAt(r.now, cfg), e.name)
		check(e.name, 30, 400)
	}
}

package dimmer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLadderOrderAndDimming(t *testing.T) {
	r := newRig(t, testConfig())
	assert.Equal(t, "recommendations", r.c.Config().Features[0].Name, "rank 0 dims first")

	// A little over target at full brightness: the first dim takes
	// recommendations, the first in the ladder, and reviews wait until
	// they are off.
	first := r.dim(1.05)
	rec, _ := first.Feature("recommendations")
	rev, _ := first.Feature("reviews")
	require.Greater(t, first.Brightness, 0.5, "a little over target: recommendations' stretch")
	assert.InDelta(t, 2*first.Brightness-1, rec.Level, 0.01, "recommendations dim: their place in the ladder")
	assert.Equal(t, 1.0, rev.Level, "reviews wait until recommendations are off")
	assert.Contains(t, first.Reason, "latency.p99 1.05s > 1s target: ")
	assert.Contains(t, first.Reason, "dimming recommendations")

	// Far over target: down to the floors, the features in the ladder's
	// order at every step.
	var last *State
	for range 10 {
		last = r.step(3, -1)
		rec, _ = last.Feature("recommendations")
		rev, _ = last.Feature("reviews")
		require.True(t, rev.Level == 1 || rec.Level == 0, "reviews dim only once recommendations are off: %v, %v", rec.Level, rev.Level)
		if last.Brightness <= 0 {
			break
		}
	}
	require.Equal(t, 0.0, last.Brightness, "at the floors, not yet shedding")
	assert.Equal(t, 0.0, rec.Level)
	assert.Equal(t, 0.0, rev.Level, "far over target: both off")
	vip, _ := last.Level("reviews", "vip")
	assert.InDelta(t, 0.6, vip, 1e-9, "VIPs (offset +0.3) keep reviews longer")
}

func TestQuantizedChangesAndSubscribers(t *testing.T) {
	r := newRig(t, testConfig())
	ch, cancel := r.c.Subscribe()
	defer cancel()
	sts := r.script(1.6, 1.6, 1.6, 1.6)
	var gens []uint64
	for _, st := range sts {
		gens = append(gens, st.Generation)
		for _, f := range st.Features {
			assert.InDelta(t, f.Level, float64(int(f.Level*100+0.5))/100, 1e-12, "levels are quantized to 1 %%")
		}
	}
	for i := 1; i < len(gens); i++ {
		assert.GreaterOrEqual(t, gens[i], gens[i-1])
	}
	// The subscriber holds only the newest state; it never blocked Step.
	got := <-ch
	assert.Equal(t, sts[len(sts)-1].Generation, got.Generation)
	select {
	case st := <-ch:
		t.Fatalf("a second state queued: generation %d", st.Generation)
	default:
	}
	// From dimming to holding in the band is a change of action: it is
	// published. Then a step that changes nothing a reader acts on — not
	// the action, not its cause, not a level — publishes nothing, though
	// the numbers in its reason differ.
	r.now = r.now.Add(10 * time.Second)
	// alike: nothing a reader acts on differs between a and b.
	alike := func(a, b *State) bool {
		return a.Action == b.Action && a.Cause == b.Cause && slices.EqualFunc(a.Features, b.Features,
			func(x, y FeatureState) bool { return x.Level == y.Level && slices.Equal(x.Segments, y.Segments) })
	}
	prev, unchanged := r.c.State(), 0
	for i := range 20 {
		p := 0.78
		if i%2 == 1 {
			p = 0.8
		}
		st := r.step(p, -1) // in the band
		if alike(st, prev) {
			require.Same(t, prev, st, "step %d: nothing a reader acts on changed: nothing published", i)
			unchanged++
		} else {
			require.Greater(t, st.Generation, prev.Generation, "step %d: a change is published", i)
		}
		cur := r.c.Status() // this tick's account: what a publication now would say
		require.True(t, alike(cur, st), "step %d: a change a reader acts on is published in its own period: published %v, now %v", i, st.Action, cur.Action)
		prev = st
	}
	assert.Equal(t, Hold, prev.Action, "in the band: the law holds")
	assert.Greater(t, unchanged, 10, "most steps in the band change nothing")
	assert.Contains(t, r.c.Status().Reason, "800ms", "Status has this tick's readings")
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]func(*Config){
		"no targets":        func(c *Config) { c.Targets = nil },
		"no features":       func(c *Config) { c.Features = nil },
		"declared twice":    func(c *Config) { c.Features = append(c.Features, Feature{Name: "reviews"}) },
		"floor":             func(c *Config) { c.Features[0].Floor = 1 },
		"want 0 < low":      func(c *Config) { c.Low, c.High = 0.9, 0.8 },
		"under 100ms":       func(c *Config) { c.Tick = time.Millisecond },
		"want a positive":   func(c *Config) { c.Targets[0].Target = -1 },
		"cascade at":        func(c *Config) { c.CascadeAt = 0.5 },
		"unique name":       func(c *Config) { c.Segments = append(c.Segments, Segment{Name: "vip"}) },
		"unknown signal 99": func(c *Config) { c.Targets[0].Signal = 99 },
		"setpoint 3":        func(c *Config) { c.Setpoint = 3 },
		"stale after -1":    func(c *Config) { c.StaleAfter = -1 },
		"1001 features: at most 1000": func(c *Config) {
			c.Features = benchConfig(MaxFeatures + 1).Features
		},
		"33 segments: at most 32": func(c *Config) {
			c.Segments = nil
			for i := range MaxSegments + 1 {
				c.Segments = append(c.Segments, Segment{Name: fmt.Sprint("s", i)})
			}
		},
		"feature 0: name \"xxxxxxxxxxxxxxxxxxxx\"… is 65 bytes long: at most 64": func(c *Config) {
			c.Features[0].Name = strings.Repeat("x", MaxName+1)
		},
		"feature 1: name \"re\\nviews\" contains a control character": func(c *Config) { c.Features[1].Name = "re\nviews" },
		"feature 1: name \"\\xff\" is not valid UTF-8":                func(c *Config) { c.Features[1].Name = "\xff" },
		"segment 0: name \"vip\\x00\" contains a control character":   func(c *Config) { c.Segments[0].Name = "vip\x00" },
	}
	for want, mutate := range cases {
		cfg := testConfig()
		mutate(&cfg)
		_, err := New(cfg)
		assert.ErrorContains(t, err, want)
	}
}

func TestRunStepsEveryTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New(testConfig())
		src := &fakeSource{p99: 3}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx, src) }()
		time.Sleep(3500 * time.Millisecond) // virtual time
		synctest.Wait()
		assert.Equal(t, 3, src.calls)
		assert.Less(t, c.State().Brightness, 1.0)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

type fakeSource struct {
	p99   float64
	calls int
}

func (f *fakeSource) Snapshot(_ context.Context, now time.Time) (signals.Snapshot, error) {
	f.calls++
	return snap(now, f.p99, 100), nil
}

func benchConfig(n int) Config {
	cfg := Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 1}}}
	for i := range n {
		cfg.Features = append(cfg.Features, Feature{Name: fmt.Sprintf("feature-%d", i), Rank: i})
	}
	return cfg
}

// BenchmarkStep measures a steady-state step (the decision does not
// change), 10 features.
func BenchmarkStep(b *testing.B) {
	c, _ := New(benchConfig(10))
	now := t0
	s := snap(now, 0.78, 100) // in the band
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		s.Time = now
		c.Step(now, s)
	}
}

// BenchmarkStepDimmed measures a steady step of a dimmed controller: the
// law's path (the load's tracker, the costs, K's feedback) without a
// publish.
func BenchmarkStepDimmed(b *testing.B) {
	c, _ := New(benchConfig(10))
	now := t0
	for range 3 {
		now = now.Add(time.Second)
		c.Step(now, snap(now, 3, 100))
	}
	s := snap(now, 0.8, 100) // in the band: the account holds
	s.Window = 5 * time.Second
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		s.Time = now
		c.Step(now, s)
	}
}

// BenchmarkStepChanging measures steps that publish a new state each time.
func BenchmarkStepChanging(b *testing.B) {
	c, _ := New(benchConfig(10))
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Second)
		p := 3.0
		if i%200 >= 100 {
			p = 0.1
		}
		c.Step(now, snap(now, p, float64(100+i%200)))
	}
}

func BenchmarkStateRead(b *testing.B) {
	c, _ := New(benchConfig(10))
	b.ReportAllocs()
	var sink *State
	for b.Loop() {
		sink = c.State()
	}
	_ = sink
}

func TestReasonReadsWell(t *testing.T) {
	r := newRig(t, Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 1}}, Features: []Feature{{Name: "recommendations"}}})
	st := r.dim(1.6)
	want := `^latency\.p99 1\.6s > 1s target: load [0-9.]+/s, [^:]+: dimming recommendations$`
	assert.Regexp(t, want, st.Reason)
	assert.False(t, strings.Contains(st.Reason, "%!"))
}

// A state is published when the action or its cause changes, never for
// the numbers in the reason alone.
func TestPublishOnActionOrCause(t *testing.T) {
	cfg := testConfig()
	cfg.Targets = append(cfg.Targets, Target{Signal: signals.RejectRatio, Target: 0.05, DimOnly: true})
	r := newRig(t, cfg)
	first := r.step(0.78, 0) // in the band: hold, latency
	for _, p := range []float64{0.79, 0.8, 0.81, 0.77} {
		assert.Same(t, first, r.step(p, 0), "hold on latency with other numbers: nothing new")
	}
	byRefusals := r.step(0.5, 0.04) // in the band on refusals: same action, other cause
	assert.Equal(t, first.Generation+1, byRefusals.Generation)
	assert.Equal(t, signals.RejectRatio, byRefusals.Cause)
	assert.Equal(t, Hold, byRefusals.Action)
}

func TestConfigAndStateCannotBeChangedFromOutside(t *testing.T) {
	in := testConfig()
	r := newRig(t, in)
	c := r.c
	in.Features[0].Cost, in.Targets[0].Target, in.Segments[0].Offset = 99, 99, 0.9
	got := c.Config()
	got.Features[0].Cost, got.Targets[0].Target, got.Segments[0].Name = 42, 42, "x"
	cfg := c.Config()
	assert.Equal(t, 1.0, cfg.Features[0].Cost, "neither New's argument nor Config's result is shared")
	assert.Equal(t, 1.0, cfg.Targets[0].Target)
	assert.Equal(t, "vip", cfg.Segments[0].Name)
	assert.Equal(t, 0.3, cfg.Segments[0].Offset)

	r.script(2, 2, 2) // dimmed
	_, err := c.PinAt(r.now, "reviews", 0.4, time.Hour, "db migration")
	require.NoError(t, err)
	c.FreezeAt(r.now, "sale")
	r.load = -1
	st := r.step(2, -1) // the first frozen tick
	require.False(t, st.Tampered())
	gen, recs, vip := st.Generation, st.Features[0].Level, st.Features[0].Segments[0]
	i, _ := st.FeatureIndex("reviews")

	// Change every exported field a reader might touch.
	st.Generation, st.Mode, st.Shed, st.Reason = 0, Auto, 2, "changed"
	for k := range st.Features {
		f := &st.Features[k]
		f.Name, f.Level, f.Computed, f.Mode = "x", 0.123, 0.123, Shadow
		f.Segments[0] = 0.456
		if f.Pin != nil {
			f.Pin.Reason, f.Pin.Level = "<script>", 1
		}
	}
	assert.True(t, st.Tampered())
	assert.Equal(t, gen, st.Seq())
	assert.Equal(t, Frozen, st.StateMode())
	assert.Equal(t, 0.0, c.ShedLevel())
	lv, ok := c.State().Level("recommendations", "")
	assert.True(t, ok)
	assert.Equal(t, recs, lv, "Level reads the state's own copy")
	lv, _ = c.State().Level("recommendations", "vip")
	assert.Equal(t, vip, lv)
	why, pinned := st.PinReason(i)
	assert.True(t, pinned)
	assert.Equal(t, "db migration", why)
	assert.Equal(t, Override, st.FeatureMode(i))
	assert.Equal(t, 0.4, st.LevelAt(i, -1))

	// Frozen holds what was published, not what a caller wrote; and the
	// next steps publish nothing new.
	for range 4 {
		next := r.step(2, -1)
		assert.Same(t, st, next, "a changed field is not a change: nothing new is published")
		assert.Equal(t, gen, next.Seq())
	}
	st = c.UnfreezeAt(r.now.Add(time.Second))
	assert.Equal(t, recs, st.Features[0].Level, "unfrozen from the published levels")
	assert.False(t, st.Tampered())
}

// BenchmarkStepMaxFeatures measures a changing step at the largest ladder
// a configuration may declare (MaxFeatures): every feature's level is
// recomputed from its stretch of the scale.
func BenchmarkStepMaxFeatures(b *testing.B) {
	c, _ := New(benchConfig(MaxFeatures))
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Second)
		p := 3.0
		if i%200 >= 100 {
			p = 0.1
		}
		c.Step(now, snap(now, p, float64(100+i%200)))
	}
}

// Calm at full brightness before Hold has passed is "full brightness", not
// "within the band".
func TestCalmAtFullBrightnessSaysSo(t *testing.T) {
	r := newRig(t, refusalsConfig())
	r.window = 5 * time.Second
	r.step(0.3, -1)
	assert.Contains(t, r.c.Status().Reason, "full brightness")
	assert.NotContains(t, r.c.Status().Reason, "within")
}

// TestQuantizedLevelsReadAsDecimals: with a quantum of 1/n a published
// level is the decimal it stands for — 0.57, not 57 × 0.01 =
// 0.5700000000000001 — in /v1/state, OFREP and the state file; −0 is 0.
// A quantum that is no 1/n rounds to its multiples.
func TestQuantizedLevelsReadAsDecimals(t *testing.T) {
	for _, q := range []float64{0.01, 0.05, 0.1, 0.25} {
		c, err := New(Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: []Feature{{Name: "a"}}, Quantum: q})
		require.NoError(t, err)
		n := int(math.Round(1 / q))
		for k := range n + 1 {
			want := float64(k) / float64(n)
			got := c.quantize(want + q/4)
			assert.Equal(t, strconv.FormatFloat(want, 'g', -1, 64), strconv.FormatFloat(got, 'g', -1, 64), "quantum %v, %d/%d", q, k, n)
		}
	}
	c, err := New(Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: []Feature{{Name: "a"}}, Quantum: 0.03})
	require.NoError(t, err)
	assert.InDelta(t, 0.57, c.quantize(0.575), 1e-12)
	assert.Equal(t, "0", strconv.FormatFloat(c.quantize(-0.001), 'g', -1, 64), "−0 reads 0")
}

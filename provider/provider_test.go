package provider

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/open-feature/go-sdk/openfeature/memprovider"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

func newController(t testing.TB) *dimmer.Controller {
	c, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Segments: []dimmer.Segment{{Name: "vip", Offset: 0.5}},
	})
	require.NoError(t, err)
	return c
}

// dimTo steps c once at now with a latency p99 (seconds) and a load of
// 100 requests a second.
func dimTo(c *dimmer.Controller, now time.Time, p99 float64) *dimmer.State {
	var s signals.Snapshot
	s.Time = now
	s.Set(signals.LatencyP99, p99)
	s.Set(signals.ArrivalRate, 100)
	return c.Step(now, s)
}

// dimmed steps c a second at a time from now, at a latency a little over
// its target, until recommendations sits at a fractional level (they dim
// first: brightness 0.5..1 is their stretch), and returns that state and
// the instant of its step. The tests here are the provider's, not the
// law's: how many periods a law takes to dim is not theirs to say.
func dimmed(t testing.TB, c *dimmer.Controller, now time.Time) (*dimmer.State, time.Time) {
	t.Helper()
	for i := range 30 {
		at := now.Add(time.Duration(i) * time.Second)
		if st := dimTo(c, at, 1.05); st.Features[0].Level > 0 && st.Features[0].Level < 1 {
			return st, at
		}
	}
	t.Fatal("recommendations did not dim to a fractional level in 30 periods")
	return nil, now
}

func fc(key string, attrs ...string) openfeature.FlattenedContext {
	m := openfeature.FlattenedContext{}
	if key != "" {
		m[openfeature.TargetingKey] = key
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		m[attrs[i]] = attrs[i+1]
	}
	return m
}

func TestBooleanStickyAndLevel(t *testing.T) {
	c := newController(t)
	p, err := New(c, Options{})
	require.NoError(t, err)
	ctx := context.Background()

	r := p.BooleanEvaluation(ctx, "recommendations", false, fc("user-1"))
	assert.True(t, r.Value, "full brightness: everyone gets it")
	assert.Equal(t, openfeature.SplitReason, r.Reason)
	assert.Equal(t, "on", r.Variant)
	assert.Equal(t, 1.0, r.FlagMetadata["level"])
	assert.Equal(t, "auto", r.FlagMetadata["mode"])
	assert.Equal(t, true, r.FlagMetadata["sticky"])

	st, _ := dimmed(t, c, t0.Add(time.Second))
	lvl := st.Features[0].Level
	on := 0
	for i := range 10000 {
		key := "user-" + strconv.Itoa(i)
		got := p.BooleanEvaluation(ctx, "recommendations", false, fc(key))
		again := p.BooleanEvaluation(ctx, "recommendations", false, fc(key))
		assert.Equal(t, got.Value, again.Value, "sticky per targeting key")
		assert.Equal(t, On("recommendations", key, lvl), got.Value, "the flagd-compatible bucket")
		if got.Value {
			on++
		}
	}
	assert.InDelta(t, lvl, float64(on)/10000, 0.015)

	f := p.FloatEvaluation(ctx, "recommendations.level", -1, fc("user-1"))
	assert.Equal(t, lvl, f.Value)
	assert.Equal(t, openfeature.TargetingMatchReason, f.Reason)
	assert.Equal(t, int64(st.Generation), f.FlagMetadata["generation"])
	assert.Contains(t, f.FlagMetadata["reason"], "dimming recommendations")

	vip := p.FloatEvaluation(ctx, "recommendations.level", -1, fc("user-1", "segment", "vip"))
	assert.Greater(t, vip.Value, lvl, "VIPs keep the feature longer")
	assert.Equal(t, "vip", vip.FlagMetadata["segment"])
}

func TestErrorsAndMissingKey(t *testing.T) {
	c := newController(t)
	p, _ := New(c, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		res  openfeature.ProviderResolutionDetail
		code openfeature.ErrorCode
	}{
		{"unknown bool", p.BooleanEvaluation(ctx, "nope", true, fc("u")).ProviderResolutionDetail, openfeature.FlagNotFoundCode},
		{"unknown float", p.FloatEvaluation(ctx, "nope.level", 0.5, fc("u")).ProviderResolutionDetail, openfeature.FlagNotFoundCode},
		{"level as bool", p.BooleanEvaluation(ctx, "reviews.level", true, fc("u")).ProviderResolutionDetail, openfeature.TypeMismatchCode},
		{"bool as float", p.FloatEvaluation(ctx, "reviews", 0.5, fc("u")).ProviderResolutionDetail, openfeature.TypeMismatchCode},
		{"string", p.StringEvaluation(ctx, "reviews", "x", fc("u")).ProviderResolutionDetail, openfeature.TypeMismatchCode},
		{"int", p.IntEvaluation(ctx, "reviews", 1, fc("u")).ProviderResolutionDetail, openfeature.TypeMismatchCode},
		{"object", p.ObjectEvaluation(ctx, "nope", nil, fc("u")).ProviderResolutionDetail, openfeature.FlagNotFoundCode},
		{"bool as object", p.ObjectEvaluation(ctx, "reviews", nil, fc("u")).ProviderResolutionDetail, openfeature.TypeMismatchCode},
		{"features as bool", p.BooleanEvaluation(ctx, FeaturesFlag, true, fc("u")).ProviderResolutionDetail, openfeature.TypeMismatchCode},
	} {
		assert.Equal(t, tc.code, tc.res.ResolutionDetail().ErrorCode, tc.name)
		assert.Equal(t, openfeature.ErrorReason, tc.res.Reason, tc.name)
	}
	assert.Equal(t, true, p.BooleanEvaluation(ctx, "nope", true, fc("u")).Value, "the default comes back")

	// No targeting key: a random draw, marked not sticky.
	dimmed(t, c, t0.Add(time.Second))
	r := p.BooleanEvaluation(ctx, "recommendations", false, fc(""))
	assert.Equal(t, openfeature.SplitReason, r.Reason)
	assert.Equal(t, false, r.FlagMetadata["sticky"])

	strict, _ := New(c, Options{RequireTargetingKey: true})
	r = strict.BooleanEvaluation(ctx, "recommendations", false, fc(""))
	assert.Equal(t, openfeature.TargetingKeyMissingCode, r.ResolutionDetail().ErrorCode)
	o := strict.ObjectEvaluation(ctx, FeaturesFlag, "def", fc(""))
	assert.Equal(t, openfeature.TargetingKeyMissingCode, o.ResolutionDetail().ErrorCode)
	assert.Equal(t, "def", o.Value)
}

// TestFeaturesFlag: the object flag gives each user the answers of the
// boolean flags, segment included, counts like them, and reaches apps
// through the SDK as a map.
func TestFeaturesFlag(t *testing.T) {
	c := newController(t)
	p, err := New(c, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	dimmed(t, c, t0.Add(time.Second))
	before := p.Evaluations()
	for i := range 2000 {
		for _, attrs := range [][]string{nil, {"segment", "vip"}} {
			key := "user-" + strconv.Itoa(i)
			all := p.ObjectEvaluation(ctx, FeaturesFlag, nil, fc(key, attrs...))
			require.NoError(t, all.Error())
			m, ok := all.Value.(map[string]any)
			require.True(t, ok, "%T", all.Value)
			require.Len(t, m, 2)
			for _, name := range []string{"recommendations", "reviews"} {
				assert.Equal(t, p.BooleanEvaluation(ctx, name, !m[name].(bool), fc(key, attrs...)).Value, m[name], "%s %s %v", name, key, attrs)
			}
		}
	}
	after := p.Evaluations()
	for _, name := range []string{"recommendations", "reviews"} {
		n := after[name]["on"] + after[name]["off"] - before[name]["on"] - before[name]["off"]
		assert.Equal(t, uint64(8000), n, "%s: 4000 object and 4000 boolean answers counted", name)
	}

	api := isolated.NewAPI()
	require.NoError(t, api.SetProviderAndWait(ctx, p))
	defer api.Shutdown(ctx)
	d, err := api.NewClient().ObjectValueDetails(ctx, FeaturesFlag, nil, openfeature.NewEvaluationContext("user-7", nil))
	require.NoError(t, err)
	assert.Equal(t, openfeature.SplitReason, d.Reason)
	assert.Equal(t, true, d.FlagMetadata["sticky"])
	assert.Contains(t, d.Value, "recommendations")
}

func TestOverrideModeAndMetrics(t *testing.T) {
	c := newController(t)
	reg := prometheus.NewPedanticRegistry()
	p, err := New(c, Options{Registerer: reg})
	require.NoError(t, err)
	_, err = c.PinAt(t0, "reviews", 0, time.Hour, "provider down")
	require.NoError(t, err)
	r := p.BooleanEvaluation(context.Background(), "reviews", true, fc("u"))
	assert.False(t, r.Value)
	assert.Equal(t, "override", r.FlagMetadata["mode"])
	assert.Equal(t, "provider down", r.FlagMetadata["reason"])
	p.BooleanEvaluation(context.Background(), "recommendations", false, fc("u"))
	p.FloatEvaluation(context.Background(), "recommendations.level", 0, fc("u"))
	n, err := testutil.GatherAndCount(reg, "brownout_flag_evaluations_total")
	require.NoError(t, err)
	assert.Equal(t, 6, n, "two features × (on, off, level)")
	assert.Equal(t, uint64(1), p.Evaluations()["reviews"]["off"])
	assert.Equal(t, uint64(1), p.Evaluations()["recommendations.level"]["level"])
}

func TestScheduledMode(t *testing.T) {
	c, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Schedule: []dimmer.Cap{{Feature: "recommendations", Max: 0.5, From: t0, For: time.Minute, Reason: "11.11 midnight: pre-dim"}},
	})
	require.NoError(t, err)
	p, err := New(c, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	dimTo(c, t0.Add(-time.Second), 0.1)
	r := p.FloatEvaluation(ctx, "recommendations.level", 0, fc("u"))
	assert.Equal(t, 1.0, r.Value)
	assert.Equal(t, "auto", r.FlagMetadata["mode"])

	st := dimTo(c, t0, 0.1) // the window opens
	r = p.FloatEvaluation(ctx, "recommendations.level", 0, fc("u"))
	assert.Equal(t, 0.5, r.Value)
	assert.Equal(t, "scheduled", r.FlagMetadata["mode"])
	assert.Equal(t, "11.11 midnight: pre-dim", r.FlagMetadata["reason"])
	assert.Equal(t, int64(st.Generation), r.FlagMetadata["generation"])
	b := p.BooleanEvaluation(ctx, "recommendations", false, fc("u"))
	assert.Equal(t, "scheduled", b.FlagMetadata["mode"])
	rv := p.BooleanEvaluation(ctx, "reviews", false, fc("u"))
	assert.Equal(t, "auto", rv.FlagMetadata["mode"], "only the capped feature")

	dimTo(c, t0.Add(time.Minute), 0.1) // closed
	r = p.FloatEvaluation(ctx, "recommendations.level", 0, fc("u"))
	assert.Equal(t, "auto", r.FlagMetadata["mode"])
	assert.Contains(t, r.FlagMetadata["reason"], "scheduled cap ended (11.11 midnight: pre-dim)")
}

func TestEventsChangesStaleAndShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newController(t)
		p, _ := New(c, Options{})
		first, second := p.EventChannel(), p.EventChannel()
		require.True(t, first == second, "one channel")
		require.NoError(t, p.Init(openfeature.EvaluationContext{}))

		_, at := dimmed(t, c, t0.Add(time.Second))
		ev := <-p.EventChannel()
		assert.Equal(t, openfeature.ProviderConfigChange, ev.EventType)
		assert.ElementsMatch(t, []string{"recommendations", "recommendations.level"}, ev.FlagChanges)
		synctest.Wait() // the follower has sent what this dim published
		for len(p.EventChannel()) > 0 {
			<-p.EventChannel() // (a law may publish more than one state on its way)
		}

		// Many changes while nobody reads: the controller never blocks.
		for i := 1; i < 40; i++ {
			dimTo(c, at.Add(time.Duration(i)*time.Second), 3)
		}
		at = at.Add(40 * time.Second)
		synctest.Wait()

		// Signals go stale (3 periods without a snapshot), then return.
		var empty signals.Snapshot
		for i := range 5 {
			c.Step(at.Add(time.Duration(i)*time.Second), empty)
		}
		var kinds []openfeature.EventType
		for {
			synctest.Wait()
			select {
			case ev := <-p.EventChannel():
				kinds = append(kinds, ev.EventType)
				continue
			default:
			}
			break
		}
		assert.Contains(t, kinds, openfeature.ProviderStale)
		dimTo(c, at.Add(10*time.Second), 0.8)
		ev = <-p.EventChannel()
		for ev.EventType != openfeature.ProviderReady {
			ev = <-p.EventChannel()
		}
		p.Shutdown() // the follower exits; synctest fails on a leak
		p.Shutdown()
	})
}

func TestThroughTheSDK(t *testing.T) {
	c := newController(t)
	p, _ := New(c, Options{})
	api := isolated.NewAPI()
	require.NoError(t, api.SetProviderAndWait(context.Background(), p))
	defer api.Shutdown(context.Background())
	client := api.NewClient()

	var mu sync.Mutex
	var changed []string
	cb := func(d openfeature.EventDetails) {
		mu.Lock()
		changed = append(changed, d.FlagChanges...)
		mu.Unlock()
	}
	client.AddHandler(openfeature.ProviderConfigChange, &cb)

	ec := openfeature.NewEvaluationContext("user-42", map[string]any{"segment": "vip"})
	on, err := client.BooleanValue(context.Background(), "recommendations", false, ec)
	require.NoError(t, err)
	assert.True(t, on)
	d, err := client.BooleanValueDetails(context.Background(), "recommendations", false, ec)
	require.NoError(t, err)
	assert.Equal(t, openfeature.SplitReason, d.Reason)
	lvl, err := d.FlagMetadata.GetFloat("level")
	require.NoError(t, err)
	assert.Equal(t, 1.0, lvl)

	for i := 1; i <= 4; i++ { // latency 3× target: 0.2 a period, to 0.2
		dimTo(c, t0.Add(time.Duration(i)*time.Second), 3)
	}
	require.Eventually(t, func() bool { // the SDK runs handlers on its own goroutine
		mu.Lock()
		defer mu.Unlock()
		return len(changed) > 0
	}, 5*time.Second, time.Millisecond)
	v, err := client.FloatValue(context.Background(), "recommendations.level", -1, ec)
	require.NoError(t, err)
	assert.Less(t, v, 1.0)
}

func BenchmarkBooleanEvaluation(b *testing.B) {
	c := newController(b)
	dimmed(b, c, t0.Add(time.Second))
	p, _ := New(c, Options{})
	ctx := context.Background()
	flat := fc("user-123456", "segment", "vip")
	b.ReportAllocs()
	for b.Loop() {
		p.BooleanEvaluation(ctx, "recommendations", false, flat)
	}
}

func BenchmarkBooleanEvaluationParallel(b *testing.B) {
	c := newController(b)
	dimmed(b, c, t0.Add(time.Second))
	p, _ := New(c, Options{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		flat := fc("user-123456")
		for pb.Next() {
			p.BooleanEvaluation(ctx, "recommendations", false, flat)
		}
	})
}

// BenchmarkSDKClient runs the same flag shape (a boolean split per user)
// through the SDK client, against the SDK's in-memory provider as anchor.
func BenchmarkSDKClient(b *testing.B) {
	ec := openfeature.NewEvaluationContext("user-123456", map[string]any{"segment": "vip"})
	run := func(b *testing.B, prov openfeature.FeatureProvider, parallel bool) {
		api := isolated.NewAPI()
		require.NoError(b, api.SetProviderAndWait(context.Background(), prov))
		defer api.Shutdown(context.Background())
		client := api.NewClient()
		ctx := context.Background()
		b.ReportAllocs()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					client.BooleanValue(ctx, "recommendations", false, ec)
				}
			})
			return
		}
		for b.Loop() {
			client.BooleanValue(ctx, "recommendations", false, ec)
		}
	}
	// The anchor's flag has the same shape: a boolean split per targeting
	// key that returns the same flag metadata (the SDK copies metadata on
	// every evaluation, so leaving it out would measure less work).
	meta := openfeature.FlagMetadata{"level": 0.5, "generation": int64(2), "mode": "auto",
		"reason": "latency.p99 950ms < 1s target: dimming recommendations", "sticky": true, "segment": "vip"}
	mem := func(withMeta bool) openfeature.FeatureProvider {
		split := func(f memprovider.InMemoryFlag, fc openfeature.FlattenedContext) (any, openfeature.ProviderResolutionDetail) {
			key, _ := fc[openfeature.TargetingKey].(string)
			v := "off"
			if On("recommendations", key, 0.5) {
				v = "on"
			}
			d := openfeature.ProviderResolutionDetail{Reason: openfeature.SplitReason, Variant: v}
			if withMeta {
				d.FlagMetadata = meta
			}
			return f.Variants[v], d
		}
		return memprovider.NewInMemoryProvider(map[string]memprovider.InMemoryFlag{
			"recommendations": {Key: "recommendations", State: memprovider.Enabled, DefaultVariant: "on",
				Variants: map[string]any{"on": true, "off": false}, ContextEvaluator: &split},
		})
	}
	ours := func() openfeature.FeatureProvider {
		c := newController(b)
		dimmed(b, c, t0.Add(time.Second))
		p, _ := New(c, Options{})
		return p
	}
	b.Run("memprovider", func(b *testing.B) { run(b, mem(true), false) })
	b.Run("memprovider-no-metadata", func(b *testing.B) { run(b, mem(false), false) })
	b.Run("brownout", func(b *testing.B) { run(b, ours(), false) })
	b.Run("memprovider-parallel", func(b *testing.B) { run(b, mem(true), true) })
	b.Run("brownout-parallel", func(b *testing.B) { run(b, ours(), true) })
}

// A caller that changes the shared State's exported fields changes nothing
// the provider answers: it evaluates from the state's private copy.
func TestChangedStateFieldsChangeNoAnswer(t *testing.T) {
	c := newController(t)
	p, err := New(c, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	st, _ := dimmed(t, c, t0.Add(time.Second))
	lvl, vip := st.Features[0].Level, st.Features[0].Segments[0]
	before := p.BooleanEvaluation(ctx, "recommendations", false, fc("user-7"))

	st.Generation, st.Reason, st.Mode = 99, "changed", dimmer.Frozen
	for i := range st.Features {
		st.Features[i].Level, st.Features[i].Mode = 1, dimmer.Override
		st.Features[i].Segments[0] = 0
	}
	require.True(t, st.Tampered())
	f := p.FloatEvaluation(ctx, "recommendations.level", -1, fc("user-1"))
	assert.Equal(t, lvl, f.Value)
	assert.Equal(t, "auto", f.FlagMetadata["mode"])
	assert.Contains(t, f.FlagMetadata["reason"], "dimming recommendations")
	assert.Equal(t, int64(st.Seq()), f.FlagMetadata["generation"])
	v := p.FloatEvaluation(ctx, "recommendations.level", -1, fc("user-1", "segment", "vip"))
	assert.Equal(t, vip, v.Value)
	after := p.BooleanEvaluation(ctx, "recommendations", false, fc("user-7"))
	assert.Equal(t, before.Value, after.Value)
}

// fixedSource serves one state.
type fixedSource struct{ st *dimmer.State }

func (s fixedSource) State() *dimmer.State { return s.st }
func (s fixedSource) Subscribe() (<-chan *dimmer.State, func()) {
	return make(chan *dimmer.State), func() {}
}

// TestMetadataIsBuiltOnUse: the first evaluation of a new state builds
// the metadata it answers with, not every feature's for every segment
// (up to MaxFeatures × (MaxSegments+1) × 2 maps); evaluations racing on
// a new state share one cache.
func TestMetadataIsBuiltOnUse(t *testing.T) {
	var segs []string
	for j := range dimmer.MaxSegments {
		segs = append(segs, "s"+strconv.Itoa(j))
	}
	fs := make([]dimmer.PublishedFeature, dimmer.MaxFeatures)
	for i := range fs {
		fs[i] = dimmer.PublishedFeature{Name: "f" + strconv.Itoa(i), Level: 0.5, Segments: make([]float64, len(segs))}
	}
	st := dimmer.Published(7, t0, dimmer.Auto, 0, "test", segs, fs)
	allocs := testing.AllocsPerRun(5, func() {
		p, err := New(fixedSource{st}, Options{})
		require.NoError(t, err)
		p.BooleanEvaluation(context.Background(), "f3", false, fc("u1", "segment", "s2"))
	})
	assert.Less(t, allocs, 100.0, "one entry's maps, not the state's")

	p, err := New(fixedSource{st}, Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([]openfeature.FlagMetadata, 8)
	for g := range got {
		wg.Go(func() {
			got[g] = p.BooleanEvaluation(context.Background(), "f3", false, fc("u1")).FlagMetadata
		})
	}
	wg.Wait()
	for _, md := range got {
		assert.Equal(t, int64(7), md["generation"])
		assert.Equal(t, 0.5, md["level"])
	}
}

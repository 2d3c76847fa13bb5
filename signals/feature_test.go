package signals

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brownout/brownout/internal/race"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFeaturesRegistration(t *testing.T) {
	rec := NewRecorder(Config{})
	assert.False(t, rec.Tallying())
	assert.Nil(t, rec.Tallies())
	require.NoError(t, rec.Features("a", "b"))
	require.NoError(t, rec.Features("b", "c")) // b again is ignored
	assert.True(t, rec.Tallying())
	assert.Equal(t, []string{"a", "b", "c"}, rec.FeatureNames())
	for _, bad := range []string{"", " a", "a\x00", strings.Repeat("x", 129), "\xff"} {
		assert.Error(t, rec.Features("d", bad), "%q", bad)
	}
	assert.Equal(t, []string{"a", "b", "c"}, rec.FeatureNames(), "a failed call registers nothing")
	var many []string
	for i := range MaxFeatures - 3 {
		many = append(many, fmt.Sprint("f", i))
	}
	require.NoError(t, rec.Features(many...))
	assert.ErrorIs(t, rec.Features("one-too-many"), ErrTooManyFeatures)
	assert.Len(t, rec.FeatureNames(), MaxFeatures)
}

func TestMarks(t *testing.T) {
	rec := NewRecorder(Config{})
	ctx := context.Background()
	assert.False(t, Evaluated(ctx, "a", true), "no tally: unattributed")
	assert.False(t, Rendered(ctx, "a"))
	var none context.Context // a nil context must not panic
	assert.False(t, Skipped(none, "a"))
	var rt RequestTally
	assert.False(t, rec.BeginTally(&rt, ctx), "no features: no tally")

	require.NoError(t, rec.Features("a", "b", "c", "d"))
	type key struct{}
	require.True(t, rec.BeginTally(&rt, context.WithValue(ctx, key{}, "v")))
	var rc context.Context = &rt
	rc, cancel := context.WithCancel(rc) // a descendant sees the tally, and the parent's values
	defer cancel()
	assert.Equal(t, "v", rc.Value(key{}))
	assert.True(t, Evaluated(rc, "a", true))
	assert.True(t, Evaluated(rc, "b", true))
	assert.True(t, Skipped(rc, "b"))         // evaluated on, not rendered: off
	assert.True(t, Evaluated(rc, "b", true)) // the provider does not override the app
	assert.True(t, Rendered(rc, "c"))
	assert.True(t, Evaluated(rc, "c", false))
	assert.False(t, Evaluated(rc, "zz", true), "unregistered")
	for f, want := range map[string][2]bool{"a": {true, true}, "b": {false, true}, "c": {true, true}, "d": {false, false}} {
		on, marked := FeatureMarked(rc, f)
		assert.Equal(t, want, [2]bool{on, marked}, f)
	}
	rec.EndTally(&rt, 30*time.Millisecond)
	s := rec.Snapshot(t0)
	require.Len(t, s.Tallies, 4)
	assert.Equal(t, Tally{Feature: "a", On: Moments{1, .03, .03 * .03}}, s.Tallies[0])
	assert.Equal(t, Tally{Feature: "b", Off: Moments{1, .03, .03 * .03}}, s.Tallies[1])
	assert.Equal(t, int64(1), s.Tallies[2].On.N)
	assert.Equal(t, Tally{Feature: "d"}, s.Tallies[3], "never marked: not counted")
}

func TestSnapshotTalliesSincePrevious(t *testing.T) {
	rec := NewRecorder(Config{})
	require.NoError(t, rec.Features("a"))
	end := func(on bool, d time.Duration) {
		var rt RequestTally
		require.True(t, rec.BeginTally(&rt, context.Background()))
		Evaluated(&rt, "a", on)
		rec.EndTally(&rt, d)
	}
	end(true, time.Second)
	end(false, 2*time.Second)
	rec.Unattributed("a")
	rec.Unattributed("unknown") // ignored
	s := rec.Snapshot(t0)
	assert.Equal(t, []Tally{{Feature: "a", On: Moments{1, 1, 1}, Off: Moments{1, 2, 4}, Unattributed: 1}}, s.Tallies)
	end(true, 3*time.Second)
	s = rec.Snapshot(t0.Add(time.Second))
	assert.Equal(t, []Tally{{Feature: "a", On: Moments{1, 3, 9}}}, s.Tallies, "since the previous snapshot")
	s = rec.Snapshot(t0.Add(2 * time.Second))
	assert.Equal(t, []Tally{{Feature: "a"}}, s.Tallies)
	assert.Equal(t, []Tally{{Feature: "a", On: Moments{2, 4, 10}, Off: Moments{1, 2, 4}, Unattributed: 1}}, rec.Tallies(), "cumulative")

	require.NoError(t, rec.Features("b"))
	s = rec.Snapshot(t0.Add(3 * time.Second))
	assert.Equal(t, []Tally{{Feature: "a"}, {Feature: "b"}}, s.Tallies)
	bare := NewRecorder(Config{})
	bare.Snapshot(t0)
	assert.Equal(t, testing.AllocsPerRun(20, func() { bare.Snapshot(t0.Add(4 * time.Second)) }),
		testing.AllocsPerRun(20, func() { rec.Snapshot(t0.Add(4 * time.Second)) }), "Snapshot allocates nothing for its tallies once warm")
}

func TestMiddlewareTallies(t *testing.T) {
	rec := NewRecorder(Config{})
	require.NoError(t, rec.Features("recs", "reviews"))
	clk := &fakeClock{t: t0, step: 10 * time.Millisecond}
	h := Middleware(rec, MiddlewareConfig{Now: clk.now})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clk.t = clk.t.Add(90 * time.Millisecond) // the handler's work
		switch r.URL.Path {
		case "/on":
			Evaluated(r.Context(), "recs", true)
		case "/off":
			Evaluated(r.Context(), "recs", false)
		case "/skip":
			Evaluated(r.Context(), "recs", true)
			Skipped(r.Context(), "recs")
		case "/refused":
			Evaluated(r.Context(), "recs", true)
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/panic":
			Evaluated(r.Context(), "reviews", true)
			panic("boom")
		}
	}))
	for _, p := range []string{"/on", "/on", "/off", "/skip", "/refused", "/none"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	assert.Panics(t, func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/panic", nil)) })
	s := rec.Snapshot(t0)
	require.Len(t, s.Tallies, 2)
	recs := s.Tallies[0]
	assert.Equal(t, int64(2), recs.On.N)
	assert.Equal(t, int64(2), recs.Off.N, "off and skipped; the refusal is not a completion")
	assert.InDelta(t, 0.1, recs.On.Mean(), 1e-9, "start to end, as the latency")
	assert.InDelta(t, 0.1, recs.Off.Mean(), 1e-9)
	assert.Equal(t, int64(1), s.Tallies[1].On.N, "a panic completes (failed)")
}

// The tally adds one allocation to the middleware: the copy of the
// request that carries it (net/http's contract: middleware does not change
// the request it was given); the writer and the tally are one.
func TestMiddlewareTallyAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	plain := NewRecorder(Config{})
	tallied := NewRecorder(Config{})
	require.NoError(t, tallied.Features("recs", "reviews"))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Evaluated(r.Context(), "recs", true)
		Rendered(r.Context(), "reviews")
	})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	allocs := func(rec *Recorder) float64 {
		h := Middleware(rec, MiddlewareConfig{})(handler)
		return testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) })
	}
	assert.Equal(t, allocs(plain)+1, allocs(tallied))
	assert.Equal(t, int64(101), tallied.Snapshot(t0).Tallies[0].On.N)
}

// The handler's request carries the tally, a child of the request's own
// context (same values, cancellation); the request the caller holds is
// not changed, and a request that already carries a tally (served again,
// or through a second middleware) does not pile them up.
func TestMiddlewareTallyContext(t *testing.T) {
	rec := NewRecorder(Config{})
	require.NoError(t, rec.Features("a"))
	type key struct{}
	var seen []context.Context
	h := Middleware(rec, MiddlewareConfig{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Context())
		assert.Equal(t, "v", r.Context().Value(key{}))
		Evaluated(r.Context(), "a", true)
	}))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	require.Len(t, seen, 3)
	for _, c := range seen {
		assert.Same(t, ctx, c.(*RequestTally).Context, "a child of the request's own context, never of an earlier tally")
	}
	assert.Same(t, ctx, req.Context(), "the caller's request is not changed")
	h.ServeHTTP(httptest.NewRecorder(), req.WithContext(seen[0]))
	assert.Same(t, ctx, seen[3].(*RequestTally).Context, "a tally's request served again")
	assert.Equal(t, "v", req.Context().Value(key{}))
	cancel()
	assert.ErrorIs(t, req.Context().Err(), context.Canceled)
	assert.Equal(t, int64(4), rec.Tallies()[0].On.N)
}

func TestTallyConcurrent(t *testing.T) {
	rec := NewRecorder(Config{})
	require.NoError(t, rec.Features("a", "b"))
	h := Middleware(rec, MiddlewareConfig{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wg sync.WaitGroup
		wg.Go(func() { Evaluated(r.Context(), "a", true) })
		wg.Go(func() { Skipped(r.Context(), "b") })
		wg.Wait()
	}))
	var wg sync.WaitGroup
	var snaps []Tally
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			for range 250 {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			s := rec.Snapshot(t0.Add(time.Duration(i) * time.Millisecond))
			mu.Lock()
			snaps = append(snaps, s.Tallies[0])
			mu.Unlock()
		}
	})
	wg.Wait()
	total := rec.Snapshot(t0.Add(time.Second)).Tallies[0].On.N
	for _, s := range snaps {
		total += s.On.N
	}
	assert.Equal(t, int64(1000), total, "every request counted once over the snapshots")
	assert.Equal(t, int64(1000), rec.Tallies()[1].Off.N)
}

// BenchmarkMiddlewareTally is BenchmarkMiddleware with four features
// registered: a handler that marks none (the middleware's own cost) and
// one that marks two (Evaluated, as the provider does: the marks are the
// evaluations' cost, the middleware adds their service time).
func BenchmarkMiddlewareTally(b *testing.B) {
	for _, marks := range []int{0, 2} {
		b.Run(fmt.Sprint("marks=", marks), func(b *testing.B) {
			rec := NewRecorder(Config{})
			if err := rec.Features("recs", "reviews", "related", "ads"); err != nil {
				b.Fatal(err)
			}
			h := Middleware(rec, MiddlewareConfig{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if marks > 0 {
					Evaluated(r.Context(), "recs", true)
					Evaluated(r.Context(), "reviews", false)
				}
			}))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(PriorityHeader, "critical")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

func TestCollectorExportsTallies(t *testing.T) {
	rec := NewRecorder(Config{})
	c := NewCollector(rec, CollectorOpts{})
	assert.Zero(t, testutil.CollectAndCount(c, MetricFeatureRequests), "no feature, no series")
	require.NoError(t, rec.Features("recs", "reviews"))
	for _, d := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond} {
		var rt RequestTally
		require.True(t, rec.BeginTally(&rt, context.Background()))
		Evaluated(&rt, "recs", true)
		Skipped(&rt, "reviews")
		rec.EndTally(&rt, d)
	}
	rec.Unattributed("recs")
	lint, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, lint, "metric lint")
	want := `
# HELP brownout_feature_requests_total Completed requests that rendered the feature (state on) or evaluated it and did not (off); unattributed: evaluations of the feature outside any request's tally.
# TYPE brownout_feature_requests_total counter
brownout_feature_requests_total{feature="recs",state="off"} 0
brownout_feature_requests_total{feature="recs",state="on"} 2
brownout_feature_requests_total{feature="recs",state="unattributed"} 1
brownout_feature_requests_total{feature="reviews",state="off"} 2
brownout_feature_requests_total{feature="reviews",state="on"} 0
brownout_feature_requests_total{feature="reviews",state="unattributed"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), MetricFeatureRequests))
	mf := map[string]float64{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			mf[key] = m.GetCounter().GetValue()
		}
	}
	assert.InDelta(t, 0.4, mf[MetricFeatureServiceSum+",recs,on"], 1e-12)
	assert.InDelta(t, 0.1, mf[MetricFeatureServiceSquares+",recs,on"], 1e-12)
	assert.InDelta(t, 0.4, mf[MetricFeatureServiceSum+",reviews,off"], 1e-12)
}

// TestExplicitMarkWinsRaces: the app's Rendered and the provider's mark
// racing on one feature: the app's always stands.
func TestExplicitMarkWinsRaces(t *testing.T) {
	rec := NewRecorder(Config{})
	require.NoError(t, rec.Features("f"))
	n := 20000
	if race.Enabled {
		n = 2000
	}
	for range n {
		var tl RequestTally
		require.True(t, rec.BeginTally(&tl, context.Background()))
		var wg sync.WaitGroup
		wg.Go(func() { Evaluated(&tl, "f", false) })
		wg.Go(func() { Rendered(&tl, "f") })
		wg.Wait()
		on, marked := FeatureMarked(&tl, "f")
		require.True(t, marked)
		require.True(t, on, "the app said rendered")
	}
}

// TestHeldReplacesServiceTime: a request that reports the time it held
// the bottleneck counts that in its tally instead of its service time; a
// reused tally forgets it.
func TestHeldReplacesServiceTime(t *testing.T) {
	rec := NewRecorder(Config{})
	require.NoError(t, rec.Features("a"))
	assert.False(t, Held(context.Background(), time.Second), "no tally")
	var rt RequestTally
	require.True(t, rec.BeginTally(&rt, context.Background()))
	Evaluated(&rt, "a", true)
	assert.True(t, Held(&rt, 2*time.Second))
	assert.True(t, Held(&rt, time.Second))
	rec.EndTally(&rt, 10*time.Second) // 7 s of it waiting for the pool or a remote call
	require.True(t, rec.BeginTally(&rt, context.Background()))
	Evaluated(&rt, "a", false)
	rec.EndTally(&rt, 5*time.Second) // reports nothing: its service time
	assert.Equal(t, []Tally{{Feature: "a", On: Moments{1, 3, 9}, Off: Moments{1, 5, 25}}}, rec.Snapshot(t0).Tallies)
}

// TestWorkCountsEveryTalliedRequest: a request that marks no feature (a
// cart, a checkout) is in no feature's tally, but in the work of every
// request — Snapshot.Work since the previous snapshot, Recorder.Work and
// the Collector's brownout_work_* cumulative — so that the work the load
// brings is not a product page's times every arrival.
func TestWorkCountsEveryTalliedRequest(t *testing.T) {
	rec := NewRecorder(Config{})
	c := NewCollector(rec, CollectorOpts{})
	assert.Zero(t, testutil.CollectAndCount(c, MetricWorkRequests), "no feature, no work series")
	require.NoError(t, rec.Features("recs"))
	end := func(mark bool, d time.Duration) {
		var rt RequestTally
		require.True(t, rec.BeginTally(&rt, context.Background()))
		if mark {
			Evaluated(&rt, "recs", true)
		}
		rec.EndTally(&rt, d)
	}
	end(true, time.Second)
	end(false, 2*time.Second)
	end(false, 3*time.Second)
	s := rec.Snapshot(t0)
	assert.Equal(t, []Tally{{Feature: "recs", On: Moments{1, 1, 1}}}, s.Tallies)
	assert.Equal(t, Moments{3, 6, 14}, s.Work, "every request, features or none")
	end(false, time.Second)
	s = rec.Snapshot(t0.Add(time.Second))
	assert.Equal(t, Moments{1, 1, 1}, s.Work, "since the previous snapshot")
	assert.Equal(t, Moments{4, 7, 15}, rec.Work(), "cumulative")
	want := `
# HELP brownout_work_requests_total Completed requests with a tally (every request through the middlewares once a feature is registered), whether they evaluated a feature or not.
# TYPE brownout_work_requests_total counter
brownout_work_requests_total 4
# HELP brownout_work_seconds_total Service time (admission to completion, or the time held where the app reports it) of the requests in brownout_work_requests_total, summed.
# TYPE brownout_work_seconds_total counter
brownout_work_seconds_total 7
# HELP brownout_work_seconds_squared_total Squares of the service times in brownout_work_seconds_total, summed (seconds²).
# TYPE brownout_work_seconds_squared_total counter
brownout_work_seconds_squared_total 15
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), MetricWorkRequests, MetricWorkSum, MetricWorkSquares))
	lint, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	assert.Empty(t, lint, "metric lint")
}

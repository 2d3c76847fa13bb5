package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// tallied records n requests on rec, each rendering feature "recs" when
// i%every == 0 and evaluating "reviews" off, recs adding extra to a
// service time of base.
func tallied(t *testing.T, rec *signals.Recorder, now time.Time, n, every int, base, extra time.Duration) {
	t.Helper()
	for i := range n {
		var tl signals.RequestTally
		require.True(t, rec.BeginTally(&tl, context.Background()))
		on := i%every == 0
		signals.Evaluated(&tl, "recs", on)
		signals.Evaluated(&tl, "reviews", false)
		d := base
		if on {
			d += extra
		}
		rec.Arrive(signals.Default)
		s := rec.Start(now)
		rec.Done(signals.Default, s, s.Add(d), false, time.Time{})
		rec.EndTally(&tl, d)
	}
}

// TestScrapeReadsFeatureTallies is the daemon's fleet path for the model
// law's costs: two instances tally the features they render and export
// them with Collector, and ScrapeSource's Tallies and Work are the two
// recorders' increase between its last two scrapes — the interval Recent
// counts — summed by feature, as PushSource gives a Pusher's. An
// instance that restarted counts its new tallies whole, and an interval
// with no requests tallies nothing.
func TestScrapeReadsFeatureTallies(t *testing.T) {
	now := t0
	var recs []*signals.Recorder
	var srvs []*httptest.Server
	var urls []string
	for range 2 {
		rec := signals.NewRecorder(signals.Config{})
		require.NoError(t, rec.Features("recs", "reviews"))
		srv := httptest.NewServer(collectorHandler(rec, func() time.Time { return now }))
		t.Cleanup(srv.Close)
		recs, srvs, urls = append(recs, rec), append(srvs, srv), append(urls, srv.URL)
	}
	src, err := NewScrapeSource(ScrapeConfig{Targets: urls})
	require.NoError(t, err)
	tallied(t, recs[0], now, 100, 2, 10*time.Millisecond, 5*time.Millisecond) // before the first scrape: not in any interval
	snap, err := src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	assert.Empty(t, snap.Tallies, "a target's first scrape gives no interval")
	assert.Zero(t, snap.Work.N)

	now = now.Add(time.Second)
	tallied(t, recs[0], now, 40, 2, 10*time.Millisecond, 5*time.Millisecond)  // 20 on, 20 off
	tallied(t, recs[1], now, 30, 3, 20*time.Millisecond, 10*time.Millisecond) // 10 on, 20 off
	snap, err = src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	require.Len(t, snap.Tallies, 2)
	recsT, reviews := snap.Tallies[0], snap.Tallies[1]
	assert.Equal(t, "recs", recsT.Feature)
	assert.Equal(t, "reviews", reviews.Feature)
	assert.Equal(t, int64(30), recsT.On.N, "20 + 10 rendered it")
	assert.Equal(t, int64(40), recsT.Off.N)
	assert.InDelta(t, 20*0.015+10*0.030, recsT.On.Sum, 1e-9)
	assert.InDelta(t, 20*0.010+20*0.020, recsT.Off.Sum, 1e-9)
	assert.InDelta(t, 20*0.015*0.015+10*0.030*0.030, recsT.On.SumSq, 1e-9)
	assert.Equal(t, int64(70), reviews.Off.N)
	assert.Zero(t, reviews.On.N)
	assert.Equal(t, int64(70), snap.Work.N, "every tallied request of the interval")
	assert.InDelta(t, 20*0.015+20*0.010+10*0.030+20*0.020, snap.Work.Sum, 1e-9)
	assert.Equal(t, uint64(70), snap.Recent.Arrived, "the same interval as Recent")

	// Nothing new: an interval with nothing tallied.
	now = now.Add(time.Second)
	snap, err = src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	for _, tl := range snap.Tallies {
		assert.Zero(t, tl.On.N+tl.Off.N, tl.Feature)
	}
	assert.Zero(t, snap.Work.N)

	// Instance 0 restarts: a fresh recorder whose counts are fewer.
	fresh := signals.NewRecorder(signals.Config{})
	require.NoError(t, fresh.Features("recs", "reviews"))
	srvs[0].Config.Handler = collectorHandler(fresh, func() time.Time { return now })
	now = now.Add(time.Second)
	tallied(t, fresh, now, 10, 2, 10*time.Millisecond, 5*time.Millisecond)
	snap, err = src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	require.Len(t, snap.Tallies, 2)
	assert.Equal(t, int64(5), snap.Tallies[0].On.N, "the restarted instance's counts, whole")
	assert.Equal(t, int64(10), snap.Work.N)
}

// TestScrapeTalliesWithoutWork: a target that exports feature tallies
// without the work families (an exporter older than the work) leaves the
// snapshot's Work empty, as PushSource does for a Pusher that pushes
// none: the work of the others would read a feature's share too high.
func TestScrapeTalliesWithoutWork(t *testing.T) {
	body := func(n int) string {
		return fmt.Sprintf(`# TYPE brownout_request_duration_seconds histogram
brownout_request_duration_seconds_bucket{le="+Inf"} %d
brownout_request_duration_seconds_sum 1
brownout_request_duration_seconds_count %d
# TYPE brownout_feature_requests_total counter
brownout_feature_requests_total{feature="recs",state="on"} %d
brownout_feature_requests_total{feature="recs",state="off"} 0
# TYPE brownout_feature_service_seconds_total counter
brownout_feature_service_seconds_total{feature="recs",state="on"} %d
brownout_feature_service_seconds_total{feature="recs",state="off"} 0
# TYPE brownout_feature_service_seconds_squared_total counter
brownout_feature_service_seconds_squared_total{feature="recs",state="on"} %d
brownout_feature_service_seconds_squared_total{feature="recs",state="off"} 0
`, n, n, n, n, n)
	}
	n := 10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		fmt.Fprint(w, body(n))
	}))
	t.Cleanup(srv.Close)
	src, err := NewScrapeSource(ScrapeConfig{Targets: []string{srv.URL}})
	require.NoError(t, err)
	_, err = src.Snapshot(context.Background(), t0)
	require.NoError(t, err)
	n = 25
	snap, err := src.Snapshot(context.Background(), t0.Add(time.Second))
	require.NoError(t, err)
	require.Len(t, snap.Tallies, 1)
	assert.Equal(t, int64(15), snap.Tallies[0].On.N)
	assert.Zero(t, snap.Work, "no work without every target's")
}

// TestParseExpositionTallyErrors: the feature and work families of a
// hostile or broken exposition are checked as a push's are — a clear
// error naming the metric, and nothing half-read kept.
func TestParseExpositionTallyErrors(t *testing.T) {
	const lat = "# TYPE brownout_request_duration_seconds histogram\nbrownout_request_duration_seconds_bucket{le=\"+Inf\"} 1\nbrownout_request_duration_seconds_sum 1\nbrownout_request_duration_seconds_count 1\n"
	fam := func(name, labels string, v string) string {
		return "# TYPE " + name + " counter\n" + name + "{" + labels + "} " + v + "\n"
	}
	// three is a feature's three families; extra, more samples of the
	// requests family.
	three := func(feature, n, sum, sq string, extra ...string) string {
		l := `feature="` + feature + `",state="on"`
		req := fam(signals.MetricFeatureRequests, l, n)
		for _, e := range extra {
			req += signals.MetricFeatureRequests + e + "\n"
		}
		return req + fam(signals.MetricFeatureServiceSum, l, sum) + fam(signals.MetricFeatureServiceSquares, l, sq)
	}
	var many strings.Builder
	for _, name := range []string{signals.MetricFeatureRequests, signals.MetricFeatureServiceSum, signals.MetricFeatureServiceSquares} {
		many.WriteString("# TYPE " + name + " counter\n")
		for i := range signals.MaxFeatures + 1 {
			fmt.Fprintf(&many, "%s{feature=\"f%03d\",state=\"on\"} 1\n", name, i)
		}
	}
	for _, tc := range []struct {
		name, body, want string
		features         int
		work             bool
	}{
		{"a good one", lat + three("recs", "3", "0.3", "0.03"), "", 1, false},
		{"an unknown state is left out", lat + three("recs", "3", "0.3", "0.03", `{feature="recs",state="maybe"} 7`), "", 1, false},
		{"a bad feature name", lat + three("recs", "3", "0.3", "0.03", `{feature=" recs",state="on"} 1`), "feature \" recs\"", 0, false},
		{"no feature label", lat + fam(signals.MetricFeatureRequests, `state="on"`, "1"), signals.MetricFeatureRequests, 0, false},
		{"a count that is not finite", lat + three("recs", "+Inf", "0.3", "0.03"), signals.MetricFeatureRequests, 0, false},
		{"a negative time", lat + three("recs", "3", "-0.3", "0.03"), signals.MetricFeatureServiceSum, 0, false},
		{"a time with no request", lat + three("recs", "0", "0.3", "0.03"), "service time with no request", 0, false},
		{"a family missing", lat + fam(signals.MetricFeatureRequests, `feature="recs",state="on"`, "3"), "one missing or unread", 0, false},
		{"a state missing from a family", lat + three("recs", "3", "0.3", "0.03", `{feature="ads",state="on"} 10`), "feature \"ads\": a state missing", 0, false},
		{"a gauge where a counter goes", lat + "# TYPE brownout_feature_requests_total gauge\nbrownout_feature_requests_total{feature=\"recs\",state=\"on\"} 3\n", "is a gauge, want a counter", 0, false},
		{"more features than a Recorder tallies", lat + many.String(), fmt.Sprintf("more than %d features", signals.MaxFeatures), 0, false},
		{"work", lat + fam(signals.MetricWorkRequests, "", "4") + fam(signals.MetricWorkSum, "", "0.4") + fam(signals.MetricWorkSquares, "", "0.04"), "", 0, true},
		{"work with no request", lat + fam(signals.MetricWorkRequests, "", "0") + fam(signals.MetricWorkSum, "", "0.4") + fam(signals.MetricWorkSquares, "", "0.04"), "the work is left out", 0, false},
		{"work without its sum", lat + fam(signals.MetricWorkRequests, "", "4"), "the work is left out", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := parseExposition(strings.NewReader(tc.body), expfmt.NewFormat(expfmt.TypeTextPlain), 1<<20)
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
			}
			assert.True(t, st.parsed, "the rest of the exposition is still read")
			assert.Len(t, st.tallies, tc.features)
			assert.Equal(t, tc.work, st.hasWork)
			checkTallyInvariants(t, st)
		})
	}
}

// checkTallyInvariants fails t where st's tallies are not what the
// controller may read: sorted valid names, at most MaxFeatures, no time
// without a request.
func checkTallyInvariants(t testing.TB, st targetState) {
	t.Helper()
	if len(st.tallies) > signals.MaxFeatures {
		t.Fatalf("%d features", len(st.tallies))
	}
	for i, tl := range st.tallies {
		if err := signals.CheckFeature(tl.Feature); err != nil {
			t.Fatalf("feature %q: %v", tl.Feature, err)
		}
		if i > 0 && st.tallies[i-1].Feature >= tl.Feature {
			t.Fatalf("tallies not sorted: %q then %q", st.tallies[i-1].Feature, tl.Feature)
		}
		for _, m := range []signals.Moments{tl.On, tl.Off} {
			if m.N < 0 || m.Sum < 0 || m.SumSq < 0 || (m.N == 0 && m.Sum+m.SumSq > 0) {
				t.Fatalf("feature %q: moments %+v", tl.Feature, m)
			}
		}
	}
	if w := st.work; w.N < 0 || w.Sum < 0 || (w.N == 0 && w.Sum+w.SumSq > 0) {
		t.Fatalf("work %+v", w)
	}
}

// tallyBody is an exposition of arr requests, every one tallied: feature
// "recs" on for on of them (each 20 ms) and off for the rest (10 ms);
// offTime, when set, overrides the off state's time (a broken reading).
func tallyBody(arr, on int, offTime string) string {
	off := arr - on
	ot := fmt.Sprintf("%g", float64(off)*0.010)
	if offTime != "" {
		ot = offTime
	}
	return fmt.Sprintf(`# TYPE brownout_request_duration_seconds histogram
brownout_request_duration_seconds_bucket{le="+Inf"} %[1]d
brownout_request_duration_seconds_sum 1
brownout_request_duration_seconds_count %[1]d
# TYPE brownout_requests_arrived_total counter
brownout_requests_arrived_total{class="default"} %[1]d
# TYPE brownout_requests_completed_total counter
brownout_requests_completed_total{class="default"} %[1]d
# TYPE brownout_feature_requests_total counter
brownout_feature_requests_total{feature="recs",state="on"} %[2]d
brownout_feature_requests_total{feature="recs",state="off"} %[3]d
# TYPE brownout_feature_service_seconds_total counter
brownout_feature_service_seconds_total{feature="recs",state="on"} %[4]g
brownout_feature_service_seconds_total{feature="recs",state="off"} %[5]s
# TYPE brownout_feature_service_seconds_squared_total counter
brownout_feature_service_seconds_squared_total{feature="recs",state="on"} %[6]g
brownout_feature_service_seconds_squared_total{feature="recs",state="off"} %[7]g
# TYPE brownout_work_requests_total counter
brownout_work_requests_total %[1]d
# TYPE brownout_work_seconds_total counter
brownout_work_seconds_total %[8]g
# TYPE brownout_work_seconds_squared_total counter
brownout_work_seconds_squared_total %[9]g
`, arr, on, off, float64(on)*0.020, ot, float64(on)*0.0004, float64(off)*0.0001,
		float64(on)*0.020+float64(off)*0.010, float64(on)*0.0004+float64(off)*0.0001)
}

// TestScrapeIntervalsSkipBrokenReadings: a reading whose tallies were left
// out (here an off time with no off request — what a scrape that lands
// between a Collector's count and its sum reads for a state's first
// request) neither begins nor ends an interval: the scrape after it does
// not count the target's whole life as one period. Nor do two snapshots
// at one instant make an interval.
func TestScrapeIntervalsSkipBrokenReadings(t *testing.T) {
	body := tallyBody(1_000_000, 1_000_000, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	src, err := NewScrapeSource(ScrapeConfig{Targets: []string{srv.URL}})
	require.NoError(t, err)
	at := t0
	next := func(b string) signals.Snapshot {
		t.Helper()
		body, at = b, at.Add(time.Second)
		snap, _ := src.Snapshot(context.Background(), at)
		return snap
	}
	next(body)
	snap := next(tallyBody(1_000_100, 1_000_100, "0.001")) // off: a time, no request
	assert.Empty(t, snap.Tallies, "a broken reading ends no interval")
	snap = next(tallyBody(1_000_200, 1_000_150, ""))
	assert.Empty(t, snap.Tallies, "nor begins one: not a lifetime's counts")
	assert.Zero(t, snap.Work)
	snap = next(tallyBody(1_000_300, 1_000_200, ""))
	require.Len(t, snap.Tallies, 1)
	assert.Equal(t, int64(50), snap.Tallies[0].On.N)
	assert.Equal(t, int64(50), snap.Tallies[0].Off.N)
	assert.Equal(t, int64(100), snap.Work.N)
	assert.InDelta(t, 50*0.020+50*0.010, snap.Work.Sum, 1e-6)

	again, err := src.Snapshot(context.Background(), at) // the same instant
	require.NoError(t, err)
	assert.Empty(t, again.Tallies, "no time between the readings: no interval")
	assert.Zero(t, again.Recent.Arrived)
}

func TestScrapeSourceRefusesATargetTwice(t *testing.T) {
	_, err := NewScrapeSource(ScrapeConfig{Targets: []string{"http://a:1/metrics", "http://b:1/metrics", "http://a:1/metrics"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listed twice")
}

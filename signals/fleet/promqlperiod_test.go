package fleet

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
)

// TestPromQLSourceReadsThePeriodsCounts is the PromQL path of the model
// law's costs: two instances tally the features they render and export
// them with Collector, a real Prometheus scrapes both every second, and
// the source's Tallies, Work, Recent and Instances are the fleet's
// increase over the Period, as the scrape and push sources give an
// interval's. Every instance serves recs to a third of its requests, at
// 10 ms more than the 20 ms of a request without it.
func TestPromQLSourceReadsThePeriodsCounts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var addrs []string
	var arrived atomic.Int64 // both instances'
	for range 2 {
		rec := signals.NewRecorder(signals.Config{})
		require.NoError(t, rec.Features("recs", "reviews"))
		addrs = append(addrs, strings.TrimPrefix(serveCollector(t, rec, nil), "http://"))
		every5ms(ctx, func(n int, now time.Time) {
			var tl signals.RequestTally
			if !rec.BeginTally(&tl, ctx) {
				panic("no tally with features registered")
			}
			on := n%3 == 0
			signals.Evaluated(&tl, "recs", on)
			signals.Evaluated(&tl, "reviews", false)
			if n%10 == 0 {
				rec.Unattributed("reviews")
			}
			d := 20 * time.Millisecond
			if on {
				d += 10 * time.Millisecond
			}
			rec.Arrive(signals.Default)
			arrived.Add(1)
			s := rec.Start(now)
			rec.Done(signals.Default, s, s.Add(d), false, time.Time{})
			rec.EndTally(&tl, d)
		})
	}
	base := testsrv.StartPrometheus(t, addrs...)
	const period = 4 * time.Second
	src, err := NewPromQLSource(PromQLConfig{Address: base, Queries: DefaultQueriesFor("10s", ""), Window: 10 * time.Second, Period: period})
	require.NoError(t, err)

	var snap signals.Snapshot
	var now time.Time
	type count struct {
		at time.Time
		n  int64
	}
	var counts []count // the arrivals' true count, as the test went
	// (A period that began before Prometheus's first scrapes counts less
	// — PromQL's increase extrapolates a series half an interval before
	// its first sample — and the first scrapes come a few seconds after
	// it says it is ready: wait until it surely holds a whole period.)
	// (The snapshots below are asked 3 s in the past.)
	whole := time.Now().Add(4*period + 3*time.Second)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) { // waiting for real scrapes
		// (Asked 3 s in the past: a loaded machine delays Prometheus's
		// scrapes by seconds, and a period whose last seconds are not
		// yet scraped reads low.)
		counts = append(counts, count{time.Now(), arrived.Load()})
		now = time.Now().Add(-3 * time.Second)
		snap, err = src.Snapshot(ctx, now)
		if now.After(whole) && len(snap.Tallies) == 2 && snap.Tallies[0].On.N > 100 && snap.Work.N > 0 && snap.Instances > 1.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tallies from Prometheus after 60 s: %+v, %v", snap.Tallies, err)
		}
	}
	if err != nil {
		// (Gateless instances: the gate's signals have no data.)
		assert.NotContains(t, err.Error(), "period")
	}
	assert.Equal(t, period, snap.RecentSpan)
	end := now.Add(-period / 2).Truncate(period)
	assert.Equal(t, end, snap.RecentAt, "the latest whole period, ended at a multiple of it half a period before now at least")
	// Up to 200 requests a second at each of two instances (a ticker
	// misses ticks on a busy machine): the true count over the period,
	// give or take Prometheus's scrape interval at its ends.
	countAt := func(at time.Time) float64 {
		i := slices.IndexFunc(counts, func(c count) bool { return !c.at.Before(at) })
		require.Positive(t, i, "the test counted from before %v", at)
		a, b := counts[i-1], counts[i]
		return float64(a.n) + float64(b.n-a.n)*at.Sub(a.at).Seconds()/b.at.Sub(a.at).Seconds()
	}
	truth := countAt(end) - countAt(end.Add(-period))
	t.Logf("arrivals: %d over %v, truly %.0f", snap.Recent.Arrived, period, truth)
	assert.InDelta(t, truth, float64(snap.Recent.Arrived), truth/5, "the fleet's arrivals over the period")
	assert.InDelta(t, float64(snap.Recent.Arrived), float64(snap.Recent.Completed), float64(snap.Recent.Arrived)/10+5)
	assert.InDelta(t, float64(snap.Recent.Completed), float64(snap.Work.N), float64(snap.Work.N)/10+5, "every request is tallied")
	assert.InDelta(t, 2, snap.Instances, 0.1, "two instances share the load")

	recs, reviews := snap.Tallies[0], snap.Tallies[1]
	assert.Equal(t, "recs", recs.Feature)
	assert.Equal(t, "reviews", reviews.Feature)
	mean := func(m signals.Moments) float64 { return m.Sum / float64(m.N) }
	assert.InDelta(t, 0.030, mean(recs.On), 1e-6, "a request with recs takes 30 ms")
	assert.InDelta(t, 0.020, mean(recs.Off), 1e-6)
	assert.InDelta(t, 0.030*0.030, recs.On.SumSq/float64(recs.On.N), 1e-8)
	assert.InDelta(t, 0.5, float64(recs.On.N)/float64(recs.Off.N), 0.1, "a third render it")
	assert.Zero(t, reviews.On.N)
	assert.InDelta(t, float64(snap.Work.N), float64(reviews.Off.N), float64(snap.Work.N)/10+5, "every request evaluates reviews off")
	assert.InDelta(t, float64(reviews.Off.N)/10, float64(reviews.Unattributed), float64(reviews.Off.N)/20+5)
	assert.InDelta(t, 1.0/3*0.030+2.0/3*0.020, mean(snap.Work), 1e-3)

	// Within the period, the same counts: one interval, seen again.
	again, _ := src.Snapshot(ctx, end.Add(period/2+period-time.Millisecond))
	assert.Equal(t, snap.RecentAt, again.RecentAt)
	assert.Equal(t, snap.Recent, again.Recent)
	assert.Equal(t, snap.Work, again.Work)

	// Over one instance (a selector): no spread, half the arrivals.
	one, err := NewPromQLSource(PromQLConfig{Address: base, Selector: `instance="` + addrs[0] + `"`, Window: 10 * time.Second, Period: period})
	require.NoError(t, err)
	s1, _ := one.Snapshot(ctx, now)
	assert.InDelta(t, 1, s1.Instances, 1e-9)
	assert.InDelta(t, float64(snap.Recent.Arrived)/2, float64(s1.Recent.Arrived), float64(snap.Recent.Arrived)/5)
	require.Len(t, s1.Tallies, 2)

	// Without a period, none of it.
	none, err := NewPromQLSource(PromQLConfig{Address: base, Window: 10 * time.Second, Period: -1})
	require.NoError(t, err)
	s0, _ := none.Snapshot(ctx, now)
	assert.Empty(t, s0.Tallies)
	assert.Zero(t, s0.RecentSpan)
	assert.Zero(t, s0.Instances)
}

// sample is one series of a period query's answer.
func sample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

// feature is a feature's three counts in one state.
func feature(name, state string, n, sum, sq float64) []*model.Sample {
	return []*model.Sample{
		sample(n, countLabel, countFeatureN, "feature", name, "state", state),
		sample(sum, countLabel, countFeatureS, "feature", name, "state", state),
		sample(sq, countLabel, countFeatureQ, "feature", name, "state", state),
	}
}

func workOf(n, sum, sq float64) []*model.Sample {
	return []*model.Sample{sample(n, countLabel, countWorkN), sample(sum, countLabel, countWorkS), sample(sq, countLabel, countWorkQ)}
}

// TestParsePeriod: the answer's counts as a Snapshot's, an extrapolated
// count rounded to whole requests with its request's moments kept, and
// the tallies (and the work) left out with an error where they do not
// hang together.
func TestParsePeriod(t *testing.T) {
	v := model.Vector{
		sample(402.6, countLabel, countArrived), sample(380.2, countLabel, countCompleted),
		sample(3, countLabel, countFailed), sample(370, countLabel, countGood), sample(41, countLabel, countWaited),
		sample(12.4, countLabel, countRejected, "reason", "codel"), sample(9, countLabel, countRejected, "reason", "shed_level"),
		sample(1, countLabel, countRejected, "reason", "a_reason_from_a_later_version"),
		sample(1.93, countLabel, countInstances),
	}
	v = append(v, feature("recs", "on", 100.4, 3.012, 0.09036)...)
	v = append(v, feature("recs", "off", 279.8, 5.596, 0.11192)...)
	v = append(v, sample(7, countLabel, countFeatureN, "feature", "recs", "state", "unattributed"))
	v = append(v, sample(7, countLabel, countFeatureN, "feature", "recs", "state", "a_state_from_a_later_version"))
	v = append(v, workOf(380.2, 8.608, 0.20228)...)
	p, err := parsePeriod(v)
	require.NoError(t, err)
	assert.Equal(t, uint64(403), p.counts.Arrived)
	assert.Equal(t, uint64(380), p.counts.Completed)
	assert.Equal(t, uint64(41), p.counts.Waited)
	assert.Equal(t, uint64(12), p.counts.Rejected[signals.ReasonCoDel])
	assert.Equal(t, uint64(9), p.counts.Rejected[signals.ReasonShedLevel])
	assert.True(t, p.hasArrivals)
	assert.Equal(t, 1.93, p.instances)
	require.Len(t, p.tallies, 1)
	on := p.tallies[0].On
	assert.Equal(t, int64(100), on.N)
	assert.InDelta(t, 0.030, on.Sum/float64(on.N), 1e-12, "a request's mean as the answer's")
	assert.InDelta(t, 0.0009, on.SumSq/float64(on.N), 1e-12)
	assert.Equal(t, int64(280), p.tallies[0].Off.N)
	assert.Equal(t, int64(7), p.tallies[0].Unattributed)
	assert.Equal(t, int64(380), p.work.N)

	// An answer with no arrivals (no instance in Prometheus yet): no
	// period, no spread (0/0), no error.
	p, err = parsePeriod(model.Vector{sample(math.NaN(), countLabel, countInstances)})
	require.NoError(t, err)
	assert.False(t, p.hasArrivals)
	assert.Zero(t, p.instances)

	for name, bad := range map[string]model.Vector{
		"a state without its squares": append(feature("recs", "on", 10, 0.3, 0.009)[:2], workOf(10, 0.3, 0.009)...),
		"time without requests":       append(feature("recs", "on", 0.2, 0.3, 0.009), workOf(10, 0.3, 0.009)...),
		"a negative count":            append(feature("recs", "on", -1, 0.3, 0.009), workOf(10, 0.3, 0.009)...),
		"a work without its time":     append(feature("recs", "on", 10, 0.3, 0.009), workOf(10, 0.3, 0.009)[:1]...),
		"a feature's bad name":        append(feature("recs\n", "on", 10, 0.3, 0.009), workOf(10, 0.3, 0.009)...),
		"squares without requests":    append(feature("recs", "on", 0, 0, 5), workOf(10, 0.3, 0.009)...),
		"a work of squares alone":     append(feature("recs", "on", 10, 0.3, 0.009), workOf(0, 0, 7)...),
		"a count past 2⁵³":            append(feature("recs", "on", 1e19, 1e17, 1e15), workOf(1e19, 1e17, 1e15)...),
		"more than 64 features": func() model.Vector {
			var v model.Vector
			for i := 69; i >= 0; i-- {
				v = append(v, feature(fmt.Sprintf("f%02d", i), "on", 10, 0.3, 0.009)...)
			}
			return append(v, workOf(700, 21, 0.63)...)
		}(),
	} {
		p, err := parsePeriod(append(model.Vector{sample(10, countLabel, countArrived)}, bad...))
		require.Error(t, err, name)
		if name != "a feature's bad name" {
			assert.Empty(t, p.tallies, "%s: the tallies are left out", name)
			assert.Zero(t, p.work, "%s: and the work with them", name)
		}
		assert.True(t, p.hasArrivals, "%s: the class counts stay", name)
	}

	// Tallies without the work (an app of an older version beside
	// them): the tallies stay, the work is left out.
	p, err = parsePeriod(feature("recs", "on", 10, 0.3, 0.009))
	require.NoError(t, err)
	assert.Len(t, p.tallies, 1)
	assert.Zero(t, p.work)
}

// TestPeriodQuerySelectsEveryMetric: with a selector, every metric of the
// period query selects with it, over the period's range.
func TestPeriodQuerySelectsEveryMetric(t *testing.T) {
	q := periodQuery(90*time.Second, `service="shop"`)
	metric := regexp.MustCompile(`(brownout_[a-z_]+)(\{[^}]*\})?\[([^\]]*)\]`)
	ms := metric.FindAllStringSubmatch(q, -1)
	require.Len(t, ms, 14, q) // (arrivals thrice: their count and their spread)
	seen := map[string]bool{}
	for _, m := range ms {
		assert.Equal(t, `{service="shop"}`, m[2], m[0])
		assert.Equal(t, "1m30s", m[3], m[0])
		seen[m[1]] = true
	}
	for _, name := range []string{signals.MetricArrived, signals.MetricFeatureServiceSquares, signals.MetricWorkSum, signals.MetricRejected} {
		assert.True(t, seen[name], name)
	}
	_, err := NewPromQLSource(PromQLConfig{Address: "http://127.0.0.1:1", Period: 500 * time.Millisecond})
	assert.ErrorContains(t, err, "period 500ms: want a second or more")
	_, err = NewPromQLSource(PromQLConfig{Address: "http://127.0.0.1:1", Period: 2 * time.Minute})
	assert.ErrorContains(t, err, "period 2m0s: want at most the window, 1m0s")
}

// TestPromQLPeriodAskedOncePerPeriod: the period's counts are asked once
// a period, at its end (a multiple of the Period at least half a Period
// before the snapshot's time); the snapshots within it give the same
// interval. A query that failed is asked again at the next period only.
func TestPromQLPeriodAskedOncePerPeriod(t *testing.T) {
	var mu sync.Mutex
	var asked []string // the period queries' times
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if !strings.Contains(r.Form.Get("query"), countLabel) {
			w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.Form.Get("time"))
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"error","errorType":"unavailable","error":"busy"}`))
			return
		}
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"brownout_count":"arrived"},"value":[0,"40"]}]}}`))
	}))
	t.Cleanup(srv.Close)
	src, err := NewPromQLSource(PromQLConfig{Address: srv.URL, Queries: map[signals.Key]string{signals.LatencyP99: "x"}, Period: 10 * time.Second})
	require.NoError(t, err)
	base := time.Unix(1_800_000_000, 0) // a multiple of 10 s
	for _, off := range []time.Duration{5 * time.Second, 9 * time.Second, 14900 * time.Millisecond} {
		snap, _ := src.Snapshot(context.Background(), base.Add(off))
		assert.Equal(t, base, snap.RecentAt, "at %v: the period that ended at base", off)
		assert.Equal(t, uint64(40), snap.Recent.Arrived)
	}
	snap, _ := src.Snapshot(context.Background(), base.Add(15*time.Second))
	assert.Equal(t, base.Add(10*time.Second), snap.RecentAt, "the next period")
	mu.Lock()
	assert.Equal(t, []string{"1800000000", "1800000010"}, asked, "once a period, at its end")
	fail = true
	mu.Unlock()
	for _, off := range []time.Duration{25 * time.Second, 26 * time.Second} {
		snap, err = src.Snapshot(context.Background(), base.Add(off))
		assert.ErrorContains(t, err, "the counts of a 10s period: ")
		assert.Zero(t, snap.RecentSpan, "no counts from a failed query")
	}
	mu.Lock()
	assert.Len(t, asked, 3, "a failed period is not asked again within it")
	mu.Unlock()

	// Periods end on the Unix clock's multiples of the Period.
	src7, err := NewPromQLSource(PromQLConfig{Address: srv.URL, Queries: map[signals.Key]string{signals.LatencyP99: "x"}, Period: 7 * time.Second})
	require.NoError(t, err)
	mu.Lock()
	fail = false
	mu.Unlock()
	snap, _ = src7.Snapshot(context.Background(), time.Unix(700, 0).Add(4*time.Second))
	assert.Equal(t, time.Unix(700, 0), snap.RecentAt)
	snap, _ = src7.Snapshot(context.Background(), time.Unix(700, 0).Add(3*time.Second))
	assert.Equal(t, time.Unix(693, 0), snap.RecentAt)
}

// TestPromQLPeriodWithoutSamples: a period that holds fewer than two of
// Prometheus's samples of a series answers nothing; while the window has
// arrivals, the source says so, and its health is not OK.
func TestPromQLPeriodWithoutSamples(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Form.Get("query"), countLabel) {
			w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
			return
		}
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[0,"100"]}]}}`))
	}))
	t.Cleanup(srv.Close)
	src, err := NewPromQLSource(PromQLConfig{Address: srv.URL, Queries: map[signals.Key]string{signals.ArrivalRate: "x"}, Period: 2 * time.Second})
	require.NoError(t, err)
	snap, err := src.Snapshot(context.Background(), time.Unix(1000, 0))
	assert.ErrorContains(t, err, "a period needs two of Prometheus's samples of a series")
	assert.Zero(t, snap.RecentSpan)
	assert.False(t, src.Health().OK)
}

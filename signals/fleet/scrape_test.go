package fleet

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// instance is a fake app exposing real client_golang metrics under our names.
type instance struct {
	reg      *prometheus.Registry
	lat      prometheus.Histogram
	sojourn  *prometheus.HistogramVec
	arrived  *prometheus.CounterVec
	inFlight prometheus.Gauge
	srv      *httptest.Server
}

func newInstance(t *testing.T, native, textOnly bool) *instance {
	in := &instance{reg: prometheus.NewRegistry()}
	opts := prometheus.HistogramOpts{Name: signals.MetricLatency, Help: "h", Buckets: signals.DefaultBuckets()}
	if native {
		opts.NativeHistogramBucketFactor = 1.05
	}
	in.lat = prometheus.NewHistogram(opts)
	in.sojourn = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: signals.MetricSojourn, Help: "h", Buckets: signals.DefaultBuckets()}, []string{"class"})
	in.arrived = prometheus.NewCounterVec(prometheus.CounterOpts{Name: signals.MetricArrived, Help: "h"}, []string{"class"})
	in.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: signals.MetricInFlight, Help: "h"})
	in.reg.MustRegister(in.lat, in.sojourn, in.arrived, in.inFlight)
	var h http.Handler = promhttp.HandlerFor(in.reg, promhttp.HandlerOpts{})
	if textOnly {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mfs, err := in.reg.Gather()
			require.NoError(t, err)
			w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
			enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				require.NoError(t, enc.Encode(mf))
			}
		})
	}
	in.srv = httptest.NewServer(h)
	t.Cleanup(in.srv.Close)
	return in
}

// observe records n requests: 99 % at fast, 1 % at slow.
func (in *instance) observe(n int, fast, slow float64) {
	for i := range n {
		v := fast
		if i%100 == 99 {
			v = slow
		}
		in.lat.Observe(v)
		in.sojourn.WithLabelValues("default").Observe(v / 10)
		in.arrived.WithLabelValues("default").Inc()
	}
}

func TestScrapeSourceFleet(t *testing.T) {
	for _, tc := range []struct {
		name             string
		native, textOnly bool
		tol              float64
	}{
		{"classic-protobuf", false, false, 0.25}, // linear interpolation in coarse buckets
		{"native-protobuf", true, false, 0.05},
		{"classic-text", false, true, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newInstance(t, tc.native, tc.textOnly), newInstance(t, tc.native, tc.textOnly)
			src, err := NewScrapeSource(ScrapeConfig{Targets: []string{a.srv.URL, b.srv.URL}, Window: 10 * time.Second})
			require.NoError(t, err)
			ctx := context.Background()

			// History before the first read is not part of any window.
			a.observe(1000, 0.9, 5)
			a.inFlight.Set(3)
			b.inFlight.Set(4)
			s, err := src.Snapshot(ctx, t0)
			require.NoError(t, err)
			assert.False(t, s.Has(signals.LatencyP99), "no delta on the first read")
			inf, _ := s.Get(signals.InFlight)
			assert.Equal(t, 7.0, inf, "in-flight is summed over the fleet")

			a.observe(1000, 0.040, 0.400)
			b.observe(1000, 0.040, 0.400)
			s, err = src.Snapshot(ctx, t0.Add(5*time.Second))
			require.NoError(t, err)
			p50, ok := s.Get(signals.LatencyP50)
			require.True(t, ok)
			p99, _ := s.Get(signals.LatencyP99)
			p999, _ := s.Get(signals.LatencyP999)
			assert.InEpsilon(t, 0.040, p50, tc.tol, "p50")
			assert.LessOrEqual(t, p99, 0.040*(1+tc.tol), "p99 is still fast (1 %% slow)")
			assert.InEpsilon(t, 0.400, p999, tc.tol, "p999")
			arr, _ := s.Get(signals.ArrivalRate)
			assert.InDelta(t, 400, arr, 1e-9, "2000 arrivals in 5 s")
			sp99, ok := s.Get(signals.SojournP99)
			require.True(t, ok)
			assert.InEpsilon(t, 0.004, sp99, 0.5)
		})
	}
}

func TestScrapeSourceRestartedTarget(t *testing.T) {
	a := newInstance(t, true, false)
	src, err := NewScrapeSource(ScrapeConfig{Targets: []string{a.srv.URL}})
	require.NoError(t, err)
	a.observe(5000, 0.9, 0.9)
	_, err = src.Snapshot(context.Background(), t0)
	require.NoError(t, err)
	// The process restarts: a fresh registry with fewer counts.
	fresh := newInstance(t, true, false)
	a.srv.Config.Handler = fresh.srv.Config.Handler
	fresh.observe(100, 0.010, 0.010)
	s, err := src.Snapshot(context.Background(), t0.Add(time.Second))
	require.NoError(t, err)
	p99, ok := s.Get(signals.LatencyP99)
	require.True(t, ok)
	assert.InEpsilon(t, 0.010, p99, 0.05, "counts since the restart, not a negative delta")
}

func TestScrapeSourceBadTargets(t *testing.T) {
	serve := func(ct, body string, code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(code)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	text := string(expfmt.NewFormat(expfmt.TypeTextPlain))
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)

	for _, tc := range []struct {
		name, url, want string
		gone            []signals.Key
	}{
		{"500", serve(text, "oops", 500), "HTTP 500", []signals.Key{signals.InFlight}},
		{"timeout", hang.URL, "deadline exceeded", []signals.Key{signals.InFlight}},
		{"missing", serve(text, "# TYPE other_metric gauge\nother_metric 1\n", 200), signals.MetricLatency + ": metric missing", []signals.Key{signals.InFlight}},
		{"not a histogram", serve(text, "# TYPE brownout_request_duration_seconds gauge\nbrownout_request_duration_seconds 1\n", 200),
			signals.MetricLatency + ": is a gauge, want a histogram", nil},
		{"NaN gauge", serve(text, "# TYPE brownout_requests_in_flight gauge\nbrownout_requests_in_flight NaN\n"+
			"# TYPE brownout_request_duration_seconds histogram\nbrownout_request_duration_seconds_bucket{le=\"+Inf\"} 1\nbrownout_request_duration_seconds_sum 1\nbrownout_request_duration_seconds_count 1\n", 200),
			signals.MetricInFlight + ": value NaN", []signals.Key{signals.InFlight}},
		{"Inf sum", serve(text, "# TYPE brownout_request_duration_seconds histogram\nbrownout_request_duration_seconds_bucket{le=\"+Inf\"} 1\nbrownout_request_duration_seconds_sum +Inf\nbrownout_request_duration_seconds_count 1\n", 200),
			signals.MetricLatency + ": count or sum", nil},
		{"garbage", serve(text, "{{{ not metrics", 200), "parse", []signals.Key{signals.InFlight}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := NewScrapeSource(ScrapeConfig{Targets: []string{tc.url}, Timeout: 100 * time.Millisecond})
			require.NoError(t, err)
			s, err := src.Snapshot(context.Background(), t0)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.url, "the error names the source")
			assert.Contains(t, err.Error(), tc.want)
			for _, k := range append(tc.gone, signals.LatencyP99) {
				assert.False(t, s.Has(k), "%s must be missing, not invented", k)
			}
		})
	}
}

func TestNewScrapeSourceRejectsBadConfig(t *testing.T) {
	_, err := NewScrapeSource(ScrapeConfig{})
	assert.ErrorContains(t, err, "no targets")
	_, err = NewScrapeSource(ScrapeConfig{Targets: []string{"ftp://x/metrics"}})
	assert.ErrorContains(t, err, "not an http(s) URL")
}

func TestHistQuantileClassicLikePromQL(t *testing.T) {
	h := hist{count: 100, bounds: []float64{0.1, 0.2, math.Inf(1)}, classic: []float64{50, 40, 10}}
	q, _ := h.quantile(0.5)
	assert.InDelta(t, 0.1, q, 1e-12)
	q, _ = h.quantile(0.7)
	assert.InDelta(t, 0.15, q, 1e-12)
	q, _ = h.quantile(0.99)
	assert.InDelta(t, 0.2, q, 1e-12, "in the +Inf bucket: the highest finite bound")
	_, ok := hist{}.quantile(0.5)
	assert.False(t, ok)
}

// TestHistReadsCollectorNativeBuckets: what Collector exports, read
// back, gives the recorded quantiles from its native buckets.
func TestHistReadsCollectorNativeBuckets(t *testing.T) {
	rec := signals.NewRecorder(signals.Config{})
	for i := range 1000 { // 900 requests of 20 ms and 100 of 700 ms
		d := 20 * time.Millisecond
		if i%10 == 0 {
			d = 700 * time.Millisecond
		}
		rec.Latency().Record(d)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(signals.NewCollector(rec, signals.CollectorOpts{Now: func() time.Time { return t0 }}))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == signals.MetricLatency })
	require.GreaterOrEqual(t, i, 0, "%s gathered", signals.MetricLatency)

	back, err := histFromDTO(mfs[i].GetMetric()[0].GetHistogram())
	require.NoError(t, err)
	require.True(t, back.native)
	p50, _ := back.quantile(0.5)
	p99, _ := back.quantile(0.99)
	assert.InEpsilon(t, 0.020, p50, 0.05)
	assert.InEpsilon(t, 0.700, p99, 0.05)
}

func FuzzParseExposition(f *testing.F) {
	// Seeds: a real exposition in both formats, and some broken ones.
	rec := signals.NewRecorder(signals.Config{})
	require.NoError(f, rec.Features("recs", "reviews"))
	for i := range 50 {
		var tl signals.RequestTally
		rec.BeginTally(&tl, context.Background())
		signals.Evaluated(&tl, "recs", i%2 == 0)
		rec.Arrive(signals.Class(i % 3))
		s := rec.Start(t0)
		d := time.Duration(i+1) * time.Millisecond
		rec.Done(signals.Class(i%3), s, s.Add(d), i%7 == 0, time.Time{})
		rec.EndTally(&tl, d)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(signals.NewCollector(rec, signals.CollectorOpts{}))
	mfs, err := reg.Gather()
	require.NoError(f, err)
	for _, ft := range []expfmt.FormatType{expfmt.TypeTextPlain, expfmt.TypeProtoDelim} {
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(ft))
		for _, mf := range mfs {
			require.NoError(f, enc.Encode(mf))
		}
		f.Add(buf.Bytes(), ft == expfmt.TypeProtoDelim)
	}
	f.Add([]byte("# TYPE brownout_request_duration_seconds histogram\nbrownout_request_duration_seconds_bucket{le=\"0.1\"} 5\nbrownout_request_duration_seconds_bucket{le=\"0.05\"} 3\n"), false)
	f.Add([]byte("brownout_requests_in_flight -Inf\n"), false)
	f.Fuzz(func(t *testing.T, body []byte, proto bool) {
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		if proto {
			format = expfmt.NewFormat(expfmt.TypeProtoDelim)
		}
		st, err := parseExposition(bytes.NewReader(body), format, 1<<20)
		if err != nil && !strings.Contains(err.Error(), signals.MetricLatency) && !strings.Contains(err.Error(), "brownout_") && !strings.Contains(err.Error(), "parse") {
			t.Fatalf("error names no metric: %v", err)
		}
		// Tallies kept are what the controller may read.
		checkTallyInvariants(t, st)
		// Whatever parsed must give finite quantiles.
		for _, q := range []float64{0.5, 0.99} {
			if v, ok := st.latency.quantile(q); ok && (math.IsNaN(v) || math.IsInf(v, 0) || v < 0) {
				t.Fatalf("quantile %v = %v", q, v)
			}
		}
	})
}

// TestScrapeOurOwnCollector is the daemon's fleet path: two instances
// export their recorders with Collector, ScrapeSource reads both, and the
// fleet p99 matches what the recorders measured.
func TestScrapeOurOwnCollector(t *testing.T) {
	now := t0
	var recs []*signals.Recorder
	var urls []string
	for i := range 2 {
		rec := signals.NewRecorder(signals.Config{})
		rec.SetGate(func() signals.GateReading {
			return signals.GateReading{Limit: 10, InFlight: float64(4 + 4*i), Queued: i}
		})
		recs, urls = append(recs, rec), append(urls, serveCollector(t, rec, func() time.Time { return now }))
	}
	src, err := NewScrapeSource(ScrapeConfig{Targets: urls})
	require.NoError(t, err)
	_, err = src.Snapshot(context.Background(), now)
	require.NoError(t, err)

	// Instance 0 is fast (20 ms), instance 1 slow (400 ms) for 1 % of its
	// requests: the fleet p99 comes from the merged buckets.
	all := signals.NewWindow(signals.WindowConfig{})
	all.Summary(now)
	for i := range 2000 {
		for j, rec := range recs {
			d := 20 * time.Millisecond
			if j == 1 && i%50 == 0 {
				d = 400 * time.Millisecond
			}
			rec.Arrive(signals.Default)
			wait := time.Duration(0)
			if j == 1 && i%4 == 0 {
				wait = time.Millisecond // a quarter of instance 1's requests queued
			}
			rec.Queued(signals.Default, wait, now)
			s := rec.Start(now)
			rec.Done(signals.Default, s, s.Add(d), false, time.Time{})
			all.Record(d)
		}
	}
	now = now.Add(5 * time.Second)
	snap, err := src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	got, ok := snap.Get(signals.LatencyP99)
	require.True(t, ok)
	want, _ := all.Quantile(now, 0.99)
	assert.InEpsilon(t, want.Seconds(), got, 0.06, "fleet p99 from native buckets: want %v", want)
	arr, _ := snap.Get(signals.ArrivalRate)
	assert.InDelta(t, 800, arr, 1e-6, "4000 arrivals in 5 s")
	busy, ok := snap.Get(signals.GateBusy)
	require.True(t, ok)
	assert.InDelta(t, 500.0/4000, busy, 1e-9, "the fleet's share of arrivals that found no room")
	u, _ := snap.Get(signals.GateUtilization)
	assert.InDelta(t, 12.0/20, u, 1e-9, "Σ in flight ÷ Σ limits")
	q, _ := snap.Get(signals.GateQueued)
	assert.Equal(t, 1.0, q)
}

// TestScrapeGateBusyOnlyFromGates: gate.busy is the share of the arrivals
// at a gate that found it full — an instance without a gate (the
// middleware alone, or behind another limiter whose refusals it counts)
// adds nothing to it, and a fleet with no gate has none.
func TestScrapeGateBusyOnlyFromGates(t *testing.T) {
	for _, gates := range []int{1, 0} {
		now := t0
		var recs []*signals.Recorder
		var urls []string
		for i := range 2 {
			rec := signals.NewRecorder(signals.Config{})
			if i < gates {
				rec.SetGate(func() signals.GateReading { return signals.GateReading{Limit: 10, InFlight: 4} })
			}
			recs, urls = append(recs, rec), append(urls, serveCollector(t, rec, func() time.Time { return now }))
		}
		src, err := NewScrapeSource(ScrapeConfig{Targets: urls})
		require.NoError(t, err)
		_, err = src.Snapshot(context.Background(), now)
		require.NoError(t, err)
		for i := range 100 {
			// Instance 0: a quarter of its arrivals wait at its gate.
			// Instance 1: another limiter refuses a fifth of them.
			recs[0].Arrive(signals.Default)
			wait := time.Duration(0)
			if i%4 == 0 {
				wait = time.Millisecond
			}
			recs[0].Queued(signals.Default, wait, now)
			recs[0].Done(signals.Default, now, now.Add(10*time.Millisecond), false, time.Time{})
			recs[1].Arrive(signals.Default)
			if i%5 == 0 {
				recs[1].Reject(signals.Default, signals.ReasonConcurrency)
				continue
			}
			recs[1].Done(signals.Default, now, now.Add(10*time.Millisecond), false, time.Time{})
		}
		now = now.Add(5 * time.Second)
		snap, err := src.Snapshot(context.Background(), now)
		require.NoError(t, err)
		busy, ok := snap.Get(signals.GateBusy)
		if gates == 0 {
			assert.False(t, ok, "no gate in the fleet: no gate.busy (it read %v)", busy)
			continue
		}
		require.True(t, ok)
		assert.InDelta(t, 25.0/100, busy, 1e-9, "the gated instance's arrivals alone")
		rr, _ := snap.Get(signals.RejectRatio)
		assert.InDelta(t, 20.0/200, rr, 1e-9, "the other limiter's refusals still count as refusals")
	}
}

// TestScrapeGateBusyNotFromAGateThatAppeared: an instance whose gate
// appeared between two readings had none for the interval's arrivals —
// another limiter's refusals in it are no room at a gate.
func TestScrapeGateBusyNotFromAGateThatAppeared(t *testing.T) {
	now := t0
	rec := signals.NewRecorder(signals.Config{})
	src, err := NewScrapeSource(ScrapeConfig{Targets: []string{serveCollector(t, rec, func() time.Time { return now })}})
	require.NoError(t, err)
	_, err = src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	for i := range 100 {
		rec.Arrive(signals.Default)
		if i%5 == 0 {
			rec.Reject(signals.Default, signals.ReasonConcurrency)
			continue
		}
		rec.Done(signals.Default, now, now.Add(10*time.Millisecond), false, time.Time{})
	}
	rec.SetGate(func() signals.GateReading { return signals.GateReading{Limit: 10, InFlight: 4} })
	now = now.Add(5 * time.Second)
	snap, err := src.Snapshot(context.Background(), now)
	require.NoError(t, err)
	busy, ok := snap.Get(signals.GateBusy)
	assert.False(t, ok, "no arrival met the gate: no gate.busy (it read %v)", busy)
	rr, _ := snap.Get(signals.RejectRatio)
	assert.InDelta(t, 0.2, rr, 1e-9, "the refusals still count as refusals")
}

// serveCollector serves rec's metrics (signals.Collector, its clock now;
// nil: the wall clock) on 127.0.0.1 until the test ends, and returns the
// server's URL.
func serveCollector(t *testing.T, rec *signals.Recorder, now func() time.Time) string {
	t.Helper()
	srv := httptest.NewServer(collectorHandler(rec, now))
	t.Cleanup(srv.Close)
	return srv.URL
}

// collectorHandler serves rec's Collector on /metrics, as an app does.
func collectorHandler(rec *signals.Recorder, now func() time.Time) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(signals.NewCollector(rec, signals.CollectorOpts{Now: now}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

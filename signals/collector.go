package signals

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Metric names exported by Collector and read back by package fleet's
// ScrapeSource and PromQLSource.
const (
	MetricLatency       = "brownout_request_duration_seconds"
	MetricSojourn       = "brownout_queue_sojourn_seconds"
	MetricSojournMin    = "brownout_queue_sojourn_min_seconds"
	MetricStanding      = "brownout_queue_standing"
	MetricInFlight      = "brownout_requests_in_flight"
	MetricArrived       = "brownout_requests_arrived_total"
	MetricCompleted     = "brownout_requests_completed_total"
	MetricFailed        = "brownout_requests_failed_total"
	MetricGood          = "brownout_requests_good_total"
	MetricRejected      = "brownout_requests_rejected_total"
	MetricWaited        = "brownout_requests_waited_total"
	MetricGateLimit     = "brownout_gate_limit"
	MetricGateInFlight  = "brownout_gate_in_flight"
	MetricGateQueued    = "brownout_gate_queued"
	MetricLatencyWindow = "brownout_request_duration_window_seconds"
	MetricLatencyMax    = "brownout_request_duration_window_max_seconds"
	MetricClamped       = "brownout_samples_clamped_total"

	// Feature tallies (see Tally), by feature and state: on and off
	// count and time completed requests that marked the feature,
	// unattributed counts evaluations no request's tally saw (requests
	// and service time only for on and off).
	MetricFeatureRequests       = "brownout_feature_requests_total"
	MetricFeatureServiceSum     = "brownout_feature_service_seconds_total"
	MetricFeatureServiceSquares = "brownout_feature_service_seconds_squared_total"

	// The same for every tallied request, features or none (see
	// Snapshot.Work): with the arrivals, the work the load brings.
	MetricWorkRequests = "brownout_work_requests_total"
	MetricWorkSum      = "brownout_work_seconds_total"
	MetricWorkSquares  = "brownout_work_seconds_squared_total"
)

// DefaultBuckets returns the classic bucket bounds (seconds) of the
// exported histograms: web latencies from 1 ms to a minute. Each call
// returns a new slice.
func DefaultBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
}

// NativeSchema is the schema of the exported native histograms: 16 buckets
// per power of two, growth factor 2^(1/16) ≈ 1.044.
const NativeSchema = 4

// CollectorOpts configures a Collector. The zero value uses DefaultBuckets
// and time.Now.
type CollectorOpts struct {
	// Buckets are the classic bucket upper bounds in seconds, ascending.
	Buckets []float64
	// ConstLabels are added to every metric (e.g. instance or service).
	ConstLabels prometheus.Labels
	// Now returns the current time. Default time.Now.
	Now func() time.Time
}

// Collector exports a Recorder's signals under brownout_ names. Histograms
// carry both classic and native (schema 4) buckets. They are built at
// scrape time from the recorder's cumulative log-linear counts, so the
// request path pays nothing for them; each log-linear bucket is credited
// whole to the classic or native bucket holding its midpoint, so a bucket
// boundary is placed within one log-linear bucket (≤ 3.1 %) of its label and
// _sum is within 1.6 % (it is computed from midpoints).
//
// Register it on a registry you own: reg.MustRegister(signals.NewCollector(rec, signals.CollectorOpts{})).
// It is safe for concurrent use.
type Collector struct {
	rec     *Recorder
	buckets []float64
	now     func() time.Time
	created time.Time

	latency, sojourn, sojournMin, standing, inFlight               *prometheus.Desc
	arrived, completed, failed, good, rejected, clamp              *prometheus.Desc
	window, windowMax, waited, gateLimit, gateInFlight, gateQueued *prometheus.Desc
	featRequests, featSum, featSquares                             *prometheus.Desc
	workRequests, workSum, workSquares                             *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector for rec.
func NewCollector(rec *Recorder, opts CollectorOpts) *Collector {
	b := slices.Clone(opts.Buckets) // never the caller's slice
	if len(b) == 0 {
		b = DefaultBuckets()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	cl := opts.ConstLabels
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	return &Collector{
		rec: rec, buckets: slices.Clone(b), now: now, created: now(),
		latency:      d(MetricLatency, "Time from a request's arrival to its end, as its client sees it: an admission gate's wait included (brownout_queue_sojourn_seconds has the wait alone)."),
		sojourn:      d(MetricSojourn, "Time a request waited in an admission queue before its work started.", "class"),
		sojournMin:   d(MetricSojournMin, "Minimum queue sojourn over the last CoDel interval (absent when the interval saw no request).", "class"),
		standing:     d(MetricStanding, "1 while the class's queue is standing (CoDel): the admission gate's own decision where one is registered, else sojourn above target for an interval.", "class"),
		inFlight:     d(MetricInFlight, "Requests whose work has started and not ended."),
		arrived:      d(MetricArrived, "Requests that arrived.", "class"),
		completed:    d(MetricCompleted, "Requests whose work ended.", "class"),
		failed:       d(MetricFailed, "Completed requests that failed (5xx, error or panic).", "class"),
		good:         d(MetricGood, "Completed requests that did not fail and met their deadline (goodput).", "class"),
		rejected:     d(MetricRejected, "Requests refused before their work started.", "class", "reason"),
		clamp:        d(MetricClamped, "Recorded durations that were out of range (not positive, or over 68.7 s) and were clamped.", "signal"),
		window:       d(MetricLatencyWindow, "Request latency over the recorder's sliding window: a summary (quantiles 0.5, 0.9, 0.99, 0.999; sum and count over the window)."),
		windowMax:    d(MetricLatencyMax, "The longest request latency in the recorder's sliding window."),
		waited:       d(MetricWaited, "Requests that found no room at the admission gate and queued before their work started.", "class"),
		gateLimit:    d(MetricGateLimit, "The admission gate's adaptive concurrency limit, in cost units (absent without a gate)."),
		gateInFlight: d(MetricGateInFlight, "Cost admitted by the gate and not done, in cost units (absent without a gate)."),
		gateQueued:   d(MetricGateQueued, "Requests waiting at the admission gate (absent without a gate)."),
		featRequests: d(MetricFeatureRequests, "Completed requests that rendered the feature (state on) or evaluated it and did not (off); "+
			"unattributed: evaluations of the feature outside any request's tally.", "feature", "state"),
		featSum: d(MetricFeatureServiceSum, "Service time (admission to completion) of the requests that rendered the feature (on) or did not (off), summed.",
			"feature", "state"),
		featSquares: d(MetricFeatureServiceSquares, "Squares of the service times in "+MetricFeatureServiceSum+", summed (seconds²): "+
			"with the count and the sum, the variance, for the standard error of a feature's cost.", "feature", "state"),
		workRequests: d(MetricWorkRequests, "Completed requests with a tally (every request through the middlewares once a feature is registered), whether they evaluated a feature or not."),
		workSum:      d(MetricWorkSum, "Service time (admission to completion, or the time held where the app reports it) of the requests in "+MetricWorkRequests+", summed."),
		workSquares:  d(MetricWorkSquares, "Squares of the service times in "+MetricWorkSum+", summed (seconds²)."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.latency, c.sojourn, c.sojournMin, c.standing, c.inFlight,
		c.arrived, c.completed, c.failed, c.good, c.rejected, c.clamp, c.window, c.windowMax, c.waited,
		c.gateLimit, c.gateInFlight, c.gateQueued, c.featRequests, c.featSum, c.featSquares,
		c.workRequests, c.workSum, c.workSquares} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	r := c.rec
	r.latency.Cumulative(now, func(n *[NumBuckets]uint64, sum float64, count uint64) {
		ch <- c.histogram(c.latency, n, sum, count)
	})
	clamped := r.latency.Clamped()
	gr, gated := r.Gate()
	for cl := range Class(NumClasses) {
		sj := r.sojourn[cl]
		sj.w.Cumulative(now, func(n *[NumBuckets]uint64, sum float64, count uint64) {
			ch <- c.histogram(c.sojourn, n, sum, count, cl.String())
		})
		clamped += sj.w.Clamped()
		st := sj.Stats(now)
		if st.MinOK {
			ch <- prometheus.MustNewConstMetric(c.sojournMin, prometheus.GaugeValue, st.Min.Seconds(), cl.String())
		}
		if gated { // the gate decides; the tracker only estimates
			st.Standing = gr.Standing[cl]
		}
		ch <- prometheus.MustNewConstMetric(c.standing, prometheus.GaugeValue, b2f(st.Standing), cl.String())
	}
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(r.counters.InFlight()))
	counts := r.counters.Load()
	for cl, cc := range counts {
		name := Class(cl).String()
		ch <- prometheus.MustNewConstMetric(c.arrived, prometheus.CounterValue, float64(cc.Arrived), name)
		ch <- prometheus.MustNewConstMetric(c.completed, prometheus.CounterValue, float64(cc.Completed), name)
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(cc.Failed), name)
		ch <- prometheus.MustNewConstMetric(c.good, prometheus.CounterValue, float64(cc.Good), name)
		ch <- prometheus.MustNewConstMetric(c.waited, prometheus.CounterValue, float64(cc.Waited), name)
		for why, n := range cc.Rejected {
			ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(n), name, Reason(why).String())
		}
	}
	ch <- prometheus.MustNewConstMetric(c.clamp, prometheus.CounterValue, float64(clamped), "duration")
	if g := gr; gated {
		ch <- prometheus.MustNewConstMetric(c.gateLimit, prometheus.GaugeValue, g.Limit)
		ch <- prometheus.MustNewConstMetric(c.gateInFlight, prometheus.GaugeValue, g.InFlight)
		ch <- prometheus.MustNewConstMetric(c.gateQueued, prometheus.GaugeValue, float64(g.Queued))
	}
	for _, t := range r.Tallies() {
		for _, m := range []struct {
			state string
			m     Moments
		}{{"on", t.On}, {"off", t.Off}} {
			ch <- prometheus.MustNewConstMetric(c.featRequests, prometheus.CounterValue, float64(m.m.N), t.Feature, m.state)
			ch <- prometheus.MustNewConstMetric(c.featSum, prometheus.CounterValue, m.m.Sum, t.Feature, m.state)
			ch <- prometheus.MustNewConstMetric(c.featSquares, prometheus.CounterValue, m.m.SumSq, t.Feature, m.state)
		}
		ch <- prometheus.MustNewConstMetric(c.featRequests, prometheus.CounterValue, float64(t.Unattributed), t.Feature, "unattributed")
	}
	if r.Tallying() {
		w := r.Work()
		ch <- prometheus.MustNewConstMetric(c.workRequests, prometheus.CounterValue, float64(w.N))
		ch <- prometheus.MustNewConstMetric(c.workSum, prometheus.CounterValue, w.Sum)
		ch <- prometheus.MustNewConstMetric(c.workSquares, prometheus.CounterValue, w.SumSq)
	}
	if s := r.latency.Summary(now); s.Count > 0 {
		ch <- prometheus.MustNewConstSummary(c.window, uint64(s.Count), s.Mean.Seconds()*float64(s.Count), map[float64]float64{
			0.5: s.P50.Seconds(), 0.9: s.P90.Seconds(), 0.99: s.P99.Seconds(), 0.999: s.P999.Seconds()})
		ch <- prometheus.MustNewConstMetric(c.windowMax, prometheus.GaugeValue, s.Max.Seconds())
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// histogram converts cumulative log-linear counts into a metric with classic
// and native buckets.
func (c *Collector) histogram(desc *prometheus.Desc, n *[NumBuckets]uint64, sumNs float64, count uint64, labels ...string) prometheus.Metric {
	classic, native, zero := ExportBuckets(n, c.buckets)
	h := &dto.Histogram{
		SampleCount:      proto.Uint64(count),
		SampleSum:        proto.Float64(sumNs / 1e9),
		Schema:           proto.Int32(NativeSchema),
		ZeroThreshold:    proto.Float64(0),
		ZeroCount:        proto.Uint64(zero),
		CreatedTimestamp: timestamppb.New(c.created),
	}
	var cum uint64
	for j, ub := range c.buckets {
		cum += classic[j]
		h.Bucket = append(h.Bucket, &dto.Bucket{CumulativeCount: proto.Uint64(cum), UpperBound: proto.Float64(ub)})
	}
	h.PositiveSpan, h.PositiveDelta = nativeSpans(native)
	if len(h.PositiveSpan) == 0 && zero == 0 {
		// An empty native histogram needs a no-op span so that parsers
		// tell it from a classic-only one.
		h.PositiveSpan = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	// The const histogram supplies the label pairs; Write swaps in ours.
	base, err := prometheus.NewConstHistogram(desc, count, sumNs/1e9, nil, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(desc, err)
	}
	return constHistogram{Metric: base, h: h}
}

// ExportBuckets converts cumulative log-linear counts (as
// Window.Cumulative gives them) into classic buckets (a count per bound of
// bounds, not cumulative; values above the last bound are in none) and
// native buckets at NativeSchema, with the zero bucket apart. Each
// log-linear bucket is credited whole to the bucket holding its midpoint.
// Collector and package fleet's Pusher both export through it, so that a
// scrape and a push of the same Recorder carry the same buckets.
func ExportBuckets(n *[NumBuckets]uint64, bounds []float64) (classic []uint64, native map[int]uint64, zero uint64) {
	classic = make([]uint64, len(bounds))
	native = map[int]uint64{}
	for i, k := range n {
		if k == 0 {
			continue
		}
		if i == 0 {
			zero += k // clamped non-positive durations
		}
		mid := bucketMid(i) / 1e9
		if j, _ := slices.BinarySearch(bounds, mid); j < len(classic) {
			classic[j] += k
		}
		if i > 0 {
			native[nativeIndex(mid)] += k
		}
	}
	return classic, native, zero
}

// nativeIndex returns the native-histogram bucket of x > 0 at NativeSchema:
// bucket i covers (2^((i-1)/16), 2^(i/16)].
func nativeIndex(x float64) int {
	return int(math.Ceil(math.Log2(x) * (1 << NativeSchema)))
}

func nativeSpans(b map[int]uint64) ([]*dto.BucketSpan, []int64) {
	keys := make([]int, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var spans []*dto.BucketSpan
	var deltas []int64
	var prevCount int64
	for i, k := range keys {
		if i == 0 || k != keys[i-1]+1 {
			off := k
			if i > 0 {
				off = k - keys[i-1] - 1
			}
			spans = append(spans, &dto.BucketSpan{Offset: proto.Int32(int32(off)), Length: proto.Uint32(0)})
		}
		*spans[len(spans)-1].Length++
		cnt := int64(b[k])
		deltas = append(deltas, cnt-prevCount)
		prevCount = cnt
	}
	return spans, deltas
}

// constHistogram is a histogram metric written from a prepared dto.
type constHistogram struct {
	prometheus.Metric
	h *dto.Histogram
}

func (m constHistogram) Write(out *dto.Metric) error {
	if err := m.Metric.Write(out); err != nil {
		return err
	}
	out.Histogram = m.h
	return nil
}

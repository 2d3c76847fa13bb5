package signals

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gatherOne(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("%s not gathered", name)
	return nil
}

func TestCollectorExportsHistogramsAndCounters(t *testing.T) {
	rec := NewRecorder(Config{})
	now := t0
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(rec, CollectorOpts{Now: func() time.Time { return now }}))

	// 900 requests of 20 ms and 100 of 700 ms, one sheddable rejection.
	for i := range 1000 {
		rec.Arrive(Default)
		s := rec.Start(now)
		d := 20 * time.Millisecond
		if i%10 == 0 {
			d = 700 * time.Millisecond
		}
		rec.Done(Default, s, s.Add(d), i%100 == 0, time.Time{})
	}
	rec.Reject(Sheddable, ReasonCoDel)
	rec.Queued(Critical, 30*time.Millisecond, now)
	rec.Latency().Record(-time.Second) // clamped

	lint, err := testutil.CollectAndLint(NewCollector(rec, CollectorOpts{}))
	require.NoError(t, err)
	assert.Empty(t, lint, "metric lint")

	h := gatherOne(t, reg, MetricLatency).GetMetric()[0].GetHistogram()
	assert.Equal(t, uint64(1001), h.GetSampleCount())
	assert.InEpsilon(t, 900*0.020+100*0.700, h.GetSampleSum(), 0.02)
	cum := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	assert.Equal(t, uint64(1), cum[0.001], "the clamped sample is at 0")
	assert.Equal(t, uint64(901), cum[0.025])
	assert.Equal(t, uint64(901), cum[0.5])
	assert.Equal(t, uint64(1001), cum[1])
	assert.Equal(t, int32(NativeSchema), h.GetSchema())
	assert.Equal(t, uint64(1), h.GetZeroCount())
	// The native buckets add up to the count, less the zero bucket.
	var nat int64
	var c int64
	for _, d := range h.GetPositiveDelta() {
		c += d
		nat += c
	}
	assert.Equal(t, int64(1000), nat)

	assert.Equal(t, 1.0, testutil.ToFloat64(rejectedCounter(t, reg, "sheddable", "codel")))
	txt, err := testutil.CollectAndFormat(NewCollector(rec, CollectorOpts{}), expfmt.TypeTextPlain, MetricFailed)
	require.NoError(t, err)
	assert.Contains(t, string(txt), `brownout_requests_failed_total{class="default"} 10`)
}

func rejectedCounter(t *testing.T, reg *prometheus.Registry, class, reason string) prometheus.Collector {
	mf := gatherOne(t, reg, MetricRejected)
	for _, m := range mf.GetMetric() {
		if label(m, "class") == class && label(m, "reason") == reason {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
			c.Add(m.GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("no rejected{%s,%s}", class, reason)
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestNativeIndex(t *testing.T) {
	// Bucket i covers (2^((i-1)/16), 2^(i/16)].
	assert.Equal(t, 0, nativeIndex(1))
	assert.Equal(t, 1, nativeIndex(math.Pow(2, 0.5/16)))
	assert.Equal(t, -16, nativeIndex(0.5))
	assert.Equal(t, 16, nativeIndex(2))
	spans, deltas := nativeSpans(map[int]uint64{-2: 3, -1: 1, 5: 2})
	require.Len(t, spans, 2)
	assert.Equal(t, int32(-2), spans[0].GetOffset())
	assert.Equal(t, uint32(2), spans[0].GetLength())
	assert.Equal(t, int32(5), spans[1].GetOffset(), "gap from -1 to 5")
	assert.Equal(t, []int64{3, -2, 1}, deltas)
	assert.True(t, strings.HasPrefix(MetricLatency, "brownout_"))
}

// TestDefaultBucketsAreCopies: changing the returned slice changes neither
// the next call nor a collector made afterwards.
func TestDefaultBucketsAreCopies(t *testing.T) {
	b := DefaultBuckets()
	want := append([]float64(nil), b...)
	b[0], b[len(b)-1] = 7, 0
	assert.Equal(t, want, DefaultBuckets())
	assert.Equal(t, want, NewCollector(NewRecorder(Config{}), CollectorOpts{}).buckets)
}

// With a gate registered, standing is the gate's CoDel decision — in the
// snapshot and in brownout_queue_standing — whatever the sojourn tracker
// estimates; one source of truth.
func TestStandingIsTheGatesDecision(t *testing.T) {
	rec := NewRecorder(Config{})
	now := t0
	for i := range 40 { // every request waits 300 ms for 4 s: the tracker says standing
		at := now.Add(time.Duration(i) * 100 * time.Millisecond)
		rec.Arrive(Default)
		rec.Queued(Default, 300*time.Millisecond, at)
	}
	now = now.Add(4 * time.Second)
	require.True(t, rec.Snapshot(now).Standing, "no gate: the tracker's estimate")

	var gate GateReading
	rec.SetGate(func() GateReading { return gate })
	assert.False(t, rec.Snapshot(now).Standing, "the gate says no queue stands")
	c := NewCollector(rec, CollectorOpts{Now: func() time.Time { return now }})
	txt, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, MetricStanding)
	require.NoError(t, err)
	assert.Contains(t, string(txt), `brownout_queue_standing{class="default"} 0`)

	gate.Standing[Sheddable] = true
	assert.True(t, rec.Snapshot(now).Standing)
	txt, err = testutil.CollectAndFormat(c, expfmt.TypeTextPlain, MetricStanding)
	require.NoError(t, err)
	assert.Contains(t, string(txt), `brownout_queue_standing{class="sheddable"} 1`)
	assert.Contains(t, string(txt), `brownout_queue_standing{class="default"} 0`)
}

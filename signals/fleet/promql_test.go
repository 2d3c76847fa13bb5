package fleet

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
)

// every5ms calls fn every 5 ms with the call's count and time, in a
// goroutine, until ctx ends: an app's traffic while a real Prometheus
// scrapes it.
func every5ms(ctx context.Context, fn func(n int, now time.Time)) {
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				fn(n, now)
			}
		}
	}()
}

// startPrometheus runs a real Prometheus server on 127.0.0.1 that scrapes
// target every second (internal/testsrv).
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	return testsrv.StartPrometheus(t, target)
}

func TestPromQLSourceAgainstRealPrometheus(t *testing.T) {
	rec := signals.NewRecorder(signals.Config{})
	rec.SetGate(func() signals.GateReading { return signals.GateReading{Limit: 8, InFlight: 2} })
	reg := prometheus.NewRegistry()
	reg.MustRegister(signals.NewCollector(rec, signals.CollectorOpts{}))
	app := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(app.Close)

	// Traffic: 95 % at 20 ms, 5 % at 300 ms, until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	every5ms(ctx, func(i int, now time.Time) {
		rec.Arrive(signals.Default)
		wait := time.Duration(0)
		if i%10 == 0 {
			wait = time.Millisecond // a tenth found no room
		}
		rec.Queued(signals.Default, wait, now)
		s := rec.Start(now)
		d := 20 * time.Millisecond
		if i%20 == 0 {
			d = 300 * time.Millisecond
		}
		rec.Done(signals.Default, s, s.Add(d), false, time.Time{})
	})

	base := startPrometheus(t, app.Listener.Addr().String())
	qs := DefaultQueries("10s")
	qs[signals.SojournMax] = "sum(brownout_no_such_metric)"           // no data
	qs[signals.LatencyMax] = `brownout_requests_arrived_total`        // three series
	qs[signals.LatencyP90] = `histogram_quantile(0.9, vector(1) / 0)` // NaN / no buckets
	src, err := NewPromQLSource(PromQLConfig{Address: base, Queries: qs})
	require.NoError(t, err)

	var snap signals.Snapshot
	deadline := time.Now().Add(60 * time.Second)
	for {
		snap, err = src.Snapshot(ctx, time.Now())
		if snap.Has(signals.LatencyP99) && snap.Has(signals.LatencyP50) && snap.Has(signals.ArrivalRate) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no latency from Prometheus after 60 s: %v", err)
		}
		time.Sleep(500 * time.Millisecond) // waiting for real scrapes
	}
	p99, _ := snap.Get(signals.LatencyP99)
	assert.GreaterOrEqual(t, p99, 0.25, "p99 lies in the (0.25, 0.5] bucket")
	assert.LessOrEqual(t, p99, 0.5)
	p50, _ := snap.Get(signals.LatencyP50)
	assert.InDelta(t, 0.0175, p50, 0.0075, "p50 lies in the (0.01, 0.025] bucket")
	arr, _ := snap.Get(signals.ArrivalRate)
	assert.Greater(t, arr, 10.0, "arrivals per second")
	busy, ok := snap.Get(signals.GateBusy)
	assert.True(t, ok, "gate.busy from the default queries")
	assert.InDelta(t, 0.1, busy, 0.03)
	u, _ := snap.Get(signals.GateUtilization)
	assert.Equal(t, 0.25, u)

	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, base, "errors name the server")
	assert.Contains(t, msg, "sojourn.max (sum(brownout_no_such_metric)): no data")
	assert.Contains(t, msg, "latency.max (brownout_requests_arrived_total): 3 series")
	assert.False(t, snap.Has(signals.SojournMax))
	assert.False(t, snap.Has(signals.LatencyMax))
	assert.False(t, snap.Has(signals.LatencyP90), "NaN is missing, not a value")

	// A server that is down: every signal missing, one error per signal.
	down, err := NewPromQLSource(PromQLConfig{Address: "http://127.0.0.1:1", Timeout: time.Second})
	require.NoError(t, err)
	snap, err = down.Snapshot(context.Background(), time.Now())
	require.Error(t, err)
	assert.True(t, snap.Empty())
}

// TestPromQLSourceBoundsAnswers: a server that answers without end (a
// vector's start, then spaces) fails the query once the answer passes
// the source's bound (16 MiB by default, as a scrape's), and no more of it
// is read — the period's counts' query too.
func TestPromQLSourceBoundsAnswers(t *testing.T) {
	const bound = 16 << 20
	var wrote, queries atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
		pad := bytes.Repeat([]byte(" "), 1<<20)
		for range 4 * bound >> 20 {
			if _, err := w.Write(pad); err != nil {
				return
			}
			wrote.Add(int64(len(pad)))
		}
	}))
	defer srv.Close()
	src, err := NewPromQLSource(PromQLConfig{Address: srv.URL, Queries: map[signals.Key]string{signals.LatencyP99: "up"}, Timeout: time.Minute})
	require.NoError(t, err)
	_, err = src.Snapshot(context.Background(), time.Now())
	assert.ErrorContains(t, err, "answer larger than 16777216 bytes")
	assert.ErrorContains(t, err, "the counts of a 30s period: ")
	require.Equal(t, int64(2), queries.Load(), "p99 and the period's counts")
	assert.Less(t, wrote.Load(), 2*int64(2*bound), "the source stopped reading each at its bound")
}

// TestDefaultQueriesForSelectEveryMetric: with a selector, every metric
// of every default query selects with it (one service's fleet where a
// Prometheus server scrapes several), and a metric's own matchers stay;
// without, the queries are DefaultQueries'.
func TestDefaultQueriesForSelectEveryMetric(t *testing.T) {
	metric := regexp.MustCompile(`brownout_[a-z_]+(\{[^}]*\})?`)
	for k, q := range DefaultQueriesFor("30s", `service="shop",env!="dev"`) {
		ms := metric.FindAllStringSubmatch(q, -1)
		require.NotEmpty(t, ms, "%s: %s", k, q)
		for _, m := range ms {
			assert.True(t, strings.HasSuffix(m[1], `service="shop",env!="dev"}`), "%s: %s selects with the selector: %s", k, m[0], q)
		}
		if k == signals.RejectRatio {
			assert.Contains(t, q, `{reason=~"max_wait|codel|deadline|concurrency",service="shop",env!="dev"}`)
		}
	}
	assert.Equal(t, DefaultQueries("1m"), DefaultQueriesFor("1m", ""))
}

// TestPromQLGateBusyOnlyFromGates: against a real Prometheus scraping two
// instances — one with a gate, a tenth of whose arrivals find no room;
// one without, behind another limiter that refuses a fifth — the default
// gate.busy is the gated instance's share alone, and over the gateless
// instance alone (a selector) there is none. The refusals count in
// reject.ratio either way.
func TestPromQLGateBusyOnlyFromGates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var addrs []string
	for i := range 2 {
		rec := signals.NewRecorder(signals.Config{})
		if i == 0 {
			rec.SetGate(func() signals.GateReading { return signals.GateReading{Limit: 8, InFlight: 2} })
		}
		addrs = append(addrs, strings.TrimPrefix(serveCollector(t, rec, nil), "http://"))
		every5ms(ctx, func(n int, now time.Time) {
			rec.Arrive(signals.Default)
			if i == 0 {
				wait := time.Duration(0)
				if n%10 == 0 {
					wait = time.Millisecond
				}
				rec.Queued(signals.Default, wait, now)
			} else if n%5 == 0 {
				rec.Reject(signals.Default, signals.ReasonConcurrency)
				return
			}
			s := rec.Start(now)
			rec.Done(signals.Default, s, s.Add(20*time.Millisecond), false, time.Time{})
		})
	}
	base := testsrv.StartPrometheus(t, addrs...)
	fleetSrc, err := NewPromQLSource(PromQLConfig{Address: base, Queries: DefaultQueriesFor("10s", "")})
	require.NoError(t, err)
	gateless, err := NewPromQLSource(PromQLConfig{Address: base, Queries: DefaultQueriesFor("10s", fmt.Sprintf(`instance=%q`, addrs[1]))})
	require.NoError(t, err)
	var all, one signals.Snapshot
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) { // waiting for real scrapes
		// The gateless instance first: once its rates are there (two of
		// its scrapes in the range), the fleet's query after it has them
		// too. Asked the other way round, a second scrape landing between
		// the two queries left the fleet's reject ratio at the gated
		// instance's zero refusals alone, while the loop ended on the
		// gateless one's.
		one, _ = gateless.Snapshot(ctx, time.Now())
		all, _ = fleetSrc.Snapshot(ctx, time.Now())
		if all.Has(signals.GateBusy) && all.Has(signals.RejectRatio) && one.Has(signals.RejectRatio) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no gate.busy and reject.ratio from Prometheus after 60 s")
		}
	}
	busy, _ := all.Get(signals.GateBusy)
	assert.InDelta(t, 0.1, busy, 0.03, "the gated instance's share alone")
	rr, _ := all.Get(signals.RejectRatio)
	assert.InDelta(t, 0.1, rr, 0.03, "the other limiter's refusals, over both instances' arrivals")
	assert.False(t, one.Has(signals.GateBusy), "no gate among the instances selected")
	rr, _ = one.Get(signals.RejectRatio)
	assert.InDelta(t, 0.2, rr, 0.03)
}

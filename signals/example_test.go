package signals_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/brownout/brownout/signals"
)

// A service records its requests with the middleware and reads a snapshot
// each controller tick.
func ExampleMiddleware() {
	rec := signals.NewRecorder(signals.Config{})
	now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(40 * time.Millisecond); return now }
	// The callers are our own services: their X-Priority is believed.
	h := signals.Middleware(rec, signals.MiddlewareConfig{Now: clock, TrustPriority: true})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	for range 100 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(signals.PriorityHeader, "critical")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	snap := rec.Snapshot(now)
	p99, _ := snap.Duration(signals.LatencyP99)
	_, ok := snap.Get(signals.SojournMin)
	fmt.Println("p99:", p99.Round(time.Millisecond))
	fmt.Println("critical completed:", snap.Classes[signals.Critical].Completed)
	fmt.Println("sojourn measured:", ok)
	// Output:
	// p99: 40ms
	// critical completed: 100
	// sojourn measured: false
}

// A handler behind failsafe-go's failsafehttp, whose adaptive limiter,
// bulkhead and circuit breaker refuse with 429, and with no per-client rate
// limit inside: its 429s are refusals for overload too, so that
// reject.ratio sees them.
func ExampleMiddleware_refused() {
	rec := signals.NewRecorder(signals.Config{})
	refused := func(status int, h http.Header) (signals.Reason, bool) {
		if status == http.StatusTooManyRequests {
			return signals.ReasonConcurrency, true
		}
		return signals.RefusedUnavailable(status, h) // 503
	}
	n := 0
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n++; n%4 == 0 { // stands for failsafehttp.NewHandler(h, limiter)
			http.Error(w, "adaptive limit exceeded", http.StatusTooManyRequests)
		}
	})
	h := signals.Middleware(rec, signals.MiddlewareConfig{Refused: refused})(limited)
	for range 100 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	ratio, _ := rec.Snapshot(time.Now()).Get(signals.RejectRatio)
	fmt.Printf("reject.ratio: %.2f\n", ratio)
	// Output:
	// reject.ratio: 0.25
}

// Feature tallies: the recommendations render for some requests and not
// others (here every other one; in production the provider's answer per
// user marks them), and a snapshot contrasts the two groups' service
// time.
func ExampleSkipped() {
	rec := signals.NewRecorder(signals.Config{})
	if err := rec.Features("recommendations"); err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	i := 0
	h := signals.Middleware(rec, signals.MiddlewareConfig{Now: clock})(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			i++
			if i%2 == 0 {
				now = now.Add(30 * time.Millisecond) // rendering costs 30 ms
				signals.Rendered(r.Context(), "recommendations")
			} else {
				signals.Skipped(r.Context(), "recommendations")
			}
			now = now.Add(20 * time.Millisecond)
		}))
	for range 100 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	t := rec.Snapshot(now).Tallies[0]
	fmt.Printf("%s: on %d × %.0f ms, off %d × %.0f ms\n", t.Feature,
		t.On.N, t.On.Mean()*1000, t.Off.N, t.Off.Mean()*1000)
	// Output:
	// recommendations: on 50 × 50 ms, off 50 × 20 ms
}

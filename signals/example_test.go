package signals_test

import (
	"context"
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

// An app that cannot be scraped pushes its Recorder to the daemon's
// PushSource, which merges the instances of the fleet as a scrape does.
func ExamplePushSource() {
	src := signals.NewPushSource(signals.PushConfig{})
	srv := httptest.NewServer(src) // brownoutd: POST /v1/signals, behind its token check
	defer srv.Close()

	ctx := context.Background()
	var recs []*signals.Recorder
	var pushers []*signals.Pusher
	for _, id := range []string{"shop-1", "shop-2"} {
		rec := signals.NewRecorder(signals.Config{})
		p, err := signals.NewPusher(rec, signals.PusherConfig{URL: srv.URL + "/v1/signals", Instance: id})
		if err != nil {
			panic(err)
		}
		recs, pushers = append(recs, rec), append(pushers, p)
	}
	pushAll := func() { // p.Run(ctx) pushes every Interval
		for _, p := range pushers {
			if err := p.Push(ctx); err != nil {
				panic(err)
			}
		}
	}
	pushAll()
	// shop-1 is fast; shop-2 has a slow tail: 4 % of its requests, 2 % of
	// the fleet's. The fleet's p99 is slow, read from the merged buckets
	// (averaging the instances' p99s would say 410 ms).
	now := time.Now()
	for i, rec := range recs {
		for j := range 1000 {
			rec.Arrive(signals.Default)
			s := rec.Start(now)
			d := 20 * time.Millisecond
			if i == 1 && j%25 == 0 {
				d = 800 * time.Millisecond
			}
			rec.Done(signals.Default, s, s.Add(d), false, time.Time{})
		}
	}
	pushAll()

	snap, err := src.Snapshot(ctx, time.Now())
	if err != nil {
		panic(err)
	}
	p50, _ := snap.Duration(signals.LatencyP50)
	p99, _ := snap.Duration(signals.LatencyP99)
	fmt.Println("p50:", p50.Round(10*time.Millisecond))
	fmt.Println("p99:", p99.Round(100*time.Millisecond), "(2 % of the fleet is slow)")
	for _, in := range src.Health().Instances {
		fmt.Println(in.Name, "live:", in.OK)
	}
	// Output:
	// p50: 20ms
	// p99: 800ms (2 % of the fleet is slow)
	// shop-1 live: true
	// shop-2 live: true
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

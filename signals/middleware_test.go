package signals

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock advances by step on each call.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func TestMiddlewareRecordsOutcomes(t *testing.T) {
	rec := NewRecorder(Config{})
	clk := &fakeClock{t: t0, step: 10 * time.Millisecond}
	mw := Middleware(rec, MiddlewareConfig{Now: clk.now, TrustPriority: true})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		case "/panic":
			panic("boom")
		case "/notfound":
			http.NotFound(w, r)
		default:
			w.Write([]byte("ok"))
		}
	}))
	do := func(path, prio, deadline string) int {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if prio != "" {
			req.Header.Set(PriorityHeader, prio)
		}
		if deadline != "" {
			req.Header.Set(DeadlineHeader, deadline)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	assert.Equal(t, 200, do("/", "critical", ""))
	assert.Equal(t, 500, do("/fail", "sheddable", ""))
	assert.Equal(t, 404, do("/notfound", "", ""), "4xx is the client's fault, not a failure")
	assert.Equal(t, 200, do("/", "critical", FormatDeadline(t0)), "served after its deadline: not good")
	assert.Panics(t, func() { do("/panic", "bogus", "") })

	c := rec.Counters().Load()
	assert.Equal(t, ClassCounts{Arrived: 2, Completed: 2, Good: 1}, c[Critical])
	assert.Equal(t, ClassCounts{Arrived: 2, Completed: 2, Failed: 1, Good: 1}, c[Default], "404 good, panic failed")
	assert.Equal(t, ClassCounts{Arrived: 1, Completed: 1, Failed: 1}, c[Sheddable])
	assert.Equal(t, int64(0), rec.Counters().InFlight())

	s := rec.Snapshot(clk.now())
	p99, ok := s.Duration(LatencyP99)
	require.True(t, ok)
	assert.InEpsilon(t, float64(10*time.Millisecond), float64(p99), 0.02, "each request took one clock step")
	er, _ := s.Get(ErrorRatio)
	assert.InDelta(t, 2.0/5, er, 1e-9)
}

// TestMiddlewareCountsInnerRefusals: a limiter inside the handler that
// answers 503 to a third of the requests shows in reject.ratio, and its
// refusals are neither completions nor failures.
func TestMiddlewareCountsInnerRefusals(t *testing.T) {
	rec := NewRecorder(Config{})
	clk := &fakeClock{t: t0, step: time.Millisecond}
	n := 0
	h := Middleware(rec, MiddlewareConfig{Now: clk.now})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n++; n%3 == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	for range 300 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}

	s := rec.Snapshot(clk.now())
	got, ok := s.Get(RejectRatio)
	require.True(t, ok)
	assert.InDelta(t, 1.0/3, got, 1e-9, "reject.ratio")
	er, _ := s.Get(ErrorRatio)
	assert.Zero(t, er, "error.ratio: a refusal is not a failure")
	c := s.Classes[Default]
	want := ClassCounts{Arrived: 300, Completed: 200, Good: 200}
	want.Rejected[ReasonConcurrency] = 100
	assert.Equal(t, want, c)
	assert.Equal(t, int64(0), rec.Counters().InFlight())
	var lat uint64
	rec.Latency().Cumulative(clk.now(), func(_ *[NumBuckets]uint64, _ float64, count uint64) { lat = count })
	assert.Equal(t, uint64(200), lat, "refusals have no latency")
}

// TestMiddlewareRefusedPredicate: 429 is a completion unless Refused says
// otherwise, and the reason it gives decides whether reject.ratio sees it.
func TestMiddlewareRefusedPredicate(t *testing.T) {
	count429 := func(why Reason) func(int, http.Header) (Reason, bool) {
		return func(status int, h http.Header) (Reason, bool) {
			if status == http.StatusTooManyRequests {
				return why, true
			}
			return RefusedUnavailable(status, h)
		}
	}
	for _, tc := range []struct {
		name            string
		refused         func(int, http.Header) (Reason, bool)
		status          int
		ratio           float64
		rejected        uint64
		completed, good uint64
		failed          uint64
	}{
		{"default 429 completes", nil, 429, 0, 0, 30, 30, 0},
		{"default 503 refused", nil, 503, 1.0 / 3, 10, 20, 20, 0},
		{"default 500 fails", nil, 500, 0, 0, 30, 20, 10},
		{"429 as concurrency", count429(ReasonConcurrency), 429, 1.0 / 3, 10, 20, 20, 0},
		{"429 as rate limit", count429(ReasonRateLimit), 429, 0, 10, 20, 20, 0},
		{"none refused", func(int, http.Header) (Reason, bool) { return 0, false }, 503, 0, 0, 30, 20, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := NewRecorder(Config{})
			clk := &fakeClock{t: t0, step: time.Millisecond}
			n := 0
			h := Middleware(rec, MiddlewareConfig{Now: clk.now, Refused: tc.refused})(http.HandlerFunc(
				func(w http.ResponseWriter, r *http.Request) {
					if n++; n%3 == 0 {
						w.WriteHeader(tc.status)
					}
				}))
			for range 30 {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
			}
			s := rec.Snapshot(clk.now())
			ratio, _ := s.Get(RejectRatio)
			assert.InDelta(t, tc.ratio, ratio, 1e-9, "reject.ratio")
			c := s.Classes[Default]
			assert.Equal(t, tc.rejected, c.RejectedTotal(), "rejected")
			assert.Equal(t, tc.completed, c.Completed, "completed")
			assert.Equal(t, tc.good, c.Good, "good")
			assert.Equal(t, tc.failed, c.Failed, "failed")
			assert.Equal(t, int64(0), rec.Counters().InFlight(), "in flight")
		})
	}
}

// TestMiddlewareAroundFailsafeAdaptiveLimiter composes failsafe-go's
// adaptive limiter (through failsafehttp) inside the middleware: with a
// limit of 2, a third concurrent request is refused with 429, which
// reject.ratio sees once Refused counts failsafehttp's 429s.
func TestMiddlewareAroundFailsafeAdaptiveLimiter(t *testing.T) {
	limiter := adaptivelimiter.NewBuilder[*http.Response]().WithLimits(2, 2, 2).Build()
	entered, release := make(chan struct{}), make(chan struct{})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		w.Write([]byte("ok"))
	})
	rec := NewRecorder(Config{})
	h := Middleware(rec, MiddlewareConfig{Refused: func(status int, h http.Header) (Reason, bool) {
		// failsafehttp answers 429 when its limiter refuses.
		return ReasonConcurrency, status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
	}})(failsafehttp.NewHandler(inner, limiter))

	do := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		return w.Code
	}
	const rounds = 10
	for range rounds {
		var wg sync.WaitGroup
		codes := make(chan int, 2)
		for range 2 {
			wg.Go(func() { codes <- do() })
		}
		<-entered
		<-entered // both permits taken
		assert.Equal(t, http.StatusTooManyRequests, do(), "third request while two are in flight")
		close(release)
		wg.Wait()
		close(codes)
		for code := range codes {
			assert.Equal(t, http.StatusOK, code)
		}
		release = make(chan struct{})
	}

	s := rec.Snapshot(time.Now())
	ratio, ok := s.Get(RejectRatio)
	require.True(t, ok)
	assert.InDelta(t, 1.0/3, ratio, 1e-9, "reject.ratio")
	c := s.Classes[Default]
	assert.Equal(t, uint64(3*rounds), c.Arrived)
	assert.Equal(t, uint64(2*rounds), c.Completed)
	assert.Equal(t, uint64(rounds), c.Rejected[ReasonConcurrency])
	assert.Equal(t, int64(0), rec.Counters().InFlight())
}

func TestStatusWriterUnwraps(t *testing.T) {
	w := httptest.NewRecorder()
	sw := &StatusWriter{ResponseWriter: w}
	require.NoError(t, http.NewResponseController(sw).Flush())
	assert.True(t, w.Flushed)
	assert.Equal(t, 200, sw.Status())
}

func BenchmarkMiddleware(b *testing.B) {
	rec := NewRecorder(Config{})
	h := Middleware(rec, MiddlewareConfig{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(PriorityHeader, "critical")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

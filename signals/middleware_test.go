package signals

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	mw := Middleware(rec, MiddlewareConfig{Now: clk.now})
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
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
	assert.Equal(t, 503, do("/fail", "sheddable", ""))
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

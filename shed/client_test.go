package shed

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

type fakeRT struct {
	status int
	header http.Header
	seen   []*http.Request
}

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	f.seen = append(f.seen, r)
	h := f.header
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: f.status, Header: h, Body: http.NoBody, Request: r}, nil
}

func TestThrottleBacksOffAFailingBackend(t *testing.T) {
	now := t0
	be := &fakeRT{status: http.StatusServiceUnavailable}
	th := &Throttle{Next: be, Now: func() time.Time { return now }, Rand: func() float64 { return 0.5 }}
	req := httptest.NewRequest(http.MethodGet, "http://api.test/x", nil)
	var sent, throttled int
	for range 100 {
		now = now.Add(100 * time.Millisecond)
		_, err := th.RoundTrip(req)
		if errors.Is(err, ErrThrottled) {
			throttled++
		} else {
			sent++
		}
	}
	assert.Greater(t, throttled, 50, "a backend refusing everything sees a trickle")
	assert.Equal(t, sent, len(be.seen))
	p := th.Probability()
	assert.InDelta(t, 1.0, p, 0.05, "(requests − 2·0)/(requests + 1)")

	// A healthy backend is not throttled: requests ≤ K × accepts.
	ok := &fakeRT{status: 200}
	th2 := &Throttle{Next: ok, Now: func() time.Time { return now }}
	for range 100 {
		_, err := th2.RoundTrip(req)
		require.NoError(t, err)
	}
	assert.Zero(t, th2.Probability())
}

func TestThrottleHonoursRetryAfter(t *testing.T) {
	now := t0
	be := &fakeRT{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"3"}}}
	th := &Throttle{Next: be, Now: func() time.Time { return now }, Rand: func() float64 { return 0.99 }}
	req := httptest.NewRequest(http.MethodGet, "http://api.test/x", nil)
	resp, err := th.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, 429, resp.StatusCode)
	now = now.Add(time.Second)
	_, err = th.RoundTrip(req)
	var te *ThrottledError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 2*time.Second, te.RetryAfter)
	assert.Len(t, be.seen, 1, "nothing sent while the server asked to wait")
	now = now.Add(3 * time.Second)
	be.status = 200
	_, err = th.RoundTrip(req)
	assert.NoError(t, err)
}

func TestPropagateClassAndDeadline(t *testing.T) {
	be := &fakeRT{status: 200}
	ctx := context.WithValue(context.Background(), ctxKey{}, signals.Sheddable)
	deadline := t0.Add(1500 * time.Millisecond)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "http://dep.test/", nil).WithContext(ctx)
	_, err := Propagate{Next: be}.RoundTrip(req)
	require.NoError(t, err)
	got := be.seen[0]
	assert.Equal(t, "sheddable", got.Header.Get(signals.PriorityHeader))
	assert.Equal(t, "2026-11-11T00:00:01.500Z", got.Header.Get(signals.DeadlineHeader))
	assert.Empty(t, req.Header.Get(signals.PriorityHeader), "the caller's request is not changed")
}

func TestParseRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{"5": 5 * time.Second, "99999": time.Hour, "Wed, 11 Nov 2026 00:00:10 GMT": 10 * time.Second} {
		d, ok := parseRetryAfter(in, t0)
		assert.True(t, ok, in)
		assert.Equal(t, want, d, in)
	}
	for _, in := range []string{"", "-1", "soon", "Wed, 11 Nov 2020 00:00:10 GMT"} {
		_, ok := parseRetryAfter(in, t0)
		assert.False(t, ok, in)
	}
}

func TestRoutes(t *testing.T) {
	rt, err := NewRoutes(
		Route{Pattern: "POST /checkout", Class: signals.Critical},
		Route{Pattern: "GET /search", Class: signals.Default, Cost: 100},
		Route{Pattern: "GET /recommendations", Class: signals.Sheddable, Cost: 2},
	)
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/checkout", nil)
	assert.Equal(t, signals.Critical, rt.Classify(r))
	r.Header.Set(signals.PriorityHeader, "sheddable")
	assert.Equal(t, signals.Sheddable, rt.Classify(r), "a header may lower the class")
	s := httptest.NewRequest(http.MethodGet, "/search", nil)
	s.Header.Set(signals.PriorityHeader, "critical")
	assert.Equal(t, signals.Default, rt.Classify(s), "but never raise it")
	assert.Equal(t, 100.0, rt.Cost(s))
	// Measured: search takes 20 ms, recommendations 20 ms: the declared 100
	// for search was pessimistic, and measurement corrects it.
	rec := httptest.NewRequest(http.MethodGet, "/recommendations", nil)
	for range 30 {
		rt.Observe(s, 20*time.Millisecond)
		rt.Observe(rec, 20*time.Millisecond)
	}
	assert.Less(t, rt.Cost(s), 100.0)
	assert.Greater(t, rt.Cost(rec), 0.0)
	assert.Equal(t, 100.0, rt.DeclaredCost(s), "the declared cost stays as declared")
	assert.Equal(t, 2.0, rt.DeclaredCost(rec))
	assert.Equal(t, 1.0, rt.DeclaredCost(httptest.NewRequest(http.MethodGet, "/other", nil)))
	assert.Equal(t, 1.0, rt.Cost(httptest.NewRequest(http.MethodGet, "/other", nil)))
	_, err = NewRoutes(Route{Pattern: "GET /a"}, Route{Pattern: "GET /a"})
	assert.Error(t, err, "duplicate patterns")
}

// TestRoutesDeclared: Declared tells a route that declares its cost from
// one that only classifies and from a request no route matches; the
// caller's table is not changed by the defaults.
func TestRoutesDeclared(t *testing.T) {
	table := []Route{
		{Pattern: "POST /checkout", Class: signals.Critical},
		{Pattern: "GET /search", Cost: 3},
		{Pattern: "GET /list", Scale: func(*http.Request) float64 { return 2 }},
	}
	rt, err := NewRoutes(table...)
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path string
		cost         float64
		ok           bool
	}{
		{http.MethodPost, "/checkout", 1, false},
		{http.MethodGet, "/search", 3, true},
		{http.MethodGet, "/list", 2, true},
		{http.MethodGet, "/other", 1, false},
	} {
		c, ok := rt.Declared(httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.ok, ok, tc.path)
		assert.Equal(t, tc.cost, c, tc.path)
	}
	assert.Zero(t, table[0].Cost, "the caller's table keeps its zero cost")
}

// FuzzMiddlewareHeaders: whatever the priority, deadline, budget and user
// headers say, the middleware answers 200, 429 or 503 and never panics.
func FuzzMiddlewareHeaders(f *testing.F) {
	for _, s := range [][4]string{{"critical", "2026-11-11T00:00:01.250Z", "250m", "alice"}, {"\x00", "x", "99999999H", ""}, {"B", "", "-1S", "é"}} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	s, _ := New(Config{RateLimit: &RateLimitConfig{}, ShedLevel: func() float64 { return 0.5 }})
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	f.Fuzz(func(t *testing.T, prio, deadline, budget, user string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header[signals.PriorityHeader] = []string{prio}
		req.Header[signals.DeadlineHeader] = []string{deadline}
		req.Header[signals.TimeoutHeader] = []string{budget}
		req.Header["X-User-Id"] = []string{user}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 429 && rec.Code != 503 {
			t.Fatalf("status %d", rec.Code)
		}
	})
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"5", "Wed, 11 Nov 2026 00:00:10 GMT", "-3", "1e9", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if d, ok := parseRetryAfter(v, t0); ok && (d <= 0 || d > time.Hour) {
			t.Fatalf("%q → %v", v, d)
		}
	})
}

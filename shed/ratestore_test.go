package shed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted is a RateLimitStore that answers from a script and records
// what it was asked.
type scripted struct {
	answers []scriptedAnswer
	keys    []string
	quotas  []Quota
	ctxs    []context.Context
}

type scriptedAnswer struct {
	d   RateDecision
	err error
}

func (s *scripted) Take(ctx context.Context, key string, q Quota, now time.Time) (RateDecision, error) {
	s.keys, s.quotas, s.ctxs = append(s.keys, key), append(s.quotas, q), append(s.ctxs, ctx)
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a.d, a.err
}

var errDown = errors.New("store down")

func TestStoreDecidesAndMemoryFallsBack(t *testing.T) {
	store := &scripted{answers: []scriptedAnswer{
		{d: RateDecision{Allowed: true, Remaining: 7, Reset: 1500 * time.Millisecond}},
		{d: RateDecision{Remaining: 0, Reset: 4 * time.Second, RetryAfter: 300 * time.Millisecond}},
		{err: errDown},
		{err: errDown},
	}}
	rl, err := NewRateLimiter(RateLimitConfig{Burst: 2, Store: store})
	require.NoError(t, err)
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "request")
	for i, want := range []struct {
		ok                           bool
		remaining, reset, retryAfter string
	}{
		{true, "7", "2", ""},   // the store's, rounded up
		{false, "0", "4", "1"}, // Retry-After at least 1 s
		{true, "1", "1", ""},   // the memory's: a burst of 2 at 2/s
		{true, "0", "1", ""},   // the memory's
	} {
		h := http.Header{}
		ok := rl.AllowContext(ctx, h, "u:ivan", t0)
		assert.Equal(t, want.ok, ok, "decision %d", i)
		assert.Equal(t, "2", h.Get("X-Ratelimit-Limit"), "decision %d: the config's burst", i)
		assert.Equal(t, want.remaining, h.Get("X-Ratelimit-Remaining"), "decision %d", i)
		assert.Equal(t, want.reset, h.Get("X-Ratelimit-Reset"), "decision %d", i)
		assert.Equal(t, want.retryAfter, h.Get("Retry-After"), "decision %d", i)
	}
	ivan := StoreKey("u:ivan")
	assert.Equal(t, []string{ivan, ivan, ivan, ivan}, store.keys, "the key's digest")
	assert.Equal(t, Quota{Rate: 2, Burst: 2, Window: 5 * time.Second}, store.quotas[0], "the defaults applied")
	assert.Equal(t, "request", store.ctxs[0].Value(ctxKey{}), "the caller's context")
}

func TestStoreBehindTheMiddleware(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		store := &scripted{answers: []scriptedAnswer{
			{d: RateDecision{Allowed: true, Remaining: 1, Reset: time.Second}},
			{d: RateDecision{Reset: time.Second, RetryAfter: 2500 * time.Millisecond}},
		}}
		s, err := New(Config{Now: fixedNow, RateLimit: &RateLimitConfig{SlidingWindow: true, Store: store, HeadersOnRefusal: quiet}})
		require.NoError(t, err)
		h := s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-User-ID", "judy")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code)
		if quiet {
			assert.Empty(t, rec.Header().Get("X-Ratelimit-Remaining"), "HeadersOnRefusal")
		} else {
			assert.Equal(t, "1", rec.Header().Get("X-Ratelimit-Remaining"))
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusTooManyRequests, rec.Code)
		assert.Equal(t, "3", rec.Header().Get("Retry-After"))
		assert.Equal(t, "10", rec.Header().Get("X-Ratelimit-Limit"))
		assert.Equal(t, []string{StoreKey("u:judy"), StoreKey("u:judy")}, store.keys)
		assert.True(t, store.quotas[0].SlidingWindow)
	}
}

func TestMemoryIsAStore(t *testing.T) {
	var st RateLimitStore = newMemory(RateLimitConfig{Rate: 1, Burst: 1, MaxClients: 8})
	d, err := st.Take(context.Background(), "k", Quota{Rate: 1, Burst: 1}, t0)
	require.NoError(t, err)
	assert.Equal(t, RateDecision{Allowed: true, Reset: time.Second}, d)
	d, err = st.Take(context.Background(), "k", Quota{Rate: 1, Burst: 1}, t0.Add(250*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, RateDecision{Reset: 750 * time.Millisecond, RetryAfter: 750 * time.Millisecond}, d)
}

// TestMemoryForgetsClientsWholeAgain: a client whose allowance is whole
// again is forgotten as new clients come (a new one would start the same),
// so the table holds the clients of the last seconds, not every client
// ever seen up to MaxClients; a client still refilling is remembered.
func TestMemoryForgetsClientsWholeAgain(t *testing.T) {
	for _, window := range []bool{false, true} {
		m := newMemory(RateLimitConfig{SlidingWindow: window, Rate: 1, Burst: 2, Window: time.Second, MaxClients: 65536})
		busy := "u:busy"
		m.take(busy, t0)
		m.take(busy, t0)
		for i := range 1000 { // a bot: a new user id every 10 ms
			now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
			m.take(fmt.Sprintf("u:bot-%d", i), now)
			if i == 50 {
				assert.False(t, m.take(busy, now).Allowed, "window %v: busy, half a second in: still held", window)
			}
		}
		assert.LessOrEqual(t, m.lru.Len(), 300, "window %v: the clients of the last 2 s (200), not all 1000", window)
		assert.Positive(t, m.lru.Len())
	}
}

// BenchmarkRateLimiter: one decision of the default limiter, this
// process's memory, headers written.
func BenchmarkRateLimiter(b *testing.B) {
	rl, _ := NewRateLimiter(RateLimitConfig{Rate: 1e9, Burst: 1 << 30})
	h := http.Header{}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		rl.Allow(h, "u:kim", now)
		now = now.Add(time.Microsecond)
	}
}

package fallback

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheFreshStaleAndSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache[string](CacheConfig{Fresh: time.Minute, MaxStale: time.Hour})
		ctx := context.Background()
		var calls atomic.Int32
		ok := func(v string) func(context.Context) (string, error) {
			return func(context.Context) (string, error) { calls.Add(1); time.Sleep(100 * time.Millisecond); return v, nil }
		}
		down := func(context.Context) (string, error) { calls.Add(1); return "", errors.New("recommendations down") }

		v, r, err := c.Get(ctx, "user-1", ok("v1"))
		require.NoError(t, err)
		assert.Equal(t, "v1", v)
		assert.False(t, r.Stale)
		v, _, _ = c.Get(ctx, "user-1", ok("v2"))
		assert.Equal(t, "v1", v, "fresh: no call")
		assert.Equal(t, int32(1), calls.Load())

		time.Sleep(2 * time.Minute)
		v, r, err = c.Get(ctx, "user-1", down)
		require.NoError(t, err, "a stale value beats an error")
		assert.Equal(t, "v1", v)
		assert.True(t, r.Stale)
		assert.Equal(t, 2*time.Minute, r.Age)
		rec := httptest.NewRecorder()
		r.Mark(rec)
		assert.Equal(t, "age=120s", rec.Header().Get(StaleHeader))

		// A recovering dependency: 50 callers, one refresh.
		calls.Store(0)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() { c.Get(ctx, "user-1", ok("v3")) })
		}
		wg.Wait()
		assert.Equal(t, int32(1), calls.Load(), "single flight")

		// Dimmed: serve what is cached, call nothing.
		v, _, found := c.Peek("user-1")
		assert.True(t, found)
		assert.Equal(t, "v3", v)
		_, _, found = c.Peek("nobody")
		assert.False(t, found)
		time.Sleep(2 * time.Hour)
		_, _, err = c.Get(ctx, "user-1", down)
		assert.Error(t, err, "too stale: the error comes through")
	})
}

func TestSection(t *testing.T) {
	ctx := context.Background()
	render := func(context.Context) (string, error) { return "<recs/>", nil }
	v, err := Section(ctx, true, "", render)
	assert.NoError(t, err)
	assert.Equal(t, "<recs/>", v)
	v, _ = Section(ctx, false, "", render)
	assert.Equal(t, "", v, "dimmed: the placeholder")
	v, err = Section(ctx, true, "<p>later</p>", func(context.Context) (string, error) { return "", errors.New("timeout") })
	assert.Error(t, err)
	assert.Equal(t, "<p>later</p>", v, "a failing section never fails the page")
}

func TestCollectorLints(t *testing.T) {
	db := openTestDB(t)
	defer db.Close()
	o, err := NewOutbox(context.Background(), db, OutboxConfig{})
	require.NoError(t, err)
	g, _ := New(Config{Name: "sms"})
	Call(context.Background(), g, func(context.Context) (int, error) { return 1, nil })
	problems, err := testutil.CollectAndLint(NewCollector([]*Guard{g}, map[string]*Outbox{"sms": o}))
	require.NoError(t, err)
	assert.Empty(t, problems)
	n := testutil.CollectAndCount(NewCollector([]*Guard{g}, map[string]*Outbox{"sms": o}))
	assert.Greater(t, n, 10)
}

// TestCacheRefreshOutlivesFirstCaller: the single-flight refresh must not
// run on the first caller's context, or when that client goes away every
// caller waiting on the same key gets its cancellation.
func TestCacheRefreshOutlivesFirstCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache[string](CacheConfig{Fresh: time.Minute, MaxStale: time.Hour})
		load := func(ctx context.Context) (string, error) {
			select {
			case <-time.After(100 * time.Millisecond):
				return "v1", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		first, leave := context.WithCancel(context.Background())
		var firstErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, _, firstErr = c.Get(first, "user-1", load) })
		synctest.Wait() // the first caller's refresh is in flight
		var got string
		var err error
		wg.Go(func() { got, _, err = c.Get(context.Background(), "user-1", load) })
		synctest.Wait()
		leave() // the first client goes away mid-refresh
		wg.Wait()
		assert.ErrorIs(t, firstErr, context.Canceled, "the client that left gets its own cancellation")
		require.NoError(t, err, "a waiting caller still gets the value")
		assert.Equal(t, "v1", got)
		v, _, ok := c.Peek("user-1")
		assert.True(t, ok, "the refresh finished and was stored")
		assert.Equal(t, "v1", v)

		// Detached, but bounded: RefreshTimeout (default 10 s), and the
		// caller's values still reach the loader.
		type traceKey struct{}
		start := time.Now()
		var ended time.Duration
		var trace any
		done := make(chan struct{})
		hang := func(ctx context.Context) (string, error) {
			defer close(done)
			trace = ctx.Value(traceKey{})
			<-ctx.Done()
			ended = time.Since(start)
			return "", ctx.Err()
		}
		gone, cancel := context.WithTimeout(context.WithValue(context.Background(), traceKey{}, "t-1"), time.Second)
		defer cancel()
		_, _, err = c.Get(gone, "user-2", hang)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start), "the caller waits only its own deadline")
		<-done
		assert.Equal(t, 10*time.Second, ended, "the refresh ends at RefreshTimeout")
		assert.Equal(t, "t-1", trace)
	})
}

// TestCacheBounds: the cache holds at most MaxEntries, evicting the value
// written longest ago, and forgets values older than MaxStale (they can no
// longer be served) without waiting for their key to be asked again.
func TestCacheBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache[int](CacheConfig{Fresh: time.Minute, MaxStale: time.Hour, MaxEntries: 100})
		ctx := context.Background()
		for i := range 250 {
			c.Get(ctx, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil })
			time.Sleep(time.Second)
		}
		assert.Equal(t, 100, c.Len(), "bounded by MaxEntries")
		_, _, ok := c.Peek("149")
		assert.False(t, ok, "the oldest went first")
		v, _, ok := c.Peek("150")
		assert.True(t, ok)
		assert.Equal(t, 150, v)

		time.Sleep(time.Hour)
		c.Get(ctx, "new", func(context.Context) (int, error) { return 1, nil })
		assert.Equal(t, 1, c.Len(), "values older than MaxStale are gone")

		d := NewCache[int](CacheConfig{Fresh: time.Minute})
		for i := range 20_000 {
			d.Get(ctx, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil })
		}
		assert.Equal(t, 10_000, d.Len(), "default MaxEntries")
	})
}

// TestCacheStaleAgeAfterTheWait: the age of a stale value is taken when
// it is served, after the failed refresh, not before it: a value 29 s old
// is past a 10-s MaxStale however young it was when the refresh began.
func TestCacheStaleAgeAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache[string](CacheConfig{Fresh: time.Second, MaxStale: 10 * time.Second, RefreshTimeout: time.Minute})
		ctx := context.Background()
		_, _, err := c.Get(ctx, "k", func(context.Context) (string, error) { return "v1", nil })
		require.NoError(t, err)
		slowFail := func(d time.Duration) func(context.Context) (string, error) {
			return func(context.Context) (string, error) { time.Sleep(d); return "", errors.New("down") }
		}

		time.Sleep(5 * time.Second)
		v, r, err := c.Get(ctx, "k", slowFail(3*time.Second))
		require.NoError(t, err)
		assert.Equal(t, "v1", v)
		assert.Equal(t, 8*time.Second, r.Age, "the age when served")

		_, r, err = c.Get(ctx, "k", slowFail(20*time.Second)) // begins at 8 s, ends at 28 s
		assert.Error(t, err, "28 s old: past MaxStale, served with age %v", r.Age)
	})
}

// TestCacheOfInterfaceServesNil: a Cache of an interface type may hold a
// nil value.
func TestCacheOfInterfaceServesNil(t *testing.T) {
	c := NewCache[fmt.Stringer](CacheConfig{Fresh: time.Minute})
	v, _, err := c.Get(context.Background(), "k", func(context.Context) (fmt.Stringer, error) { return nil, nil })
	require.NoError(t, err)
	assert.Nil(t, v)
}

package fallback

import (
	"context"
	"errors"
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
		c := NewCache[string](time.Minute, time.Hour, nil)
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

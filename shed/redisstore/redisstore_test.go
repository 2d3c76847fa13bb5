package redisstore

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/shed"
)

// healthy is a timeout for tests where Redis is up: generous, so that a
// loaded CI machine does not turn a slow answer into a fallback.
const healthy = 2 * time.Second

// instance is one server of a fleet: its own go-redis client, Store and
// limiter.
func instance(t *testing.T, addr string, rl shed.RateLimitConfig, cfg Config) (*shed.RateLimiter, *Store) {
	t.Helper()
	st, err := New(newClient(t, addr), cfg)
	require.NoError(t, err)
	rl.Store = st
	l, err := shed.NewRateLimiter(rl)
	require.NoError(t, err)
	return l, st
}

func TestTwoInstancesShareOneBucket(t *testing.T) {
	srv := startRedis(t)
	cfg := Config{Prefix: "fleet:", Timeout: healthy}

	// Burst: 5 in all from both instances, not 5 each. (Rate 1/s: the
	// bucket gains a token only if the loop takes a second.)
	rl := shed.RateLimitConfig{Rate: 1, Burst: 5}
	a, sa := instance(t, srv.addr, rl, cfg)
	b, sb := instance(t, srv.addr, rl, cfg)
	start, allowed := time.Now(), 0
	for i := range 20 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if l.Allow(nil, "u:alice", time.Now()) {
			allowed++
		}
	}
	refill := int(time.Since(start).Seconds() * rl.Rate)
	t.Logf("burst: %d of 20 allowed by two instances sharing a bucket of 5, in %v", allowed, time.Since(start).Round(time.Microsecond))
	assert.GreaterOrEqual(t, allowed, 5)
	assert.LessOrEqual(t, allowed, 5+refill, "one burst across both instances")
	assert.True(t, b.Allow(nil, "u:bob", time.Now()), "another client has its own bucket")

	// Rate: after a burst of 1, 20/s across both, not 20/s each.
	rl = shed.RateLimitConfig{Rate: 20, Burst: 1}
	cfg.Prefix = "fleet-rate:"
	a, _ = instance(t, srv.addr, rl, cfg)
	b, _ = instance(t, srv.addr, rl, cfg)
	allowed = 0
	start = time.Now()
	for i := 0; time.Since(start) < 500*time.Millisecond; i++ {
		l := a
		if i%2 == 1 {
			l = b
		}
		if l.Allow(nil, "u:carol", time.Now()) {
			allowed++
		}
		time.Sleep(2 * time.Millisecond)
	}
	want := 1 + time.Since(start).Seconds()*rl.Rate // 11 over 500 ms; 22 with a bucket each
	t.Logf("rate: %d allowed over %v by two instances at 20/s (want %.1f)", allowed, time.Since(start).Round(time.Millisecond), want)
	assert.InDelta(t, want, float64(allowed), 2.5, "allowed %d over %v, want about %.1f", allowed, time.Since(start), want)

	for _, st := range []*Store{sa, sb} {
		s := st.Stats()
		assert.Zero(t, s.Fallbacks, "Redis made every decision")
		assert.GreaterOrEqual(t, s.Redis, uint64(10))
	}
}

// TestLongKeysMeetAsDigests: two instances sharing Redis hold a client
// with an 800 KB user id to one allowance, under one Redis key of the
// prefix and 24 bytes — not the id (the limiter gives stores its digest).
func TestLongKeysMeetAsDigests(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	cfg := Config{Prefix: "long:", Timeout: healthy}
	rl := shed.RateLimitConfig{Rate: 1, Burst: 5}
	a, sa := instance(t, srv.addr, rl, cfg)
	b, sb := instance(t, srv.addr, rl, cfg)
	id := "u:" + strings.Repeat("x", 800<<10)
	start, allowed := time.Now(), 0
	for i := range 20 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if l.Allow(nil, id, time.Now()) {
			allowed++
		}
	}
	refill := int(time.Since(start).Seconds() * rl.Rate)
	assert.GreaterOrEqual(t, allowed, 5)
	assert.LessOrEqual(t, allowed, 5+refill, "one burst across both instances")
	keys, err := rdb.Keys(context.Background(), "long:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1, "one key for the client")
	assert.True(t, keys[0] == "long:"+shed.StoreKey(id), "the id's digest, not a key of %d bytes", len(keys[0]))
	assert.Equal(t, len("long:u:")+22, len(keys[0]))
	for _, st := range []*Store{sa, sb} {
		assert.Zero(t, st.Stats().Fallbacks, "Redis made every decision")
	}
}

// The same requests get the same answers and headers from Redis and from
// the limiter's own memory.
func TestSameHeadersAsMemory(t *testing.T) {
	srv := startRedis(t)
	for _, window := range []bool{false, true} {
		rl := shed.RateLimitConfig{SlidingWindow: window}
		local, err := shed.NewRateLimiter(rl)
		require.NoError(t, err)
		shared, _ := instance(t, srv.addr, rl, Config{Prefix: "same-" + strconv.FormatBool(window) + ":", Timeout: healthy})
		for i := range 12 {
			hl, hs := http.Header{}, http.Header{}
			now := time.Now()
			al := local.Allow(hl, "u:dave", now)
			as := shared.Allow(hs, "u:dave", now)
			assert.Equal(t, al, as, "window %v, request %d", window, i)
			assert.Equal(t, hl, hs, "window %v, request %d", window, i)
		}
	}
}

func TestKeysExpire(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	for _, tc := range []struct {
		rl      shed.RateLimitConfig
		maxTTL  time.Duration
		comment string
	}{
		// TTLs of a few hundred ms: under -race on a loaded machine a 10 ms
		// key could be gone before PTTL reads it.
		{shed.RateLimitConfig{Rate: 4, Burst: 5}, 250 * time.Millisecond, "full again after 1/rate"},
		{shed.RateLimitConfig{SlidingWindow: true, Burst: 5, Window: 200 * time.Millisecond}, 400 * time.Millisecond, "both windows past"},
	} {
		l, _ := instance(t, srv.addr, tc.rl, Config{Prefix: "exp:", Timeout: healthy})
		require.True(t, l.Allow(nil, "u:erin", time.Now()))
		ttl, err := rdb.PTTL(context.Background(), "exp:"+shed.StoreKey("u:erin")).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0), tc.comment)
		assert.LessOrEqual(t, ttl, tc.maxTTL, tc.comment)
		gone := false
		for deadline := time.Now().Add(2 * time.Second); !gone && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			n, err := rdb.Exists(context.Background(), "exp:"+shed.StoreKey("u:erin")).Result()
			require.NoError(t, err)
			gone = n == 0
		}
		assert.True(t, gone, "the key expired: %s", tc.comment)
	}
}

func TestRedisDownFallsBackAndComesBack(t *testing.T) {
	srv := startRedis(t)
	const timeout = 50 * time.Millisecond
	l, st := instance(t, srv.addr, shed.RateLimitConfig{Rate: 1, Burst: 3}, Config{Prefix: "down:", Timeout: timeout})
	now := time.Now()
	ctx := context.Background()
	for range 2 {
		_, err := st.Take(ctx, "warm-up", shed.Quota{Rate: 1, Burst: 3}, now) // a Redis round trip or two under -race
		require.NoError(t, err)
	}
	require.True(t, l.Allow(nil, "u:frank", now))
	require.Equal(t, Stats{Redis: 3}, st.Stats())

	srv.kill()
	took := time.Now()
	h := http.Header{}
	assert.True(t, l.Allow(h, "u:frank", now), "decided locally: a burst of its own")
	t.Logf("first decision after the kill: %v (timeout %v)", time.Since(took), timeout)
	assert.Less(t, time.Since(took), timeout+100*time.Millisecond, "no longer than the timeout")
	assert.Equal(t, "2", h.Get("X-Ratelimit-Remaining"), "the local bucket, full before this one")
	s := st.Stats()
	assert.Equal(t, uint64(1), s.Errors)
	assert.Equal(t, uint64(1), s.Fallbacks)
	assert.False(t, st.Healthy())

	// Within the retry interval Redis is not called: no more errors, and
	// the local bucket holds the client.
	now = now.Add(100 * time.Millisecond)
	assert.True(t, l.Allow(nil, "u:frank", now))
	assert.True(t, l.Allow(nil, "u:frank", now))
	h = http.Header{}
	assert.False(t, l.Allow(h, "u:frank", now), "local burst of 3 spent")
	assert.Equal(t, "1", h.Get("Retry-After"))
	_, err := st.Take(ctx, shed.StoreKey("u:frank"), shed.Quota{Rate: 1, Burst: 3}, now)
	assert.ErrorIs(t, err, ErrSkipped)
	s = st.Stats()
	assert.Equal(t, uint64(1), s.Errors, "skipped, not tried")
	assert.Equal(t, uint64(5), s.Fallbacks)
	assert.NoError(t, testutil.CollectAndCompare(st, strings.NewReader(`
# HELP brownout_ratelimit_store_decisions_total Rate limit decisions by who made them: redis, or local (this process's memory, when Redis failed, was too slow or was skipped after a failure).
# TYPE brownout_ratelimit_store_decisions_total counter
brownout_ratelimit_store_decisions_total{by="local",prefix="down:"} 5
brownout_ratelimit_store_decisions_total{by="redis",prefix="down:"} 3
# HELP brownout_ratelimit_store_healthy 1 while Redis decides, 0 while decisions are local after a failure.
# TYPE brownout_ratelimit_store_healthy gauge
brownout_ratelimit_store_healthy{prefix="down:"} 0
`), "brownout_ratelimit_store_decisions_total", "brownout_ratelimit_store_healthy"))

	// Back: once the interval is over, one request tries Redis (empty
	// now: a full bucket), and Redis decides again.
	srv.start()
	now = now.Add(500 * time.Millisecond)
	assert.False(t, l.Allow(nil, "u:frank", now), "still within the interval: the local bucket, 0.6 token")
	assert.Equal(t, uint64(1), st.Stats().Errors)
	now = now.Add(time.Second)
	// The local bucket would allow and have none left (1.6 tokens);
	// Redis's, empty after the restart, is full: 2 left.
	var d shed.RateDecision
	require.Eventually(t, func() bool {
		d, err = st.Take(ctx, shed.StoreKey("u:frank"), shed.Quota{Rate: 1, Burst: 3}, now)
		now = now.Add(time.Second)
		return err == nil
	}, 10*time.Second, time.Millisecond, "Redis back")
	assert.Equal(t, shed.RateDecision{Allowed: true, Remaining: 2, Reset: time.Second}, d)
	assert.True(t, st.Healthy())
	h = http.Header{}
	assert.True(t, l.Allow(h, "u:frank", now))
	assert.Equal(t, "1", h.Get("X-Ratelimit-Remaining"), "Redis's bucket")
	redisDecisions := st.Stats().Redis
	assert.Equal(t, uint64(5), redisDecisions)
}

// A Redis that does not answer costs a request at most the timeout.
func TestSlowRedisDoesNotHoldRequests(t *testing.T) {
	const timeout = 30 * time.Millisecond
	const slack = 150 * time.Millisecond // scheduling on a loaded machine, under -race
	rl := shed.RateLimitConfig{Rate: 1, Burst: 3}

	t.Run("DEBUG SLEEP", func(t *testing.T) {
		srv := startRedis(t)
		l, st := instance(t, srv.addr, rl, Config{Timeout: timeout})
		var wg sync.WaitGroup
		wg.Add(1)
		sleeper := srv.client()
		go func() {
			defer wg.Done()
			sleeper.Do(context.Background(), "DEBUG", "SLEEP", "0.6")
		}()
		defer wg.Wait()
		// Until Redis is asleep, decisions are its own; then one times
		// out, and the rest are skipped for the retry interval.
		now := time.Now()
		var longest time.Duration
		for i := 0; st.Healthy() && i < 500; i++ {
			took := time.Now()
			h := http.Header{}
			l.Allow(h, "u:grace", now)
			longest = max(longest, time.Since(took))
			require.Less(t, time.Since(took), timeout+slack, "decision %d", i)
			require.Equal(t, "3", h.Get("X-Ratelimit-Limit"))
			time.Sleep(time.Millisecond)
		}
		assert.False(t, st.Healthy(), "Redis slept")
		t.Logf("longest decision while Redis slept 600 ms: %v (timeout %v)", longest, timeout)
		assert.Equal(t, uint64(1), st.Stats().Timeouts)
	})

	t.Run("black hole", func(t *testing.T) {
		// Accepts connections and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		var accepting sync.WaitGroup
		var mu sync.Mutex
		var held []net.Conn
		accepting.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		})
		t.Cleanup(func() {
			ln.Close()
			accepting.Wait()
			for _, c := range held {
				c.Close()
			}
		})
		l, st := instance(t, ln.Addr().String(), rl, Config{Timeout: timeout})
		now := time.Now()
		took := time.Now()
		h := http.Header{}
		assert.True(t, l.Allow(h, "u:heidi", now), "decided locally")
		t.Logf("a decision against a Redis that never answers: %v (timeout %v)", time.Since(took), timeout)
		assert.Less(t, time.Since(took), timeout+slack)
		assert.Equal(t, "2", h.Get("X-Ratelimit-Remaining"))
		assert.Equal(t, Stats{Fallbacks: 1, Errors: 1, Timeouts: 1}, st.Stats())
		took = time.Now()
		_, err = st.Take(context.Background(), "u:heidi", shed.Quota{Rate: 1, Burst: 3}, now.Add(999*time.Millisecond))
		assert.ErrorIs(t, err, ErrSkipped)
		assert.Less(t, time.Since(took), time.Millisecond, "skipped without a call")
		took = time.Now()
		_, err = st.Take(context.Background(), "u:heidi", shed.Quota{Rate: 1, Burst: 3}, now.Add(time.Second))
		assert.Error(t, err)
		assert.NotErrorIs(t, err, ErrSkipped, "tried again after the interval")
		assert.Less(t, time.Since(took), timeout+slack)
		assert.Equal(t, uint64(2), st.Stats().Timeouts)
	})
}

// Only one caller tries Redis again after the interval; the others keep
// deciding locally meanwhile.
func TestOneProbeAfterTheInterval(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // connection refused from now on
	st, err := New(newClient(t, addr), Config{Timeout: 50 * time.Millisecond})
	require.NoError(t, err)
	q := shed.Quota{Rate: 1, Burst: 1}
	now := time.Now()
	_, err = st.Take(context.Background(), "k", q, now)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrSkipped)
	var wg sync.WaitGroup
	var mu sync.Mutex
	tried := 0
	for range 8 {
		wg.Go(func() {
			_, err := st.Take(context.Background(), "k", q, now.Add(time.Second))
			if !errors.Is(err, ErrSkipped) {
				mu.Lock()
				tried++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, tried)
	assert.Equal(t, uint64(2), st.Stats().Errors)
	assert.Equal(t, uint64(9), st.Stats().Fallbacks)
}

// A caller that gives up is not Redis's failure: decided locally, Redis
// stays in use.
func TestCallerCanceled(t *testing.T) {
	st, err := New(newClient(t, "127.0.0.1:1"), Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = st.Take(ctx, "k", shed.Quota{Rate: 1, Burst: 1}, time.Now())
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, st.Healthy())
	assert.Equal(t, Stats{Fallbacks: 1}, st.Stats())
}

func TestNewChecksConfig(t *testing.T) {
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { plain.Close(); cluster.Close() })
	for _, tc := range []struct {
		client redis.Scripter
		cfg    Config
		want   string
	}{
		{plain, Config{}, "ContextTimeoutEnabled"},
		{cluster, Config{}, "ContextTimeoutEnabled"},
		{nil, Config{}, "no client"},
		{newClient(t, "127.0.0.1:1"), Config{Timeout: -1}, "timeout must be positive"},
		{newClient(t, "127.0.0.1:1"), Config{RetryInterval: -1}, "retry interval must be positive"},
	} {
		_, err := New(tc.client, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}
	st, err := New(newClient(t, "127.0.0.1:1"), Config{})
	require.NoError(t, err)
	assert.Equal(t, Config{Prefix: "brownout:ratelimit:", Timeout: 10 * time.Millisecond, RetryInterval: time.Second}, st.cfg)
}

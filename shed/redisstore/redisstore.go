package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/brownout/brownout/shed"
)

// ErrSkipped is returned by Take, without calling Redis, for
// Config.RetryInterval after Redis failed: the limiter then decides from
// its local memory.
var ErrSkipped = errors.New("redisstore: redis skipped after a failure")

// Config configures a Store. The zero value takes every default.
type Config struct {
	// Prefix is put before each client key's digest (shed.StoreKey) to
	// make the Redis key; it
	// names the limiter, so two limiters sharing a Redis need two
	// prefixes. With Redis Cluster each client is one key, hashed alone.
	// Default "brownout:ratelimit:".
	Prefix string
	// Timeout bounds one decision's round trip to Redis, connecting and
	// waiting for a pooled connection included: past it the request is
	// decided locally. Set it above Redis's p99 round trip and well under
	// the requests' latency objective. Default 10 ms.
	Timeout time.Duration
	// RetryInterval is how long Redis is skipped after a failure (an
	// error or a timeout): a dead Redis then costs one Timeout per
	// interval, not one per request. After it, one request tries Redis
	// again while the others keep deciding locally; if it succeeds, all
	// go back to Redis. Default 1 s.
	RetryInterval time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = "brownout:ratelimit:"
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Millisecond
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = time.Second
	}
	switch {
	case c.Timeout < 0:
		return c, errors.New("redisstore: timeout must be positive")
	case c.RetryInterval < 0:
		return c, errors.New("redisstore: retry interval must be positive")
	}
	return c, nil
}

// Store is a shed.RateLimitStore in Redis: one token bucket or sliding
// window per client key, shared by every instance that uses the same
// Redis and Config.Prefix. See the package documentation.
//
// A Store must be made with New. It is safe for concurrent use.
type Store struct {
	client  redis.Scripter
	cfg     Config
	timeout time.Duration

	// openUntil is when Redis may be tried again after a failure, in Unix
	// nanoseconds of the callers' now; 0 while Redis is healthy.
	openUntil atomic.Int64

	redis, fallbacks, errs, timeouts atomic.Uint64 // errs: other than timeouts
}

var _ shed.RateLimitStore = (*Store)(nil)

//go:embed bucket.lua
var bucketLua string

//go:embed window.lua
var windowLua string

var (
	bucketScript = redis.NewScript(bucketLua)
	windowScript = redis.NewScript(windowLua)
)

// New returns a Store deciding in Redis through client: a *redis.Client,
// *redis.ClusterClient or *redis.Ring, or any redis.Scripter. The client
// must be made with ContextTimeoutEnabled, or go-redis ignores the
// deadline that Config.Timeout sets and a slow Redis holds each request
// for the client's ReadTimeout (3 s by default); New checks it on go-redis'
// own clients.
func New(client redis.Scripter, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("redisstore: no client")
	}
	enabled := true
	switch c := client.(type) {
	case *redis.Client:
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		enabled = c.Options().ContextTimeoutEnabled
	}
	if !enabled {
		return nil, errors.New("redisstore: the client must be made with ContextTimeoutEnabled, or the timeout bounds nothing")
	}
	return &Store{client: client, cfg: cfg, timeout: cfg.Timeout}, nil
}

// Take implements shed.RateLimitStore: one round trip to Redis, which
// decides on its own clock (now only paces the retries after a failure).
// It returns an error instead of a decision when Redis fails, takes longer
// than Config.Timeout, or is skipped after a failure (ErrSkipped), and
// when ctx is done; the limiter then decides locally.
func (s *Store) Take(ctx context.Context, key string, q shed.Quota, now time.Time) (shed.RateDecision, error) {
	t := now.UnixNano()
	probe := false
	if u := s.openUntil.Load(); u != 0 {
		// Open: skip Redis until u, then let one caller try.
		if t < u || !s.openUntil.CompareAndSwap(u, t+int64(s.cfg.RetryInterval)) {
			s.fallbacks.Add(1)
			return shed.RateDecision{}, ErrSkipped
		}
		probe = true
	}
	if err := ctx.Err(); err != nil { // the caller's, not Redis's
		if probe {
			s.openUntil.Store(t) // let the next caller try at once
		}
		s.fallbacks.Add(1)
		return shed.RateDecision{}, err
	}
	script, args := bucketScript, []any{strconv.FormatFloat(q.Rate, 'g', -1, 64), strconv.Itoa(q.Burst)}
	if q.SlidingWindow {
		script, args = windowScript, []any{strconv.Itoa(q.Burst), strconv.FormatInt(q.Window.Microseconds(), 10)}
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	res, err := script.Run(rctx, s.client, []string{s.cfg.Prefix + key}, args...).Int64Slice()
	cancel()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("the script returned %d values, not 4", len(res))
	}
	if err != nil && ctx.Err() != nil { // the caller gave up first
		if probe {
			s.openUntil.Store(t)
		}
		s.fallbacks.Add(1)
		return shed.RateDecision{}, ctx.Err()
	}
	if err != nil {
		if isTimeout(err) {
			s.timeouts.Add(1)
		} else {
			s.errs.Add(1)
		}
		s.fallbacks.Add(1)
		s.openUntil.Store(t + int64(s.cfg.RetryInterval))
		return shed.RateDecision{}, fmt.Errorf("redisstore: %w", err)
	}
	if probe {
		s.openUntil.Store(0)
	}
	s.redis.Add(1)
	return shed.RateDecision{
		Allowed:    res[0] == 1,
		Remaining:  int(res[1]),
		Reset:      time.Duration(res[2]) * time.Microsecond,
		RetryAfter: time.Duration(res[3]) * time.Microsecond,
	}, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// Healthy reports whether Redis answered the last call made to it (true
// before the first): false while decisions are local after a failure.
func (s *Store) Healthy() bool { return s.openUntil.Load() == 0 }

// Stats counts a Store's decisions since New.
type Stats struct {
	// Redis is how many decisions Redis made.
	Redis uint64
	// Fallbacks is how many Take left to the limiter's local memory:
	// Redis failed or was too slow, was skipped after a failure, or the
	// caller's context was done.
	Fallbacks uint64
	// Errors is how many calls to Redis failed, Timeouts included.
	Errors uint64
	// Timeouts is how many calls to Redis took longer than
	// Config.Timeout.
	Timeouts uint64
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	t := s.timeouts.Load()
	return Stats{Redis: s.redis.Load(), Fallbacks: s.fallbacks.Load(), Errors: s.errs.Load() + t, Timeouts: t}
}

package fallback

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Cache keeps the last good result per key, to serve when the dependency
// fails or the feature is dimmed. A result younger than Fresh is served
// without a call; an older one is refreshed — by one caller per key at a
// time (single flight), so that a recovering dependency is not stampeded —
// and served, marked stale, if the refresh fails and it is younger than
// MaxStale.
//
// The zero value is not usable; make one with NewCache. It is safe for
// concurrent use.
type Cache[V any] struct {
	fresh, maxStale time.Duration
	now             func() time.Time
	group           singleflight.Group

	mu      sync.Mutex
	entries map[string]entry[V]
}

type entry[V any] struct {
	v  V
	at time.Time
}

// Result says where a value came from.
type Result struct {
	// Stale is set when the value is older than Fresh: the refresh failed
	// or was not attempted (Peek).
	Stale bool
	// Age is how old the value is.
	Age time.Duration
	// Err is the refresh's error when a stale value is served.
	Err error
}

// NewCache returns a cache serving values fresh for fresh and, on failure,
// stale up to maxStale. now defaults to time.Now.
func NewCache[V any](fresh, maxStale time.Duration, now func() time.Time) *Cache[V] {
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{fresh: fresh, maxStale: max(maxStale, fresh), now: now, entries: map[string]entry[V]{}}
}

// Get returns key's value: cached if fresh, else from load. When load fails
// it serves the cached value if it is within MaxStale (Result.Stale), else
// returns load's error.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(ctx context.Context) (V, error)) (V, Result, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.fresh {
		return e.v, Result{Age: now.Sub(e.at)}, nil
	}
	v, err, _ := c.group.Do(key, func() (any, error) {
		v, err := load(ctx)
		if err == nil {
			c.mu.Lock()
			c.entries[key] = entry[V]{v: v, at: c.now()}
			c.mu.Unlock()
		}
		return v, err
	})
	if err == nil {
		return v.(V), Result{}, nil
	}
	if ok && now.Sub(e.at) < c.maxStale {
		return e.v, Result{Stale: true, Age: now.Sub(e.at), Err: err}, nil
	}
	var zero V
	return zero, Result{}, err
}

// Peek returns key's cached value without calling the dependency: what a
// dimmed feature serves instead of the live call. ok is false when nothing
// within MaxStale is cached.
func (c *Cache[V]) Peek(key string) (V, Result, bool) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok || now.Sub(e.at) >= c.maxStale {
		var zero V
		return zero, Result{}, false
	}
	age := now.Sub(e.at)
	return e.v, Result{Stale: age >= c.fresh, Age: age}, true
}

// StaleHeader is set on responses that carry a stale value.
const StaleHeader = "X-Brownout-Stale"

// Mark sets the Age header, and StaleHeader for stale values, on w.
func (r Result) Mark(w http.ResponseWriter) {
	w.Header().Set("Age", strconv.Itoa(int(r.Age/time.Second)))
	if r.Stale {
		w.Header().Set(StaleHeader, fmt.Sprintf("age=%ds", int(r.Age/time.Second)))
	}
}

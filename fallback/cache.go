package fallback

import (
	"container/list"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// CacheConfig configures a Cache. The zero value caches nothing useful: set
// Fresh, and MaxStale for a fallback that outlives a refresh's failure.
type CacheConfig struct {
	// Fresh: a value younger than Fresh is served without a call. Zero:
	// every Get calls, and the cache serves only when the call fails.
	Fresh time.Duration
	// MaxStale: when a refresh fails, a value younger than MaxStale is
	// served, marked stale. It is also the entries' age bound: an older
	// value can never be served, so it is evicted. Default (and at least)
	// Fresh.
	MaxStale time.Duration
	// MaxEntries bounds the cache: storing one more evicts the value
	// written longest ago. Default 10 000.
	MaxEntries int
	// RefreshTimeout bounds a refresh. A refresh runs detached from the
	// callers' contexts (their values kept, their cancellation not), so
	// that a caller who goes away does not fail the others waiting for the
	// same key. Default 10 s.
	RefreshTimeout time.Duration
	// Now returns the time. Default time.Now.
	Now func() time.Time
}

// Cache keeps the last good result per key, to serve when the dependency
// fails or the feature is dimmed. A result younger than Fresh is served
// without a call; an older one is refreshed — by one caller per key at a
// time (single flight), so that a recovering dependency is not stampeded —
// and served, marked stale, if the refresh fails and it is younger than
// MaxStale.
//
// The cache is bounded: at most MaxEntries values, none older than
// MaxStale. Values are kept in the order they were written; the oldest
// goes when the cache is full, and values past MaxStale go at the next Get
// or Peek (amortised O(1): they are all at the old end). A hot key is
// rewritten every Fresh, so write order is close to use order.
//
// The zero value is not usable; make one with NewCache. It is safe for
// concurrent use.
type Cache[V any] struct {
	fresh, maxStale time.Duration
	maxEntries      int
	refreshTimeout  time.Duration
	now             func() time.Time
	group           singleflight.Group

	mu struct {
		sync.Mutex
		entries map[string]*list.Element // of *entry[V]
		order   list.List                // front: written last
	}
}

type entry[V any] struct {
	key string
	v   V
	at  time.Time
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

// NewCache returns a cache.
func NewCache[V any](cfg CacheConfig) *Cache[V] {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 10_000
	}
	if cfg.RefreshTimeout <= 0 {
		cfg.RefreshTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache[V]{fresh: cfg.Fresh, maxStale: max(cfg.MaxStale, cfg.Fresh), maxEntries: cfg.MaxEntries,
		refreshTimeout: cfg.RefreshTimeout, now: cfg.Now}
	c.mu.entries = map[string]*list.Element{}
	return c
}

// Len returns the number of cached values, expired ones included until
// the next Get or Peek evicts them.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.entries)
}

// lookup evicts what is past MaxStale at now and returns key's entry.
func (c *Cache[V]) lookup(key string, now time.Time) (entry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.mu.order.Back(); el != nil && now.Sub(el.Value.(*entry[V]).at) >= c.maxStale; el = c.mu.order.Back() {
		c.remove(el)
	}
	if el, ok := c.mu.entries[key]; ok {
		return *el.Value.(*entry[V]), true
	}
	return entry[V]{}, false
}

// store writes key's value, evicting the oldest beyond MaxEntries.
func (c *Cache[V]) store(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.now() // under the lock: the list stays in time order
	if el, ok := c.mu.entries[key]; ok {
		e := el.Value.(*entry[V])
		e.v, e.at = v, at
		c.mu.order.MoveToFront(el)
		return
	}
	c.mu.entries[key] = c.mu.order.PushFront(&entry[V]{key: key, v: v, at: at})
	for len(c.mu.entries) > c.maxEntries {
		c.remove(c.mu.order.Back())
	}
}

func (c *Cache[V]) remove(el *list.Element) {
	delete(c.mu.entries, el.Value.(*entry[V]).key)
	c.mu.order.Remove(el)
}

// Get returns key's value: cached if fresh, else from load. When load fails
// — or ctx ends first — it serves the cached value if it is within MaxStale
// (Result.Stale), else returns the error.
//
// load runs once per key at a time, on a context that carries the first
// caller's values but not its cancellation, bounded by RefreshTimeout: a
// caller whose ctx ends stops waiting, and the others still get the value.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(ctx context.Context) (V, error)) (V, Result, error) {
	now := c.now()
	e, ok := c.lookup(key, now)
	if ok && now.Sub(e.at) < c.fresh {
		return e.v, Result{Age: now.Sub(e.at)}, nil
	}
	ch := c.group.DoChan(key, func() (_ any, err error) {
		// DoChan runs this on a goroutine of its own, which ends with the
		// refresh (RefreshTimeout at most if load heeds its ctx); a panic
		// there would take the process down, so it becomes the error.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("fallback: cache: refresh of %q panicked: %v", key, r)
			}
		}()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.refreshTimeout)
		defer cancel()
		v, err := load(rctx)
		if err == nil {
			c.store(key, v)
		}
		return v, err
	})
	var err error
	select {
	case r := <-ch:
		if r.Err == nil {
			v, _ := r.Val.(V) // a nil V (an interface type) is stored as a nil any
			return v, Result{}, nil
		}
		err = r.Err
	case <-ctx.Done():
		err = ctx.Err()
	}
	// The value's age when it is served: the wait may have been long.
	if age := c.now().Sub(e.at); ok && age < c.maxStale {
		return e.v, Result{Stale: true, Age: age, Err: err}, nil
	}
	var zero V
	return zero, Result{}, err
}

// Peek returns key's cached value without calling the dependency: what a
// dimmed feature serves instead of the live call. ok is false when nothing
// within MaxStale is cached.
func (c *Cache[V]) Peek(key string) (V, Result, bool) {
	now := c.now()
	e, ok := c.lookup(key, now)
	if !ok {
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

package shed

import (
	"container/list"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimitConfig limits each client. The zero value is a token bucket of
// burst 10 refilled at 2 per second, keyed by the X-User-ID header, else the
// client's IP address.
type RateLimitConfig struct {
	// SlidingWindow switches from a token bucket to a sliding-window
	// counter: at most Burst requests per Window, the previous window
	// weighted by how much of it still overlaps.
	SlidingWindow bool
	// Rate is the token bucket's refill per second. Default 2.
	Rate float64
	// Burst is the bucket's size, or the window's allowance. Default 10.
	Burst int
	// Window is the sliding window's length. Default 5 s.
	Window time.Duration
	// KeyHeader names the header that carries an authenticated user id,
	// set by an auth layer in front (the client must not be able to set
	// it). Default "X-User-ID". Without it the key is the client's IP from
	// the connection (RemoteAddr); proxies' X-Forwarded-For is not trusted.
	KeyHeader string
	// MaxClients bounds the clients remembered; the least recently seen
	// are forgotten (and start with a full allowance). Default 65536.
	MaxClients int
}

func (c RateLimitConfig) withDefaults() (RateLimitConfig, error) {
	if c.Rate == 0 {
		c.Rate = 2
	}
	if c.Burst == 0 {
		c.Burst = 10
	}
	if c.Window == 0 {
		c.Window = 5 * time.Second
	}
	if c.KeyHeader == "" {
		c.KeyHeader = "X-User-ID"
	}
	if c.MaxClients == 0 {
		c.MaxClients = 65536
	}
	switch {
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return c, errors.New("shed: rate limit: rate must be positive")
	case c.Burst < 1:
		return c, errors.New("shed: rate limit: burst must be at least 1")
	case c.Window <= 0:
		return c, errors.New("shed: rate limit: window must be positive")
	case c.MaxClients < 1:
		return c, errors.New("shed: rate limit: max clients must be at least 1")
	}
	return c, nil
}

// clientKey returns the rate-limit and shedding key of a request.
func clientKey(r *http.Request, cfg *RateLimitConfig) string {
	h := "X-User-ID"
	if cfg != nil && cfg.KeyHeader != "" {
		h = cfg.KeyHeader
	}
	if v := r.Header.Get(h); v != "" {
		return "u:" + v
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

type rateLimits struct {
	cfg RateLimitConfig
	mu  sync.Mutex
	m   map[string]*list.Element // of *client
	lru list.List                // front: most recently seen
}

type client struct {
	key    string
	bucket *rate.Limiter
	// sliding window
	start     time.Time
	cur, prev int
}

func newRateLimits(cfg RateLimitConfig) (*rateLimits, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &rateLimits{cfg: cfg, m: map[string]*list.Element{}}, nil
}

// allow takes one request of client key at now and writes the
// X-RateLimit-* headers (and Retry-After when refused) to h.
func (l *rateLimits) allow(h http.Header, key string, now time.Time) bool {
	l.mu.Lock()
	c := l.get(key, now)
	var ok bool
	var remaining int
	var reset, retry time.Duration
	if l.cfg.SlidingWindow {
		ok, remaining, reset, retry = c.window(now, l.cfg.Burst, l.cfg.Window)
	} else {
		ok = c.bucket.AllowN(now, 1)
		tokens := c.bucket.TokensAt(now)
		remaining = max(int(tokens), 0)
		reset = time.Duration((float64(l.cfg.Burst) - tokens) / l.cfg.Rate * float64(time.Second))
		retry = time.Duration(max(1-tokens, 0) / l.cfg.Rate * float64(time.Second))
	}
	l.mu.Unlock()
	h["X-Ratelimit-Limit"] = []string{strconv.Itoa(l.cfg.Burst)}
	h["X-Ratelimit-Remaining"] = []string{strconv.Itoa(remaining)}
	h["X-Ratelimit-Reset"] = []string{strconv.Itoa(ceilSeconds(reset))}
	if !ok {
		h["Retry-After"] = []string{strconv.Itoa(max(ceilSeconds(retry), 1))}
	}
	return ok
}

func ceilSeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// get returns the client's state, remembering it. Callers hold l.mu.
func (l *rateLimits) get(key string, now time.Time) *client {
	if e, ok := l.m[key]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*client)
	}
	if l.lru.Len() >= l.cfg.MaxClients {
		old := l.lru.Back()
		delete(l.m, old.Value.(*client).key)
		l.lru.Remove(old)
	}
	c := &client{key: strings.Clone(key), start: now}
	if !l.cfg.SlidingWindow {
		c.bucket = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
	}
	l.m[c.key] = l.lru.PushFront(c)
	return c
}

// window is the sliding-window counter: the current window's count plus
// the previous window's, weighted by the share of it still inside the
// sliding window.
func (c *client) window(now time.Time, limit int, w time.Duration) (ok bool, remaining int, reset, retry time.Duration) {
	for el := now.Sub(c.start); el >= w; el = now.Sub(c.start) {
		if el >= 2*w {
			c.prev, c.cur = 0, 0
			c.start = now.Add(-(el % w))
			break
		}
		c.prev, c.cur = c.cur, 0
		c.start = c.start.Add(w)
	}
	frac := 1 - float64(now.Sub(c.start))/float64(w)
	used := float64(c.prev)*frac + float64(c.cur)
	reset = w - now.Sub(c.start)
	if used+1 > float64(limit) {
		return false, 0, reset, reset
	}
	c.cur++
	return true, max(int(float64(limit)-used-1), 0), reset, 0
}

package shed

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/brownout/brownout/signals"
)

// Propagate is an http.RoundTripper that passes a request's class and
// deadline downstream, so that a dependency sheds the same requests its
// caller would (no priority inversion) and drops work its caller has given
// up on. The class comes from the context the middleware set (ClassFrom) and
// the deadline from the context's deadline; a header the caller set itself
// is kept. The dependency believes the class only with
// Config.TrustPriority (or signals' MiddlewareConfig.TrustPriority): set
// it on services that only your own services call.
type Propagate struct {
	// Next sends the request. Default http.DefaultTransport.
	Next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (p Propagate) RoundTrip(r *http.Request) (*http.Response, error) {
	next := p.Next
	if next == nil {
		next = http.DefaultTransport
	}
	c, hasClass := ClassFrom(r.Context())
	d, hasDeadline := r.Context().Deadline()
	if (!hasClass || r.Header.Get(signals.PriorityHeader) != "") && (!hasDeadline || r.Header.Get(signals.DeadlineHeader) != "") {
		return next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	if hasClass && r.Header.Get(signals.PriorityHeader) == "" {
		r.Header.Set(signals.PriorityHeader, c.String())
	}
	if hasDeadline && r.Header.Get(signals.DeadlineHeader) == "" {
		r.Header.Set(signals.DeadlineHeader, signals.FormatDeadline(d))
	}
	return next.RoundTrip(r)
}

// ErrThrottled is returned by Throttle when it refuses a request locally.
var ErrThrottled = errors.New("shed: throttled by the client")

// ThrottledError carries the time to wait, when the server said so.
type ThrottledError struct {
	RetryAfter time.Duration // 0: unknown
}

func (e *ThrottledError) Error() string {
	if e.RetryAfter > 0 {
		return "shed: throttled by the client: the server asked to wait " + e.RetryAfter.String()
	}
	return "shed: throttled by the client"
}

func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// Throttle is an http.RoundTripper that refuses requests locally when the
// backend has been refusing them: the client-side adaptive throttling of
// the Google SRE book. Over a sliding window it counts requests (every
// attempt, local refusals included) and accepts (responses other than 429
// and 503, and other than errors), and refuses a new request with
// probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// so that a backend refusing everything sees only a trickle, and one that
// accepts most requests is not throttled at all. A 429 or 503 with
// Retry-After stops requests to that host until then. Local refusals return
// a *ThrottledError wrapping ErrThrottled and do not reach the network.
//
// The zero value is usable: K = 2, a 2-minute window, http.DefaultTransport.
// It is safe for concurrent use.
type Throttle struct {
	Next   http.RoundTripper
	K      float64       // default 2
	Window time.Duration // default 2 min
	Now    func() time.Time
	Rand   func() float64

	mu    sync.Mutex
	slots []throttleSlot // per second, a ring over Window
	until map[string]time.Time
}

type throttleSlot struct {
	sec               int64
	requests, accepts float64
}

func (t *Throttle) setup() {
	if t.slots == nil {
		w := t.Window
		if w <= 0 {
			w = 2 * time.Minute
		}
		t.slots = make([]throttleSlot, int(max(w/time.Second, 1)))
		t.until = map[string]time.Time{}
	}
}

// counts returns the window's requests and accepts at second sec.
func (t *Throttle) counts(sec int64) (req, acc float64) {
	for _, s := range t.slots {
		if sec-s.sec < int64(len(t.slots)) {
			req += s.requests
			acc += s.accepts
		}
	}
	return req, acc
}

func (t *Throttle) slot(sec int64) *throttleSlot {
	s := &t.slots[sec%int64(len(t.slots))]
	if s.sec != sec {
		*s = throttleSlot{sec: sec}
	}
	return s
}

// Probability returns the share of requests the throttle refuses now.
func (t *Throttle) Probability() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setup()
	return t.probability(t.now().Unix())
}

func (t *Throttle) probability(sec int64) float64 {
	k := t.K
	if k <= 0 {
		k = 2
	}
	req, acc := t.counts(sec)
	return max(0, (req-k*acc)/(req+1))
}

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// RoundTrip implements http.RoundTripper.
func (t *Throttle) RoundTrip(r *http.Request) (*http.Response, error) {
	now := t.now()
	sec := now.Unix()
	t.mu.Lock()
	t.setup()
	if u, ok := t.until[r.URL.Host]; ok {
		if now.Before(u) {
			t.slot(sec).requests++
			t.mu.Unlock()
			return nil, &ThrottledError{RetryAfter: u.Sub(now)}
		}
		delete(t.until, r.URL.Host)
	}
	p := t.probability(sec)
	t.slot(sec).requests++
	t.mu.Unlock()

	draw := rand.Float64
	if t.Rand != nil {
		draw = t.Rand
	}
	if p > 0 && draw() < p {
		return nil, &ThrottledError{}
	}
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	refused := err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable)
	t.mu.Lock()
	if err == nil && !refused {
		t.slot(sec).accepts++
	}
	if refused {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			t.until[r.URL.Host] = now.Add(d)
		}
	}
	t.mu.Unlock()
	return resp, err
}

// parseRetryAfter reads delay-seconds or an HTTP date; at most an hour is
// honoured.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, false
		}
		d = time.Duration(min(n, 3600)) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, time.Hour), true
}

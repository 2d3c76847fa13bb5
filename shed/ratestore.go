package shed

import (
	"context"
	"time"
)

// RateLimitStore keeps the clients' allowances for the per-client rate
// limit: this process's memory by default (RateLimitConfig.Store nil), or a
// store shared by a fleet of instances (package shed/redisstore), so that a
// client spreading its requests over N instances is held to one allowance,
// not N.
//
// Take takes one request of key under q and says whether it is allowed;
// the limiter writes the X-RateLimit-* headers and Retry-After from the
// decision, alike whichever store made it. An error means the store could
// not decide (unreachable, too slow): the limiter then decides from its
// local memory, so a store should return an error quickly rather than wait
// — it sits on the request path, before every admitted request. A store
// may keep time by its own clock (a shared store should, so that clock
// skew between instances grants nothing) rather than by now, which is the
// limiter's time of the request.
//
// The key a store is given is a digest of the client key, not the key
// itself (which a client chooses, up to the size of a header): its kind
// ("u:" for a user id, "ip:" for an address, nothing for a key from
// Config.ClientKey) and 128 bits of its SHA-256 in base64url, at most 25
// bytes ([StoreKey]: "u:alice" is "u:X1bkGkX0gPiULKC66Dp-DA"). It is the
// same on every instance, so instances sharing a store meet on each
// client's key.
//
// One store serves one limiter: two limiters sharing a store would share
// their clients' allowances. A store must be safe for concurrent use.
type RateLimitStore interface {
	Take(ctx context.Context, key string, q Quota, now time.Time) (RateDecision, error)
}

// Quota is the allowance a RateLimitStore enforces for each key:
// RateLimitConfig's SlidingWindow, Rate, Burst and Window, with their
// defaults applied and validated (Rate > 0, Burst ≥ 1, Window > 0).
//
// Token bucket: the bucket holds at most Burst tokens, starts full and
// refills at Rate per second; a request takes one token, and is refused
// (taking none) when less than one is left.
//
// Sliding window: a request is allowed while prev·(1 − f) + cur + 1 ≤
// Burst, where cur counts the requests allowed in the current fixed window
// of length Window, prev those of the one before it, and f is the share of
// the current window already gone by.
type Quota struct {
	SlidingWindow bool
	Rate          float64
	Burst         int
	Window        time.Duration
}

// RateDecision is a RateLimitStore's answer for one request: what the
// X-RateLimit-* headers and Retry-After say. Durations are exact; the
// headers round them up to whole seconds.
type RateDecision struct {
	// Allowed says whether the request is admitted.
	Allowed bool
	// Remaining is how many more requests the key may make at once
	// (X-RateLimit-Remaining), after this one; 0 when refused.
	Remaining int
	// Reset is how long until the allowance is whole again
	// (X-RateLimit-Reset): a full bucket, or the end of the current
	// window.
	Reset time.Duration
	// RetryAfter is, when refused, how long until a request may be
	// allowed (Retry-After, at least 1 s); 0 when allowed.
	RetryAfter time.Duration
}

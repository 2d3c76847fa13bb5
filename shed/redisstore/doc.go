// Package redisstore keeps package shed's per-client rate limits in Redis,
// so that a fleet of instances holds each client to one allowance: a
// client whose requests a load balancer spreads over N instances gets a
// burst of B and a rate of R in all, not N·B and N·R.
//
// # Model
//
// A [Store] is a shed.RateLimitStore: put it in shed.RateLimitConfig.Store
// and the limiter asks it first, writing the same X-RateLimit-* headers
// and Retry-After from its decision as from its own memory's. Each
// decision is one Lua script, run atomically by Redis in one round trip
// (EVALSHA; EVAL once after Redis has lost its script cache), on one hash
// per client key — Config.Prefix and the key's digest that the limiter
// gives stores (shed.StoreKey: "u:" and 22 characters for a user id),
// never the client's own id, which may be as long as a header:
//
//   - token bucket (bucket.lua): {tokens, time}; the tokens refill at
//     Rate per second up to Burst since the stored time, one is taken when
//     at least one is there;
//   - sliding window (window.lua), when RateLimitConfig.SlidingWindow:
//     {window start, this window's count, the previous one's}, the
//     previous one weighted by how much of it still overlaps.
//
// Both are shed.Quota's semantics, the same as the limiter's own memory.
// Time is Redis's (TIME inside the script), never the instances': their
// clock skew grants nothing, and a Redis clock stepping back (a failover)
// refills nothing. A key expires when its state would be a new client's
// (the bucket full again; both windows past), so Redis holds only the
// clients seen lately. A refusal writes nothing.
//
// # Failure
//
// Redis sits on the request path, so it is never waited on for long: a
// decision that takes longer than Config.Timeout (10 ms by default), or
// fails, is made by the limiter's local memory instead — each instance
// then holds each client to the full limit on its own (a fleet of N
// admits up to N times it) until Redis is back. After a failure Redis is
// skipped for Config.RetryInterval (1 s) so that a dead Redis costs one
// timeout a second rather than one a request (go-redis retries even a
// refused connection until the deadline); then one request tries it
// again, and when it answers every instance decides in Redis again.
// [Store.Stats], [Store.Healthy] and the Store as a prometheus.Collector
// say which decides and how often Redis failed.
//
// The go-redis client must be made with ContextTimeoutEnabled: without
// it go-redis ignores the deadline, and a slow Redis would hold requests
// for the client's ReadTimeout.
//
// # Usage
//
//	rdb := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(rdb, redisstore.Config{Prefix: "shop:ratelimit:"})
//	reg.MustRegister(store)
//	s, err := shed.New(shed.Config{RateLimit: &shed.RateLimitConfig{Rate: 2, Burst: 10, Store: store}})
//
// One Store serves one limiter: give a second limiter (a flash deal's
// shed.RateLimiter) a Store of its own, with another Prefix.
//
// A Store is safe for concurrent use; it starts no goroutine.
package redisstore

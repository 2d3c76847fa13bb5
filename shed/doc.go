// Package shed is admission control: it decides at the door, before any
// expensive work, which requests a server takes, and refuses the others
// early and cheaply.
//
// # Model
//
// A [Shedder] wraps a handler (net/http middleware; echo uses it through
// echo.WrapMiddleware) or any transport ([Shedder.Acquire]). For each
// request, in order:
//
//  1. Classify: critical, default or sheddable (signals.Class), from a
//     [Routes] table or Config.Classify; default without either. A
//     client's X-Priority header may lower the class, never raise it —
//     anyone can send it, and critical is never shed — unless
//     Config.TrustPriority, for services whose callers are your own
//     services forwarding their class ([Propagate]): then the header, when
//     it names a class, is the class. [Shedder.Acquire] reads no header:
//     its caller gives the class.
//  2. Per-client rate limit (optional, [RateLimitConfig]): a token bucket
//     (burst 10, 2/s) or a sliding-window counter, keyed by an
//     authenticated user id header, else the client IP: the connection's,
//     or, when it comes from a load balancer in Config.TrustedProxies,
//     the address forwarded in Config.ProxyHeader (X-Forwarded-For or RFC
//     7239 Forwarded), read from the right past the trusted hops; other
//     peers' headers are ignored. Config.ClientKey may choose the key
//     instead; the cascade uses the same one ([Shedder.ClientKey]). 429
//     with Retry-After and X-RateLimit-Limit/-Remaining/-Reset.
//  3. The brownout cascade (Config.ShedLevel, from package dimmer): a share
//     of the sheddable, then the default clients, sticky per client key,
//     is refused; critical never. The clients are picked by SipHash of
//     their key under a seed they cannot know (Config.ShedSeed: a fleet's
//     daemon publishes one; random per Shedder otherwise), so nobody can
//     choose a key that is shed last. Rate limits keep only hashes of the
//     keys too: a client's id costs 8 bytes in memory, 25 in a store.
//  4. The gate: a deadline already passed is refused at no cost; a
//     request starts at once when nothing waits and the cost in flight is
//     under the adaptive concurrency limit ([LimitConfig]: it finds the
//     hidden bottleneck — a worker pool, a database — by comparing latency
//     at the limit with latency at half the limit, re-measured in short
//     probes; the model is on LimitConfig); otherwise it queues in its
//     class's queue — unless its estimated wait (the cost queued ahead ÷
//     measured throughput) exceeds what its class may wait: queues are
//     bounded in time, K ≈ μ × wait, not in requests. Queues are served
//     by priority, strictly but for an assured share of the admitted cost
//     for the lower classes ([GateConfig].Assured; sheddable 5 % by
//     default): under a long overload the cheap sheddable requests — an
//     analytics beacon costs 1/30 of a page — would otherwise starve and
//     be refused to save work worth next to nothing. CoDel (RFC 8289) watches the queues: when they
//     have not been empty for an Interval and the oldest request has waited
//     longer than Target, the queue is standing until it next empties;
//     meanwhile requests may wait only Target and the newest are served
//     first (adaptive LIFO, as in Facebook's Fail at Scale), FIFO
//     otherwise. Requests whose deadline passes while queued are dropped
//     before they start.
//     Critical first: the gate measures the cost each class brings per
//     second and the cost the server completes per second while it is
//     saturated. A class is over capacity when it and the classes above
//     bring more than 1.1 × that throughput; only such a class is cut
//     short by CoDel (a class within capacity waits its MaxWait), and
//     while it is, every class below it is refused at the door and its
//     queue dropped. So no default or sheddable request is admitted while
//     a critical one is refused, but through sheddable's assured share,
//     which is never taken while a critical request waits nor while
//     critical work itself is over capacity. When the load falls under
//     the throughput the cutting stops with it: a class enters the
//     overload on rates averaged over 5 s and leaves it when those or the
//     last second's fall under the throughput, so refusals stop within
//     about 2 s of the fall, from a spike of three times the throughput
//     too. A probe of
//     the adaptive limit, which halves what the gate admits, ends at once
//     when the load is within capacity and a request has waited half its
//     class's MaxWait: the queue is the probe's, not the load's.
//
// Costs count, not requests ("one search = 100 profile views"): limits and
// queues are in cost units, estimated up front from the route and its
// parameters ([Route].Scale) and corrected by measured service time, so
// under overload the expensive, less critical requests go first.
//
// Refusals are 503 (overload) or 429 (rate), with Retry-After,
// Cache-Control: no-store and an application/problem+json body (type,
// title, status, detail, reason) built once at start-up; nothing is logged
// per refusal. Everything is counted in the signals.Recorder by class and
// reason, with queue sojourn per class, in flight, latency, goodput and
// throughput — the signals package dimmer reads.
//
// Admitted requests carry their class ([ClassFrom]) and deadline (the
// context's) into the handler; [Propagate] passes both on to outbound
// calls, so dependencies shed the same requests (no priority inversion) and
// drop work nobody waits for. While the Recorder has features registered
// (signals.Recorder.Features), they also carry a feature tally
// (signals.RequestTally, in the same context value, no allocation more):
// the provider marks the features it evaluates, and at completion the
// request's service time from admission counts as each marked feature's
// on or off (see signals' "Feature tallies"). On the client side, [Throttle] is the SRE
// book's adaptive throttling: it refuses locally with probability
// max(0, (requests − K·accepts)/(requests + 1)), K = 2, and honours
// Retry-After.
//
// # Defaults
//
//	MaxWait        critical 800 ms, default 300 ms, sheddable 100 ms
//	CoDel          target 100 ms, interval 500 ms (web requests of ~10 ms
//	               with variable service times; 50/100 for regular ones)
//	Limit          adaptive from 8, between 1 and 1000 cost units, held
//	               where latency is 1.6 × latency at half the limit,
//	               re-measured about every 5 s while the limit is in use
//	Rate limit     off; when on: 10 burst, 2/s, X-User-ID else client IP (no proxy trusted)
//	Retry-After    1 s on 503
//
// Put the admission bounds under the latency objective (MaxWait and
// Target below the p99 target): then admission holds the objective, and a
// brownout controller reading both latency and reject.ratio dims features
// before admission has to refuse much.
//
// # Lab
//
// The gate (internal/gate) never blocks and takes the time as an argument,
// so package sim runs this exact code in virtual time (sim.NewShed, with
// the adaptive limit told nothing about the server); the README has its
// results beside the sources' tables and on real HTTP.
//
// # Usage
//
//	s, _ := shed.New(shed.Config{
//		Recorder:  rec,                                     // signals
//		ShedLevel: ctl.ShedLevel,                           // dimmer
//		RateLimit: &shed.RateLimitConfig{},
//	})
//	http.ListenAndServe(addr, s.Middleware(app))
//	client := &http.Client{Transport: shed.Propagate{Next: &shed.Throttle{}}}
//
// A Shedder is safe for concurrent use.
package shed

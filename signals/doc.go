// Package signals measures what a brownout controller reacts to: request
// latency, queue sojourn, in-flight work and request outcomes, and reads the
// same signals from a fleet.
//
// # Model
//
// A [Recorder] holds the live signals of one process. Request paths write to
// it without locks or allocation; a reader (the controller's tick, a
// Prometheus scrape) takes a [Snapshot] at a time it passes in.
//
//   - Latency lives in a [Window]: a log-linear histogram (1024 buckets, 32
//     per power of two, so any value is within 1.6 % of its bucket's
//     midpoint from 1 µs to 68 s) kept cumulatively, in shards — four per
//     processor, picked by a hash of the writer's stack (one per processor
//     with -tags brownout_procpin; see shard.go) — so that cores do not
//     fight over cache lines, and a ring of
//     time slots (default 10 × 1 s). At each slot boundary the reader copies
//     the counts; the window is "now − copy at the oldest slot". Quantiles
//     use the nearest-rank definition, the same as sorting the samples.
//   - Queue sojourn (time from arrival to the start of work) lives in a
//     [Sojourn] per priority class: a Window plus CoDel's standing-queue
//     test (RFC 8289) — the minimum sojourn over the last interval, and
//     "above target since".
//   - [Counters] count arrivals, completions, failures, goodput (completed,
//     not failed, within deadline) and rejections by [Class] and [Reason],
//     plus in-flight work.
//
// A [Snapshot] holds every scalar signal by [Key] (latency.p99, sojourn.min,
// rate.goodput, …) in base units, each present or missing: a signal that
// could not be measured is missing, never zero, so the controller can tell
// "fast" from "unknown".
//
// # Getting signals in
//
// [Middleware] wraps a net/http handler and records latency, in-flight work
// and the outcome by status. Package shed records the same signals plus
// queueing and rejections when it is the admission layer.
//
// # Feature tallies
//
// A brownout controller can estimate what each optional feature costs by
// contrasting, within one tick, the service time of the requests that
// rendered it against those that did not: while a feature's level is
// fractional, the dimmer's bucketing decides by user, so the two groups
// are a randomised experiment the controller runs anyway. Register the
// features with [Recorder.Features] (at most [MaxFeatures], 64). From then
// on:
//
//   - [Middleware], and package shed's middleware, give each request a
//     [RequestTally] in its context: a bit per feature, no allocation
//     more than without (Middleware sets it on the request in place; shed
//     folds it into the context value it already makes).
//   - The in-process OpenFeature provider (package provider) marks each
//     boolean evaluation made with the request's context, on or off per
//     the value it answered ([Evaluated]). An app that evaluated a flag but
//     did not render the feature says so with [Skipped]; one that renders
//     without asking, with [Rendered]; the app's marks win. An evaluation
//     without a tally in its context counts as unattributed
//     ([Recorder.Unattributed]), never as off.
//   - At completion the middleware adds the request's service time in
//     seconds (the handler's duration; for shed, from admission, the wait
//     at the gate left out) to each marked feature's On or Off [Moments];
//     features the request did not mark are not counted. Writers use
//     sharded atomics, no lock.
//   - [Recorder.Snapshot] fills [Snapshot.Tallies] with one [Tally] per
//     feature, the counts since the previous Snapshot; [Collector]
//     exports the cumulative counts as brownout_feature_requests_total
//     {feature, state=on|off|unattributed},
//     brownout_feature_service_seconds_total and
//     brownout_feature_service_seconds_squared_total {feature, state}
//     (the squares give the variance, hence the standard error of a cost
//     estimate); a [Pusher] carries them, and a [PushSource]'s Snapshot
//     sums each live instance's increase over its last push interval.
//
// [ScrapeSource] and [PromQLSource] leave Snapshot.Tallies empty: query
// the exported counters yourself if you need them from Prometheus.
//
// # Getting signals out
//
// [Collector] exports a Recorder to Prometheus under brownout_ names,
// histograms with both classic and native buckets built at scrape time (the
// request path pays nothing for them). For the daemon, [ScrapeSource] reads
// those metrics straight from instances' /metrics endpoints and computes
// fleet-wide windowed quantiles from bucket deltas, and [PromQLSource]
// queries a Prometheus server when the fleet is too large to scrape; apps
// that cannot be scraped push instead (see Push). The sources name the
// source and the metric in their errors and leave failed signals missing,
// and each reports a [SourceHealth] (ok, last success, last error, its
// targets or instances) from its Health method, for status pages and
// metrics.
//
// # Push
//
// An app the daemon cannot scrape (behind NAT, no listener, short-lived)
// runs a [Pusher], which POSTs its Recorder's cumulative state every
// second to the daemon's POST /v1/signals, a [PushSource]; the daemon's
// controller reads the PushSource like any source:
//
//	p, err := signals.NewPusher(rec, signals.PusherConfig{
//		URL: "http://brownoutd:8080/v1/signals", Instance: hostname, Token: token})
//	...
//	go p.Run(ctx) // until ctx ends; failures back off with jitter
//
// Several instances push, and p99s cannot be averaged, so a push carries
// counts, not quantiles: the cumulative counters and histogram buckets
// Collector exports on /metrics. PushSource keeps each instance's pushes
// of the last Window and computes the fleet's signals with the code
// ScrapeSource uses for its targets (fleet.go): sums across instances,
// quantiles from the merged histograms, rates over the window, and a
// counter that went down taken as a restart (a reset, as in Prometheus,
// never a negative rate). An instance silent for Expire (default 15 s)
// leaves the fleet; with none live, Snapshot fails with ErrNoInstances and
// the controller holds, then goes stale.
//
// The wire format is JSON, versioned (testdata/push_v1.json is a whole
// body):
//
//	{"v": 1, "instance": "shop-1",
//	 "time": "2026-11-11T00:00:00.6Z", "start": "2026-11-10T23:00:00Z",
//	 "in_flight": 2, "gate": {"limit": 8, "in_flight": 3, "queued": 1},
//	 "latency": {"count": 27, "sum": 1.3015,
//	   "buckets": [[0.001, 0], …, [0.025, 25], …, [0.5, 27], …, [60, 27]],
//	   "native": {"schema": 4, "zero": 0, "buckets": [[-90, 25], [-21, 2]]}},
//	 "classes": {
//	   "critical": {"arrived": 10, "completed": 9, "failed": 2, "good": 7, "waited": 6,
//	     "rejected": {"codel": 1}, "sojourn": {…}, "sojourn_min": 0.001, "standing": false},
//	   "default": {…}, "sheddable": {…}},
//	 "features": {"recommendations": {"on": {"n": 12, "sum": 0.91, "sum_sq": 0.0788},
//	   "off": {"n": 9, "sum": 0.52, "sum_sq": 0.0331}, "unattributed": 0}}}
//
// v, instance and time are required, everything else optional. Durations are
// seconds; counts are whole, non-negative numbers. Classic buckets are
// [upper bound, cumulative count], bounds ascending, the +Inf bucket
// implied by count; native buckets are [index, count], indices ascending,
// bucket i holding (2^((i−1)/2^schema), 2^(i/2^schema)] as in Prometheus.
// time is the instance's clock when it read its Recorder and start when
// its Pusher started: within one run, pushes are ordered by time (a late
// or repeated one is refused with 409; a push without time, which could
// not be ordered, and one more than MaxClockAhead (10 s) ahead of the
// source's clock, which would shut out the pushes after it, with 400) and
// rates are timed by it; a push from a run
// that started before the one pushing under the same instance id is
// refused with 409 too (two processes share the id). Decoders ignore the
// fields, classes and reasons they do not know, so version 1 can grow
// fields during a rolling upgrade; any other v is refused.
//
// A push is checked whole before it is applied, and a refused push changes
// nothing: 400 for malformed JSON or an invalid value (negative, not whole,
// out of range, bounds or indices not ascending, counts not cumulative),
// 413 over MaxBody (256 KiB) or 4096 histogram buckets, 415 for a
// Content-Type other than JSON, 408 for a body that stopped arriving, 409
// for a late push or a shared id, 429
// (with Retry-After) from a new instance past MaxInstances, 405 (with Allow)
// for a method other than POST, each with an application/problem+json body (type urn:brownout:push:<kind>, title,
// status, detail) whose detail names the field, e.g. "latency.buckets[3]:
// upper bound 0.1 is not above the previous bucket's 0.25: bounds must
// ascend". A push holds at most 64 features (MaxFeatures), each name
// 1 to 128 bytes of UTF-8 without control characters or surrounding
// space; more, or another name, is a 400. What the source keeps is
// bounded: per instance at most 64
// readings and 8192 buckets (readings inside the window are thinned
// evenly past either, keeping its base and the newest) and the feature
// tallies of its last two pushes (at most 64 features each, about 13 KB),
// and MaxInstances instances. ServeHTTP does no authentication: the daemon mounts it behind
// its token check, and a Pusher sends its Token as a bearer token.
//
// # Usage
//
//	rec := signals.NewRecorder(signals.Config{})
//	reg.MustRegister(signals.NewCollector(rec, signals.CollectorOpts{}))
//	handler = signals.Middleware(rec, signals.MiddlewareConfig{})(handler)
//	...
//	snap := rec.Snapshot(time.Now()) // once per controller tick
//	if p99, ok := snap.Duration(signals.LatencyP99); ok { ... }
//
// # Concurrency
//
// Every exported type is safe for concurrent use. Writers never block;
// readers serialize on a per-structure mutex and never call back into user
// code while holding it.
package signals

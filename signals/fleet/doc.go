// Package fleet carries a fleet's signals to a brownout daemon: the
// sources a daemon's controller reads (a scrape of the instances'
// /metrics, PromQL against a Prometheus server, the instances' pushes) and
// the Pusher an app runs to push, with the push's wire format.
//
// # Why a package of its own
//
// Package signals is what every app links: the Recorder, its Snapshot,
// the middleware and the Collector. The transport is what a daemon needs,
// and an app that pushes to one: an HTTP server and client, a JSON wire
// format with its checks, a Prometheus API client and exposition parser.
// It sits under signals (signals/fleet) because it moves the same signals
// — the same Snapshot keys, the metrics Collector exports — between
// processes, and it imports signals, never the reverse. The name is the
// code's own word: every source here merges the instances of a fleet into
// one Snapshot (aggregate.go), and the Pusher puts an instance in one.
//
// # Model
//
// Several instances serve, and p99s cannot be averaged, so the fleet's
// signals are computed from counts, not from each instance's quantiles:
// every source keeps, per instance, its cumulative readings of the last
// Window (a reading is a scrape of its /metrics or one of its pushes:
// the counters and histogram buckets Collector exports), and a Snapshot
// sums over the live instances the difference between each one's latest
// reading and the one a Window before: sums across instances, quantiles
// from the merged histograms (native buckets when every instance has them,
// else classic ones with linear interpolation, as PromQL's
// histogram_quantile), rates over the window, and a counter that went down
// taken as a restart (a reset, as in Prometheus, never a negative rate).
// ScrapeSource and PushSource share that code; PromQLSource asks a
// Prometheus server, which does the same sums.
//
// The sources name the source and the metric in their errors and leave
// failed signals missing, never zero; each reports a signals.SourceHealth
// (ok, last success, last error, its targets or instances) from its Health
// method, for status pages and metrics. ScrapeSource reads each
// instance's feature tallies and work (the brownout_feature_* and
// brownout_work_* counters Collector exports) between its last two
// scrapes, as PushSource reads them between its last two pushes: a
// daemon learns the features' costs from either as an app does embedded.
// PromQLSource reads them, with the arrivals and completions, as the
// fleet's increase over the latest whole period (PromQLConfig.Period, at
// least two of Prometheus's scrape intervals; periods end at its
// multiples and never overlap) in one query, so that every count is of
// the same samples.
//
// # Push
//
// An app the daemon cannot scrape (behind NAT, no listener, short-lived)
// runs a [Pusher], which POSTs its Recorder's cumulative state every
// second to the daemon's POST /v1/signals, a [PushSource]; the daemon's
// controller reads the PushSource like any source:
//
//	p, err := fleet.NewPusher(rec, fleet.PusherConfig{
//		URL: "http://brownoutd:8080/v1/signals", Instance: hostname, Token: token})
//	...
//	go p.Run(ctx) // until ctx ends; failures back off with jitter
//
// On a daemon of several services (brownoutd's services:), each service
// has its own PushSource, tokens and MaxInstances: a Pusher says its
// service with PusherConfig.Service (the X-Brownout-Service header, read
// before the body), or pushes to the service's path,
// http://brownoutd:8080/services/{name}/v1/signals. DefaultQueriesFor
// selects one service's series where one Prometheus server scrapes
// several.
//
// PushSource keeps each instance's pushes of the last Window. An instance
// silent for Expire (default 15 s) leaves the fleet; with none live,
// Snapshot fails with ErrNoInstances and the controller holds, then goes
// stale. Its Snapshot's Tallies sum each live instance's increase over its
// last push interval.
//
// With several URLs (PusherConfig.URLs: one daemon's replicas, brownoutd
// in HA, where every replica ingests every instance's signals so that its
// windows are warm when it comes to lead), each round's body is pushed to
// every replica: one reading of the Recorder, the same bytes to each.
// Each URL has its own sender goroutine, failures, backoff and health: a
// replica that refuses backs off alone, one that hangs holds its own
// sender for up to Timeout and skips the rounds meanwhile, and neither
// delays the pushes to the others. Run owns those goroutines (one per URL,
// at most 16) and returns after they end.
//
// A Pusher reports how its pushes fare from Health (a signals.SourceHealth,
// as the sources report theirs; HealthByURL for each replica): a daemon that refuses its token (401 or
// 403) is [ErrUnauthorized], said once in the log, at WARN, with the URL
// and what to fix, and shown in its health until a push is accepted
// again; every change of state is one line, never one per push.
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
//	   "off": {"n": 9, "sum": 0.52, "sum_sq": 0.0331}, "unattributed": 0}},
//	 "work": {"n": 30, "sum": 1.61, "sum_sq": 0.1292}}
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
// rates are timed by it; a push from a run that started before the one
// pushing under the same instance id is refused with 409 too (two
// processes share the id). Decoders ignore the fields, classes and reasons
// they do not know, so version 1 can grow fields during a rolling upgrade;
// any other v is refused.
//
// A push is checked whole before it is applied, and a refused push changes
// nothing: 400 for malformed JSON or an invalid value (negative, not whole,
// out of range, bounds or indices not ascending, counts not cumulative),
// 413 over MaxBody (256 KiB) or 4096 histogram buckets, 415 for a
// Content-Type other than JSON, 408 for a body that stopped arriving, 409
// for a late push or a shared id, 429 (with Retry-After) from a new
// instance past MaxInstances, 405 (with Allow) for a method other than
// POST, each with an application/problem+json body (type
// urn:brownout:push:<kind>, title, status, detail) whose detail names the
// value's path, map keys quoted and array elements by index, e.g.
// "latency.buckets[3]: upper bound 0.1 is not above the previous bucket's
// 0.25: bounds must ascend", `features["recs"].on.sum: string is not a
// number`. A push holds at most 64
// features (signals.MaxFeatures), each name 1 to 128 bytes of UTF-8
// without control characters or surrounding space; more, or another name,
// is a 400. The feature tallies and the work are checked as what a
// Recorder can count, so that no push moves the estimates the daemon
// learns from them by more than real requests would: each moments'
// mean time at most an hour a request, their sum of squares one that
// their times can have (sum² ≤ n·sum_sq, within the rounding of n float
// additions), no feature tallying more requests or time than the work
// (a feature first named in a later push included, whose whole tally is
// taken for the interval's), and within one run (one start) no count
// going down; each is a 400 whose detail names the feature, and the
// instance's health shows it. An app that pushes consistent lies is not
// caught: give each app its own push token (see the daemon's auth), so
// that a push is an app's. What the source keeps is bounded: per instance at most 64
// readings and 8192 buckets (readings inside the window are thinned evenly
// past either, keeping its base and the newest) and the feature tallies of
// its last two pushes (at most 64 features each, about 13 KB), and
// MaxInstances instances. ServeHTTP does no authentication: the daemon
// mounts it behind its token check, and a Pusher sends its Token as a
// bearer token.
//
// # Files
//
// aggregate.go merges a fleet's readings into a Snapshot; hist.go is the
// histogram read from an exposition or a push; scrape.go, promql.go and
// push.go are the three sources, pushwire.go the push's format, pusher.go
// the app's side, health.go the sources' health bookkeeping and names.go
// the class and reason names read from other processes.
//
// # Concurrency
//
// Every exported type is safe for concurrent use; a source serializes on
// its own mutex and calls no user code while holding it. A Pusher's Run
// and its one sender per URL are its goroutines, ended by its context.
package fleet

// Package signals measures what a brownout controller reacts to: request
// latency, queue sojourn, in-flight work and request outcomes, in one
// process. Reading the same signals from a fleet (scrape, PromQL, push) is
// package fleet's (signals/fleet), so that an app that only records its
// requests links none of the transport.
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
//     features the request did not mark are not counted. Every tallied
//     request's time also joins the Work moments, features or none: a
//     feature's tally counts only the requests that evaluated it, and
//     the work the load brings is that of every request (a cart, a
//     checkout). Writers use sharded atomics, no lock.
//   - [Recorder.Snapshot] fills [Snapshot.Tallies] with one [Tally] per
//     feature, the counts since the previous Snapshot, and
//     [Snapshot.Work] with every tallied request's; [Collector]
//     exports the cumulative counts as brownout_feature_requests_total
//     {feature, state=on|off|unattributed},
//     brownout_feature_service_seconds_total and
//     brownout_feature_service_seconds_squared_total {feature, state}
//     (the squares give the variance, hence the standard error of a cost
//     estimate), and the Work moments as brownout_work_requests_total,
//     brownout_work_seconds_total and brownout_work_seconds_squared_total;
//     package fleet's Pusher carries them, and its PushSource's
//     Snapshot sums each live instance's increase over its last push
//     interval.
//
// # Getting signals out
//
// [Collector] exports a Recorder to Prometheus under brownout_ names,
// histograms with both classic and native buckets built at scrape time (the
// request path pays nothing for them). [ExportBuckets] is that conversion,
// shared with package fleet's Pusher so that a scrape and a push of one
// Recorder carry the same buckets.
//
// A daemon reads the same signals from a fleet with package fleet: its
// sources scrape those metrics from the instances, query a Prometheus
// server, or take the instances' pushes, and each reports a
// [SourceHealth] (ok, last success, last error, its targets or
// instances) for status pages and metrics; the type lives here so that
// whoever shows a source's health (package api's state) needs none of the
// transport.
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

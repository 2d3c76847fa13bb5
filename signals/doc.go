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
//     midpoint from 1 µs to 68 s) kept cumulatively, with one copy per
//     processor so that cores do not fight over cache lines, and a ring of
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
// # Getting signals out
//
// [Collector] exports a Recorder to Prometheus under brownout_ names,
// histograms with both classic and native buckets built at scrape time (the
// request path pays nothing for them). For the daemon, [ScrapeSource] reads
// those metrics straight from instances' /metrics endpoints and computes
// fleet-wide windowed quantiles from bucket deltas, and [PromQLSource]
// queries a Prometheus server when the fleet is too large to scrape. Both
// name the source and the metric in their errors and leave failed signals
// missing.
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

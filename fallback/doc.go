// Package fallback keeps one slow dependency from stopping the whole site:
// a guard for every dependency, and the planned fallbacks behind them.
//
// The sources' incident: the SMS provider went from 200 ms to 30 s and
// checkout froze, every request holding a worker while it waited. With a
// [Guard] the checkout waits at most the provider's normal p99 plus a
// timeout, and only until the breaker opens; the SMS itself is already in
// an [Outbox], written in the same transaction as the order, and goes out
// when the provider recovers.
//
// # Guards
//
// [New] builds a guard for one dependency, and [Call] runs a call under it:
//
//   - timeout: the p99 of the dependency's successful calls × 1.5 (a
//     signals.Window of their latency over 30 s), between MinTimeout and
//     MaxTimeout, never beyond the caller's remaining deadline. A timed-out
//     call is not a latency sample (its duration is the timeout, so 1 % of
//     them would make the p99 the timeout and the timeout climb to
//     MaxTimeout): timeouts are their own signal, the timeout rate
//     ([Status].TimeoutRate);
//   - bulkhead: at most MaxConcurrent calls; the next fails at once with
//     [ErrFull], so it goes to its fallback instead of queueing;
//   - circuit breaker: opens when ≥ 50 % of the last 20 attempts it
//     recorded failed or timed out, stays open 30 s (calls fail at once
//     with [ErrOpen]), then lets 3 trial attempts through and closes if
//     they all succeed. A timeout, a 5xx or 429, a broken connection or any
//     error the guard cannot read is a failure; an answer is a success,
//     and so is an answer that refuses the request (400, 404: the
//     dependency works, and one client's bad input must not open the
//     breaker for all). What says nothing of the dependency is not
//     recorded: a bulkhead refusal (the dependency was not called), and an
//     attempt whose caller cancelled it or whose caller's deadline ended
//     before the dependency was due to answer (the timeout last measured
//     from its successes; MaxTimeout before any) — a trial of that kind
//     gives its place back, so only real successes close the breaker. A
//     caller's deadline that ended later is a dependency that did not
//     answer in its time: a failure. So is an answer that comes after the
//     guard's timeout (fn must heed its context: the guard waits for it);
//     a trial whose fn does not return holds its place until it does;
//   - retry: only [Retryable] errors (timeouts, connection resets, 429,
//     502, 503, 504; never 400/401/404), at most MaxAttempts, with full
//     jitter backoff or the sources' schedule (2^n s + a random 0–1 s), a
//     server's Retry-After honoured, and a [RetryBudget] shared by guards:
//     retries stay under 10 % of original calls (beyond it, the call ends
//     with its last error and the refusal is counted).
//
// The bulkhead and retry policies are failsafe-go's; the breaker is the
// guard's own, because failsafe-go's records every execution as a success
// or a failure and cannot leave one out. The guard composes them (retry
// outside the breaker, outside the bulkhead) and adds the adaptive
// timeout, the ratio budget, the backoff schedule, Retry-After and
// counters. Breaker transitions ([Guard.OnTransition]), bulkhead
// rejections and budget exhaustion are in [Guard.Status] and exported by
// [Collector] as brownout_dependency_* metrics.
//
// # Fallbacks
//
//   - [Cache]: the last good result per key, served when the guard fails
//     (within a freshness budget, marked stale: the Age and
//     X-Brownout-Stale headers) or when the feature is dimmed ([Cache.Peek]:
//     no call at all); refreshes are single-flight, so a recovering
//     dependency is not stampeded, and detached from the callers'
//     cancellation (bounded by RefreshTimeout, default 10 s), so a client
//     that goes away does not fail the others waiting for the same key.
//     It holds at most MaxEntries values (default 10 000) and none older
//     than MaxStale.
//   - [Section]: renders an optional part of a page, or its placeholder
//     when the flag is off or the part fails.
//   - [Outbox]: deferred work written in the business transaction
//     (SQLite by default, PostgreSQL supported), drained oldest first at
//     the provider's contracted pace, only while the breaker allows, with
//     backoff, and moved to a dead-letter table after MaxAttempts (a
//     Sender's panic is a failed attempt, so a poison message ends there,
//     not in a crash). Attempts count sends: a call the Sender's guard
//     refused ([ErrOpen], [ErrFull], or the Sender's own [ErrNotSent]) is
//     due again after [NotSentDelay] without using one up; keep the
//     drain's Concurrency below the guard's MaxConcurrent. Each
//     message carries an idempotency key; delivery is at least once, and
//     once per key at a deduping receiver. Several drainers may share an
//     outbox: the pace (default 500/s, burst 1) is the fleet's, one GCRA
//     row in the database from which every send takes its time; claims
//     are leased (at most Rate × Lease messages, renewed while sending)
//     and fenced by a claim id in the row, so a drainer whose lease ran
//     out can neither delete nor reschedule a message another drainer
//     holds. Depth, oldest age, sent, dead-lettered and fenced are metrics.
//
// # Usage
//
//	sms, _ := fallback.New(fallback.Config{Name: "sms", MaxConcurrent: 20})
//	box, _ := fallback.NewOutbox(ctx, db, fallback.OutboxConfig{Allow: sms.Allows})
//	go box.Run(ctx, sendSMS)
//	// in the handler, one transaction:
//	tx, _ := db.BeginTx(ctx, nil)
//	insertOrder(tx, order)
//	box.Enqueue(ctx, tx, fallback.Message{Key: "sms-" + order.ID, Payload: text})
//	tx.Commit()
//
// Everything exported is safe for concurrent use.
package fallback

// Package deps simulates the 11.11 shop's three dependencies, each an
// http.Handler with fault knobs, and gives the shop a small typed client
// for each.
//
//   - [PaymentGateway]: POST /v1/charges {"order", "amount_cents",
//     "idempotency_key"} → 201 {"id": "ch_…"}. 30 ms. The Idempotency-Key
//     header (or the body's idempotency_key) makes a retry return the same
//     charge, charged once; a key reused for another order or amount is a
//     409, and so is a key whose charge was voided (charge-voided: a
//     voided charge is never answered as if it stood). POST
//     /v1/charges/{id}/void gives a charge back; POST /v1/cancels
//     {"idempotency_key"} voids the charge made under a key, or, if none
//     was, makes sure none will be (for a client that does not know
//     whether its charge was made). GET /admin/charges lists the charges
//     made, voided or not.
//   - [SMSProvider]: POST /v1/messages {"to", "body"} with a required
//     Idempotency-Key header → 201 {"id": "msg_…"}. 200 ms; slow, 30 s. Its
//     contract, 500 messages/s for all clients together (a token bucket,
//     burst 50), is enforced with 429 and Retry-After. Like the sources'
//     provider, it delivers what it accepted at the end of the latency
//     even when the client timed out and went away; the client's retries,
//     under the same key, are answered 200 and absorbed: counted as
//     duplicates_absorbed, not delivered again ([SMSProvider.Delivered] is
//     the per-key count, [SMSProvider.DeliveredContent] what a handset
//     sees; GET /admin/deliveries lists the per-key counts).
//   - [RecsEngine]: GET /v1/recommendations?product=ID&user=U → a JSON
//     array of 5 product ids, the same for the same product and user. 50
//     ms; slow, 600 ms.
//
// # Fault knobs
//
// Each dependency has its knobs ([Fault]; the SMS provider's [SMSFault]
// adds its contract rate and burst): the latency, a slow mode with its own
// latency, and an error rate (503 after the latency). They change at run
// time from Go (Fault, SetFault, UpdateFault, ResetFault) or over HTTP on
// the dependency's own server:
//
//	GET    /admin/fault   the knobs in force, as JSON
//	PUT    /admin/fault   set the knobs in the body; absent ones keep their value
//	DELETE /admin/fault   restore the defaults
//	GET    /admin/stats   the counters, as JSON
//
// For example:
//
//	curl -X PUT -H 'Content-Type: application/json' -d '{"slow":true}' $SMS/admin/fault
//	curl -X PUT -H 'Content-Type: application/json' -d '{"latency":"80ms","error_rate":0.2}' $PAYMENT/admin/fault
//
// Durations are Go duration strings. A body that is not one JSON object,
// an unknown field or a value out of bounds is refused with 400 and an
// application/problem+json body saying which knob and why, and changes
// nothing; bodies are bounded to [MaxAdminBody] (413 past it).
//
// The admin endpoints have no authentication: serve them on loopback only,
// as Start does by default. Every route of a dependency serves clients on
// its machine only (internal/local): a request whose Host is not loopback,
// localhost or the listener's address, whose Origin or Sec-Fetch-Site is
// another site's, that came through a proxy, or a write (DELETE too) not
// typed application/json gets 403 — what a page in a browser on the
// machine could send, to void a charge or slow a dependency down.
//
// # Time
//
// Latencies are timers, never busy waits, through [Options].Sleep, which
// a test may replace. A request waits its latency under its own context
// (a client that leaves ends it), except the work a real provider would
// finish anyway: an SMS delivery and a charge run under the dependency's
// context, which only Close (or Server.Close) cancels. Tests may also run
// the dependencies inside a testing/synctest bubble with the default Sleep
// and clock, where a 30 s slow mode takes no real time.
//
// # Clients
//
// [PaymentClient], [SMSClient] and [RecsClient] return a [*StatusError]
// for an answer that is not a success (Code, RetryAfter, the problem's
// Detail). It matches [ErrRateLimited] or [ErrUnavailable] with errors.Is,
// and unwraps to the fallback package's StatusError, so a fallback.Guard
// retries 429 and 503 (honouring Retry-After) and never 400 or 409.
// Transport errors and the context's errors come back wrapped as they are.
// A 429's Retry-After counts whole seconds, as HTTP does; the problem body
// also carries retry_after_ms, the exact wait for the next token.
package deps

// Package load sends open-loop HTTP load and reports what came back: the
// engine of the real-HTTP harness (brownout-lab real) and of the shop's
// sale traffic. It drives vegeta's attacker with a pacer over phases of
// constant rate, a mix of request kinds by class (X-Priority) and a pool
// of users (X-User-ID), and measures per phase — without its first Skip —
// the rate sent against the rate offered (a run counts only at ≥ 98 %),
// goodput, the share of critical requests served, p50/p99 of the 2xx
// answers, refusals by reason (from the problem+json body) with their own
// p99, timeouts, and the share of optional parts served. One line a second
// goes to Progress; Report writes a table or JSON.
//
// For a shop's traffic, each kind may build its requests (Kind.Make: a
// random product, a checkout body with a fresh Idempotency-Key), pin its
// users and client address (Kind.Users: a bot rotating user ids from one
// address; Config.Addr gives every user its own, sent as X-Forwarded-For),
// and retry like a real client (Kind.Retry: attempts, exponential backoff
// with full jitter, Retry-After, a retry budget). Retries resend the same
// request and are extra arrivals, paced by their due times outside the
// phases' rate; every request carries its kind (_lk) and its logical
// request (_lr) in the URL, and the report tells per kind how many logical
// requests eventually succeeded. Config.Events change the world at set
// moments of the run ("SMS provider slow" at 30 s).
//
// Open loop means the rate never waits for answers: an overloaded server
// sees the load it would see from real users, which is the only load under
// which overload behaviour means anything.
package load

// Package testapp is the app of the real-HTTP harness: a page handler with
// a hidden bottleneck (Workers workers, optionally a database-like
// contention), a mandatory cost per page and optional parts that it serves
// when OpenFeature says so, and the stacks we compare in front of it —
// nothing, shedding alone, failsafe-go's adaptive limiter, and the
// README's embedded brownout stack ([Embedded], kept verbatim equal to the
// README by a test).
//
// [Serve] runs it on a socket; the harness (brownout-lab real, and the
// short ordering test in this package) starts it in its own process and
// sends open-loop load with package load.
package testapp

package sim

import (
	"math"
	"time"

	"github.com/brownout/brownout/internal/gate"
	"github.com/brownout/brownout/signals"
)

// Request is one attempt at a user request, as the server sees it.
type Request struct {
	ID      int           // the user request; retries share it
	Attempt int           // 1 for the first try
	Class   signals.Class // priority class
	Key     uint32        // the user, for sticky decisions
	// Cost is the work without optional parts and Optional the extra work
	// when they are served, in units of the server's ServiceMean (with
	// Config.Parts: when every part is served).
	Cost, Optional float64
	// Arrival is when this attempt reached the server and Deadline when its
	// client gives up on it (both virtual time). The deadline travels with
	// the request, as X-Request-Deadline does.
	Arrival, Deadline time.Time

	// Estimate is the expected work, set on arrival: Cost plus Optional
	// times the current dimmer level (what an admission layer can know up
	// front). With Config.Parts, Optional is Cost·Σ part costs and the level
	// their true-cost-weighted mean, so Estimate is Cost·(1 + Σ ℓᵢ·cᵢ).
	Estimate float64

	// Set by the engine when work starts.
	Start        time.Time
	WithOptional bool

	cost    float64 // the work started, optional parts included
	parts   uint64  // with Config.Parts: bit i set when part i was served
	noParts bool    // with Config.Parts: evaluates none (ClassMix.NoParts)
	dep     *Dependency
	first   time.Duration // the user's first attempt, for latency from the user's view
	arrival time.Duration
	state   reqState
	ticket  *gate.Ticket // behind a Shed: the gate's ticket, until it is done
}

type reqState uint8

const (
	stQueued    reqState = iota
	stRunning            // in service, its client waiting
	stAbandoned          // in service, its client gone
	stDone
	stRefused
)

// Profile is an open-loop arrival rate (requests per second) over virtual
// time since the start of the run.
type Profile interface {
	Rate(t time.Duration) float64
}

// Constant is a fixed rate.
type Constant float64

// Rate implements Profile.
func (c Constant) Rate(time.Duration) float64 { return float64(c) }

// Steps holds Rates[i] from At[i] on; before At[0] the rate is Rates[0].
type Steps struct {
	At    []time.Duration
	Rates []float64
}

// Rate implements Profile.
func (s Steps) Rate(t time.Duration) float64 {
	r := s.Rates[0]
	for i, at := range s.At {
		if t >= at {
			r = s.Rates[i]
		}
	}
	return r
}

// Ramp goes linearly from From to To between Start and Start+Over.
type Ramp struct {
	From, To    float64
	Start, Over time.Duration
}

// Rate implements Profile.
func (r Ramp) Rate(t time.Duration) float64 {
	switch {
	case t <= r.Start:
		return r.From
	case t >= r.Start+r.Over:
		return r.To
	}
	f := float64(t-r.Start) / float64(r.Over)
	return r.From + f*(r.To-r.From)
}

// Burst is Base, and Peak during [Start, Start+For).
type Burst struct {
	Base, Peak float64
	Start, For time.Duration
}

// Rate implements Profile.
func (b Burst) Rate(t time.Duration) float64 {
	if t >= b.Start && t < b.Start+b.For {
		return b.Peak
	}
	return b.Base
}

// Midnight is the 11.11 sale: Base until At (midnight), then a jump to
// Peak that decays exponentially (half-life HalfLife) towards After.
type Midnight struct {
	Base, Peak, After float64
	At, HalfLife      time.Duration
}

// Rate implements Profile.
func (m Midnight) Rate(t time.Duration) float64 {
	if t < m.At {
		return m.Base
	}
	decay := math.Exp2(-float64(t-m.At) / float64(m.HalfLife))
	return m.After + (m.Peak-m.After)*decay
}

// ClassMix describes one kind of request in the traffic.
type ClassMix struct {
	Class signals.Class
	// Share of arrivals, relative to the other entries.
	Share float64
	// Cost and Optional as in Request. Cost 0 means 1.
	Cost, Optional float64
	// Dependency, when set, is called by every request of this kind while
	// it holds its worker (an SMS provider during checkout).
	Dependency *Dependency
	// NoParts, with Config.Parts, makes this kind evaluate no part (a
	// cart or a checkout page beside the product pages): its work is its
	// Cost alone, and it counts in the snapshot's Work (every request's)
	// but in no part's tally.
	NoParts bool
}

// Dependency is a downstream service the server calls while holding a
// worker, as a handler does. Its latency follows a profile, so that it can
// slow down; the caller may bound the call with a timeout and skip it while
// a breaker is open (the call's work then goes to a fallback, e.g. an
// outbox, at no cost to the worker). This is the lab's model of a guard —
// package fallback's Guard runs on real time and is tested there.
//
// A Dependency holds breaker state: give each run its own.
type Dependency struct {
	// Latency returns the dependency's response time at virtual time t.
	Latency func(t time.Duration) time.Duration
	// Timeout bounds a call; 0 waits as long as it takes.
	Timeout time.Duration
	// BreakAfter consecutive timed-out calls open the breaker for
	// OpenFor; then one trial call decides. 0: no breaker.
	BreakAfter int
	OpenFor    time.Duration

	failures                 int
	openUntil                time.Duration
	calls, timeouts, skipped int
}

// call returns how long a call made at t holds the worker.
func (d *Dependency) call(t time.Duration) time.Duration {
	if d.BreakAfter > 0 && t < d.openUntil {
		d.skipped++
		return 0 // the breaker is open: straight to the fallback
	}
	d.calls++
	lat := d.Latency(t)
	if d.Timeout > 0 && lat > d.Timeout {
		d.timeouts++
		d.failures++
		if d.BreakAfter > 0 && d.failures >= d.BreakAfter {
			d.openUntil, d.failures = t+d.Timeout+d.OpenFor, 0
		}
		return d.Timeout
	}
	d.failures = 0
	return lat
}

// Slowdown is a Latency that is normal, and slow during [from, from+for).
func Slowdown(normal, slow time.Duration, from, dur time.Duration) func(time.Duration) time.Duration {
	return func(t time.Duration) time.Duration {
		if t >= from && t < from+dur {
			return slow
		}
		return normal
	}
}

// RetryPolicy is what a client does after a timeout or a refusal.
type RetryPolicy struct {
	// MaxRetries after the first attempt; 0 never retries.
	MaxRetries int
	// Backoff, when positive, waits a full-jitter delay drawn uniformly from
	// [0, Backoff·2^n) before retry n (n = 1, 2, …). The sources use 0.5 s.
	Backoff time.Duration
	// Budget, when positive, allows retries only while they stay under this
	// fraction of new requests (a token bucket: +Budget per new request, −1
	// per retry, at most BudgetBurst tokens). The sources use 0.1.
	Budget      float64
	BudgetBurst float64
	// RetryRefused also retries refusals (503/429) after the same backoff;
	// otherwise only timeouts are retried.
	RetryRefused bool
}

// Client describes the users' side.
type Client struct {
	// Timeout is when a client gives up on an attempt. Default 1 s.
	Timeout time.Duration
	Retry   RetryPolicy
}

// Server describes the server.
type Server struct {
	// Workers is the number of requests served at once: the app's hidden
	// concurrency (a thread pool, a database pool). The admission layer in
	// front is not told it. Requests it takes in beyond the free workers
	// wait inside the app, in arrival order. Default 1.
	Workers int
	// WorkersAt, when set, overrides Workers over time (a pool that loses
	// half its connections, and gets them back).
	WorkersAt func(t time.Duration) int
	// ServiceMean is the mean service time of one cost unit at full
	// capacity; service times are exponential. Default 10 ms.
	ServiceMean time.Duration
	// Fixed makes every service time exactly its mean (work of a fixed
	// size, as a CPU-bound handler's) instead of exponential.
	Fixed bool
	// Capacity, when set, scales the speed over time (1 = full, 0.5 =
	// half). A request's service time is drawn when it starts.
	Capacity func(t time.Duration) float64
	// Contention makes service time grow with the requests in service, as
	// a database's does: a request starting with n in service (itself
	// included) takes 1 + Alpha·(n−1) + Beta·n·(n−1) times as long — the
	// universal scalability law, whose throughput peaks at
	// n* = √((1−Alpha)/Beta).
	Contention struct{ Alpha, Beta float64 }
	// CancelWaiting: a request that the admission layer took in but that
	// still waits for a worker leaves when its client gives up, as a
	// handler waiting on a pool with the request's context does (its
	// latency, as the admission layer sees it, is the client's timeout).
	// Work already started is not cancelled.
	CancelWaiting bool
}

// workers returns the number of workers at t.
func (s Server) workers(t time.Duration) int {
	if s.WorkersAt != nil {
		return max(s.WorkersAt(t), 1)
	}
	return s.Workers
}

// contention returns the service-time factor for a request starting with n
// in service.
func (s Server) contention(n int) float64 {
	m := float64(n)
	return 1 + s.Contention.Alpha*(m-1) + s.Contention.Beta*m*(m-1)
}

// Dip returns a Capacity that is factor during [at, at+d) and 1 otherwise.
func Dip(at, d time.Duration, factor float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if t >= at && t < at+d {
			return factor
		}
		return 1
	}
}

// Sine swings around Mean: Mean·(1 + Amplitude·sin(2πt/Period)). Amplitude
// is a share of the mean (0.5: from half the mean to one and a half); it
// starts at the mean, rising.
type Sine struct {
	Mean, Amplitude float64
	Period          time.Duration
}

// Rate implements Profile.
func (s Sine) Rate(t time.Duration) float64 {
	return s.Mean * (1 + s.Amplitude*math.Sin(2*math.Pi*float64(t)/float64(s.Period)))
}

// Square alternates Mean·(1 + Amplitude) for the first half of every
// Period and Mean·(1 − Amplitude) for the second. Amplitude is a share of
// the mean.
type Square struct {
	Mean, Amplitude float64
	Period          time.Duration
}

// Rate implements Profile.
func (s Square) Rate(t time.Duration) float64 {
	if t%s.Period < s.Period/2 {
		return s.Mean * (1 + s.Amplitude)
	}
	return s.Mean * (1 - s.Amplitude)
}

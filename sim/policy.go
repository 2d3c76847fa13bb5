package sim

import (
	"math"
	"time"

	"github.com/brownout/brownout/signals"
)

// Admission is a server's admission control and queue discipline, driven in
// virtual time: it never blocks and never reads a clock. Shed runs package
// shed's Gate (the core of the production middleware) through it; the
// sources' policies below implement it for comparison.
type Admission interface {
	// Offer is called when r arrives. It either takes r in (to wait for
	// Pull) or refuses it with a reason. Requests it throws away on the way
	// (others that waited too long) are passed to drop.
	Offer(now time.Time, r *Request, drop func(*Request, signals.Reason)) (ok bool, why signals.Reason)
	// Pull is called when a worker is free. It returns the request to
	// start, or nil if none waits; requests it throws away on the way
	// (expired, CoDel) are passed to drop.
	Pull(now time.Time, drop func(*Request, signals.Reason)) *Request
	// Done is called when the work on r ends.
	Done(now time.Time, r *Request)
}

// Canceler is an Admission that can take back a request it took in when
// its client gives up (Server.CancelWaiting).
type Canceler interface {
	// Cancel removes r if it still waits for a worker, ends it as the
	// admission layer would a finished request, and reports whether it
	// did.
	Cancel(now time.Time, r *Request) bool
}

// Limiter is an Admission with a concurrency limit, for the lab's traces.
type Limiter interface {
	Limit() float64
}

// Dimmer decides how much optional work requests get; dimmer's controller
// implements it. Step is called every tick with the server's signals.
type Dimmer interface {
	Step(now time.Time, s signals.Snapshot) Dim
}

// Dim is what a Dimmer decides for the next tick.
type Dim struct {
	// Level is the share of users served the optional parts, in [0, 1].
	// With Config.Parts it is the fallback level of a part Levels leaves
	// out; the engine then replaces it, for the reports, by the parts'
	// levels' mean weighted by their true costs.
	Level float64
	// Levels, when the Config has Parts, are per-feature levels: Names[i]
	// is the feature (Part.Name) of Levels[i], or, when Names is nil,
	// Levels is aligned with Config.Parts. Ignored without Parts. The
	// engine reads both during Step's tick only; a Dimmer may reuse them.
	Levels []float64
	Names  []string
	// Shed is the cascade's shed level (dimmer.State.Shed): up to 1 the
	// share of sheddable users refused at the door, from 1 to 2 every
	// sheddable and Shed−1 of default users. Critical requests are never
	// refused by the cascade.
	Shed float64
}

// Static is a Dimmer that never moves: every optional part on (1), off (0),
// or a fixed share.
type Static float64

// Step implements Dimmer.
func (s Static) Step(time.Time, signals.Snapshot) Dim { return Dim{Level: float64(s)} }

// Limits is the sources' bounded server: at most Limit[class] requests
// inside the server (queued or in service) when a request of that class
// arrives, FIFO otherwise. An infinite limit is the unbounded queue; equal
// limits are "bounded queue, fail fast"; a lower limit for non-critical
// classes is the sources' "priority shedding".
type Limits struct {
	Limit [signals.NumClasses]float64
	// DropExpired throws away, at Pull, requests whose deadline has passed
	// (the sources' "server drops expired").
	DropExpired bool
	// CountCost counts work instead of requests: a request counts as its
	// Estimate — "count cost, not requests". With every cost 1 and nothing
	// optional it is the sources' policy.
	CountCost bool

	q      fifo
	inside float64
}

func (l *Limits) weight(r *Request) float64 {
	if l.CountCost {
		return r.Estimate
	}
	return 1
}

// Unbounded returns the unbounded FIFO queue.
func Unbounded() *Limits {
	inf := math.Inf(1)
	return &Limits{Limit: [signals.NumClasses]float64{inf, inf, inf}}
}

// FailFast returns a FIFO queue that refuses arrivals when n requests are
// inside.
func FailFast(n float64) *Limits {
	return &Limits{Limit: [signals.NumClasses]float64{n, n, n}}
}

// PriorityLimits returns the sources' priority shedding: critical requests
// are refused only at critical inside, the others at other.
func PriorityLimits(critical, other float64) *Limits {
	return &Limits{Limit: [signals.NumClasses]float64{critical, other, other}}
}

// Offer implements Admission.
func (l *Limits) Offer(_ time.Time, r *Request, _ func(*Request, signals.Reason)) (bool, signals.Reason) {
	if l.inside >= l.Limit[r.Class] {
		return false, signals.ReasonConcurrency
	}
	l.inside += l.weight(r)
	l.q.push(r)
	return true, 0
}

// Pull implements Admission.
func (l *Limits) Pull(now time.Time, drop func(*Request, signals.Reason)) *Request {
	for l.q.len() > 0 {
		r := l.q.pop()
		if l.DropExpired && now.After(r.Deadline) {
			l.inside -= l.weight(r)
			drop(r, signals.ReasonDeadline)
			continue
		}
		return r
	}
	return nil
}

// Done implements Admission.
func (l *Limits) Done(_ time.Time, r *Request) { l.inside -= l.weight(r) }

// CoDel is the sources' CoDel-like queue: FIFO with a tail-drop bound of
// Limit requests; when Enabled, a request that waited longer than Target
// is dropped once the sojourn has stayed above Target for Interval.
type CoDel struct {
	Enabled          bool
	Limit            int
	Target, Interval time.Duration

	q          fifo
	above      bool
	aboveSince time.Time
}

// Offer implements Admission.
func (c *CoDel) Offer(_ time.Time, r *Request, _ func(*Request, signals.Reason)) (bool, signals.Reason) {
	if c.q.len() >= c.Limit {
		return false, signals.ReasonMaxWait
	}
	c.q.push(r)
	return true, 0
}

// Pull implements Admission.
func (c *CoDel) Pull(now time.Time, drop func(*Request, signals.Reason)) *Request {
	for c.q.len() > 0 {
		r := c.q.pop()
		if c.Enabled && now.Sub(r.Arrival) > c.Target {
			if !c.above {
				c.above, c.aboveSince = true, now
			} else if now.Sub(c.aboveSince) >= c.Interval {
				drop(r, signals.ReasonCoDel)
				continue
			}
		} else {
			c.above = false
		}
		return r
	}
	c.above = false // idle
	return nil
}

// Done implements Admission.
func (c *CoDel) Done(time.Time, *Request) {}

// fifo is a queue of requests that reuses its backing array.
type fifo struct {
	items []*Request
	head  int
}

func (f *fifo) len() int { return len(f.items) - f.head }

func (f *fifo) push(r *Request) {
	if f.head > 0 && f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	}
	f.items = append(f.items, r)
}

func (f *fifo) pop() *Request {
	r := f.items[f.head]
	f.items[f.head] = nil
	f.head++
	if f.head > 1024 && f.head*2 > len(f.items) {
		n := copy(f.items, f.items[f.head:])
		f.items, f.head = f.items[:n], 0
	}
	return r
}

package gate

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/signals"
)

// Config configures a Gate. The zero value takes the defaults below.
type Config struct {
	// MaxWait is the longest a request of each class may wait for a slot:
	// the queue is bounded in time, not in requests (K ≈ μ × wait).
	// Defaults: critical 800 ms, default 300 ms, sheddable 100 ms — under a
	// typical 300 ms–1 s latency objective, so that admission holds the
	// objective and the brownout controller's cascade stays a last resort.
	MaxWait [signals.NumClasses]time.Duration
	// Target and Interval are CoDel's, as Facebook's "Fail at Scale"
	// applies it to request queues: a class queue that has not been empty
	// for an Interval and whose oldest request has waited over Target is
	// standing; then a request may wait only Target, and the queue is
	// served newest first (adaptive LIFO). Defaults
	// signals.DefaultCoDelTarget and DefaultCoDelInterval (100 ms and
	// 500 ms): a queue of ~10 ms requests that stays busy for half a
	// second is an overload, not a burst, and the excess is refused within
	// 100 ms instead of waiting its class's MaxWait. The gate reports its
	// standing decision to the signals recorder (GateReading.Standing), so
	// brownout_queue_standing is this decision.
	Target, Interval time.Duration
	// Limit is the adaptive concurrency limit, in cost units.
	Limit LimitConfig
	// Assured is the share of the admitted cost that each class is
	// assured while higher classes queue: strict priority would starve a
	// lower class for as long as an overload lasts, and refuse its cheap
	// requests (a 0.4 ms analytics beacon) to save work worth next to
	// nothing. A class earns credit on every admission of another class's
	// request (at most one unit banked) and jumps the
	// queue when its credit covers its next request — the queues of the
	// classes between, never a waiting critical request's: the share is
	// taken from default work, so that it never costs a critical request
	// its wait bound (critical has none). Default: sheddable 5 % — 1/20 of
	// an overloaded server's work, which serves twenty beacons of a
	// thirtieth of a page for every page refused — none for the others; a
	// negative share turns it off. A class whose demand is above its share
	// still gets only its share.
	Assured [signals.NumClasses]float64
}

func (c Config) withDefaults() Config {
	def := [signals.NumClasses]time.Duration{800 * time.Millisecond, 300 * time.Millisecond, 100 * time.Millisecond}
	for i := range c.MaxWait {
		if c.MaxWait[i] <= 0 {
			c.MaxWait[i] = def[i]
		}
	}
	if c.Target <= 0 {
		c.Target = signals.DefaultCoDelTarget
	}
	if c.Interval <= 0 {
		c.Interval = signals.DefaultCoDelInterval
	}
	if c.Assured[signals.Sheddable] == 0 {
		c.Assured[signals.Sheddable] = 0.05
	}
	for i, v := range c.Assured {
		c.Assured[i] = min(max(v, 0), 0.5)
	}
	return c
}

// Ticket is one request at the gate.
type Ticket struct {
	Class signals.Class
	// Cost is the request's estimated work in cost units (1 for an average
	// request); see Costs.
	Cost float64
	// Arrival is when the request reached the gate; Deadline, when not
	// zero, is when its client stops waiting.
	Arrival, Deadline time.Time
	// Start is set when the gate admits the request.
	Start time.Time

	// For the gate's owner: the middleware's wake-up (nil elsewhere), and
	// the outcome decided for a queued ticket.
	Ready   chan struct{}
	Why     signals.Reason
	Refused bool

	phase  uint32 // the limiter's phase when admitted
	queued bool
}

// Decision is what the gate decides for an arriving request.
type Decision uint8

const (
	// Admitted: start the work now.
	Admitted Decision = iota
	// Queued: wait; Next admits it later, or a drop refuses it.
	Queued
	// Refused: answer at once with the reason.
	Refused
)

// Gate is the admission state machine behind the middleware, and the
// policy package sim runs in virtual time: it never blocks and never reads
// a clock; every method takes the time.
//
// Requests of three classes queue separately, served strictly by priority
// but for the lower classes' assured shares (Config.Assured).
// A request is admitted at once when nothing waits and the cost in flight
// leaves room under the adaptive limit. Otherwise it queues — unless its
// estimated wait, the cost queued ahead of it (its class and higher) divided
// by the measured throughput (limit ÷ seconds per cost unit), exceeds its
// class's allowed wait: then it is refused at the door, cheaply, instead of
// timing out later. The allowed wait is MaxWait, or CoDel's Target while the
// class's queue is standing — it has not been empty for an Interval (as
// Facebook's "Fail at Scale" puts CoDel for request queues) and its oldest
// request has waited longer than Target — and stays standing until it
// empties (CoDel's dropping state); a standing queue is also served newest
// first, so that under overload fresh requests succeed and stale ones are
// dropped (adaptive LIFO). Requests whose deadline has passed are dropped
// before they start.
//
// Why emptiness and the oldest request, not RFC 8289's minimum sojourn:
// served newest first, a queue's freshest request always has a small
// sojourn, so the minimum says "not standing" at once and the queue flips
// back to FIFO and MaxWait; it empties only when the overload is over. The
// oldest request's age keeps a busy but healthy queue (80 % load) out of
// it.
//
// A Gate's methods must be serialized (package shed's Shedder holds a
// mutex), except the lock-free fast path taken around them: TryAdmit and
// Release, on the atomic in-flight cost, queued count and the limit's
// accumulators.
type Gate struct {
	cfg      Config
	limit    *limiter
	queues   [signals.NumClasses]deque
	since    [signals.NumClasses]time.Time // since when the class's queue has not been empty; zero while empty
	standing [signals.NumClasses]bool      // CoDel's dropping state, until the queue empties

	credit [signals.NumClasses]float64 // assured shares' credit, cost units
	dem    demand                      // who overloads the server

	inflight atomic.Int64 // cost in flight, in micro-units
	open     atomic.Int32 // the lowest class admitted: those below are closed
	queued   atomic.Int32 // tickets queued, all classes
}

// micro converts a cost to the fixed-point units of the atomics.
func micro(cost float64) int64 { return int64(math.Round(cost * 1e6)) }

// New returns an empty gate.
func New(cfg Config) *Gate {
	cfg = cfg.withDefaults()
	cfg.Limit = cfg.Limit.withDefaults()
	g := &Gate{cfg: cfg, limit: newLimiter(cfg.Limit)}
	g.open.Store(signals.NumClasses - 1)
	return g
}

// Config returns the gate's settings with defaults filled in.
func (g *Gate) Config() Config { return g.cfg }

// Limit returns the current concurrency limit in cost units (outside a
// probe; see LimitConfig).
func (g *Gate) Limit() float64 { return g.limit.limit }

// Admitting returns the limit admissions see now: the limit, or half of it
// while a probe measures the baseline.
func (g *Gate) Admitting() float64 { return float64(g.limit.adm.Load()) / 1e6 }

// Ratio returns the last measured latency ratio R(L)/R(L/2), 0 before the
// first, and the baseline in seconds per cost unit.
func (g *Gate) Ratio() (ratio, base float64) { return g.limit.ratio, g.limit.base }

// SetLimit fixes the limit from outside (the lab's comparison of limit
// algorithms); adaptation stops.
func (g *Gate) SetLimit(v float64) {
	g.limit.external = true
	g.limit.probing, g.limit.cold = false, false
	g.limit.set(v)
	g.limit.adm.Store(micro(g.limit.limit))
}

// InFlight returns the cost admitted and not done.
func (g *Gate) InFlight() float64 { return float64(g.inflight.Load()) / 1e6 }

// Waiting reports whether any request waits, lock-free.
func (g *Gate) Waiting() bool { return g.queued.Load() > 0 }

// Queued returns how many requests of class c wait.
func (g *Gate) Queued(c signals.Class) int { return g.queues[c].len() }

// Standing reports whether class c's queue is standing: it became so when
// it had not been empty for an Interval and its oldest request had waited
// longer than Target, and it stays so until it empties. Not while the
// limit is in its slow start: a queue that the growing limit is about to
// drain is not an overload.
func (g *Gate) Standing(c signals.Class, now time.Time) bool {
	q := &g.queues[c]
	if !g.dem.over[c] {
		return false // a class within capacity waits its MaxWait: see demand
	}
	if !g.standing[c] && !g.limit.cold && q.len() > 0 && !g.since[c].IsZero() && now.Sub(g.since[c]) >= g.cfg.Interval &&
		now.Sub(q.front().Arrival) > g.cfg.Target {
		g.standing[c] = true
	}
	return g.standing[c]
}

// throughput is the cost the server completes per second, for the
// door's wait estimates: as measured while saturated (see demand), else
// Little's law at the limit (the limit over the measured seconds per
// cost unit there); 0 before any measurement. Not the admitting limit
// over it: a probe halves what the gate admits, but with one worker
// behind it not what the server completes, and waits estimated from
// the halved limit refused critical work that would have been served.
func (g *Gate) throughput() float64 {
	if x := g.dem.throughput(); x > 0 {
		return x
	}
	if unit := g.limit.unit(); unit > 0 {
		return g.limit.limit / unit
	}
	return 0
}

// allowed is the wait class c may have now, and the reason for exceeding it.
func (g *Gate) allowed(c signals.Class, now time.Time) (time.Duration, signals.Reason) {
	if g.shutOut(c) {
		return 0, signals.ReasonMaxWait // it would wait for as long as the class above is over capacity
	}
	if g.Standing(c, now) && g.cfg.Target < g.cfg.MaxWait[c] {
		return g.cfg.Target, signals.ReasonCoDel
	}
	return g.cfg.MaxWait[c], signals.ReasonMaxWait
}

// closed reports whether class c is shut out: a class above it brings,
// with those above it, more than the server completes (see demand), so
// that every slot c would take is a slot that class needs. It is refused
// at the door and its queue dropped, its wait being unbounded
// (ReasonMaxWait): otherwise the higher class's queue, cut short by
// CoDel, empties now and then and lets c in — admitted while the class
// above is refused.
func (g *Gate) closed(c signals.Class) bool { return c > signals.Class(g.open.Load()) }

// shutOut reports whether class c is closed with nothing to come in by:
// no assured share, or the class over capacity is critical (an assured
// share never takes from critical work).
func (g *Gate) shutOut(c signals.Class) bool {
	return g.closed(c) && (g.cfg.Assured[c] <= 0 || g.dem.over[signals.Critical])
}

// tryAdmit admits t if the cost in flight leaves room (or nothing is in
// flight, so that a request costlier than the limit is not starved). It is
// safe to call concurrently with itself and release.
func (g *Gate) tryAdmit(t *Ticket, now time.Time) bool {
	u := micro(t.Cost)
	for {
		phase, lim := g.limit.phase.Load(), g.limit.adm.Load()
		cur := g.inflight.Load()
		if cur != 0 && cur+u > lim {
			if !g.limit.full.Load() {
				g.limit.full.Store(true)
			}
			return false
		}
		if g.inflight.CompareAndSwap(cur, cur+u) {
			t.Start, t.phase, t.queued = now, phase, false
			if phase&1 == 1 {
				if g.limit.cohort.Add(1) > g.limit.cohortSize.Load() {
					t.phase = outside // a probe's, but past its cohort
				} else {
					g.limit.cohortT.Add(now.UnixNano())
					g.limit.cohortC.Add(u)
					g.limit.cohortFirst.CompareAndSwap(0, now.UnixNano())
				}
			}
			return true
		}
	}
}

// TryAdmit admits t at now if nothing waits and the cost in flight leaves
// room: the lock-free fast path. It is safe to call concurrently with
// itself and Release.
func (g *Gate) TryAdmit(t *Ticket, now time.Time) bool {
	if t.Cost <= 0 {
		t.Cost = 1
	}
	c := t.Class % signals.NumClasses
	if g.queued.Load() == 0 && !g.closed(c) && g.tryAdmit(t, now) {
		g.dem.arrive(c, micro(t.Cost), now)
		return true
	}
	return false
}

// Release returns t's cost and records its completion at now for the
// adaptive limit; it is safe to call concurrently. It reports whether
// requests wait and whether the limit is due an update: in either case the
// caller calls Update under its serialization, then Next.
func (g *Gate) Release(now time.Time, t *Ticket) (waiting, due bool) {
	u := micro(t.Cost)
	cur := g.inflight.Add(-u) + u
	g.dem.done.Add(u)
	due = g.limit.record(t, now, cur)
	return g.queued.Load() > 0, due
}

// Update moves the adaptive limit if it is due. Callers serialize it.
func (g *Gate) Update(now time.Time) {
	if g.limit.isDue(now) {
		g.inform(now)
		g.limit.update(now)
	}
}

// Arrive decides for an arriving request. drop receives queued requests
// that the gate throws away on the way (waited too long, deadline passed).
func (g *Gate) Arrive(now time.Time, t *Ticket, drop func(*Ticket, signals.Reason)) (Decision, signals.Reason) {
	if t.Cost <= 0 {
		t.Cost = 1
	}
	c := t.Class % signals.NumClasses
	t.Class = c
	g.fold(now)
	g.dem.arrive(c, micro(t.Cost), now)
	if !t.Deadline.IsZero() && !now.Before(t.Deadline) {
		return Refused, signals.ReasonDeadline
	}
	g.sweep(now, drop)
	if g.shutOut(c) {
		return Refused, signals.ReasonMaxWait
	}
	if g.queued.Load() == 0 && !g.closed(c) && g.tryAdmit(t, now) {
		return Admitted, 0
	}
	// The time bound: refuse now what would wait too long.
	// (Not while the limit is in its slow start: the throughput it
	// estimates from is about to double.)
	if tput := g.throughput(); tput > 0 && !g.limit.cold {
		ahead := t.Cost
		for i := signals.Class(0); i <= c; i++ {
			ahead += g.queues[i].cost
		}
		est := time.Duration(ahead / tput * float64(time.Second))
		if g.closed(c) {
			est = time.Duration(math.MaxInt64) // only its share serves it
		}
		if share := g.cfg.Assured[c]; share > 0 {
			// Its share serves the class's own queue meanwhile.
			own := (g.queues[c].cost + t.Cost) / (share * tput)
			est = min(est, time.Duration(own*float64(time.Second)))
		}
		if wait, why := g.allowed(c, now); est > wait {
			return Refused, why
		}
	}
	t.queued = true
	if g.queues[c].len() == 0 {
		g.since[c] = now
	}
	g.queues[c].push(t)
	g.queued.Add(1) // before any re-check of room: see shed's Shedder.wait
	return Queued, 0
}

// Next admits the next queued request if the limit leaves room, and returns
// it; nil if none can start. drop receives the requests thrown away on the
// way.
func (g *Gate) Next(now time.Time, drop func(*Ticket, signals.Reason)) *Ticket {
	g.fold(now)
	g.sweep(now, drop)
	// An assured share first: a class whose credit covers its next
	// request goes ahead of the higher classes — its newest request, which
	// has the most of its time left (the older ones would mostly be
	// served near their wait bound) — but never ahead of a waiting
	// critical request: the share is taken from the work between, so that
	// it can never cost a critical request its wait bound.
	for c := range g.queues {
		if g.cfg.Assured[c] <= 0 || c == int(signals.Critical) || g.queues[signals.Critical].len() > 0 {
			continue
		}
		t := g.head(signals.Class(c), now, true, drop)
		if t == nil || g.credit[c] < min(t.Cost, 1) {
			continue
		}
		if !g.tryAdmit(t, now) {
			return nil
		}
		g.remove(signals.Class(c), t, now)
		g.credit[c] -= t.Cost
		return t
	}
	for c := range g.queues {
		if g.closed(signals.Class(c)) {
			break // and every class below: their assured shares were served above
		}
		t := g.head(signals.Class(c), now, false, drop)
		if t == nil {
			continue
		}
		if !g.tryAdmit(t, now) {
			return nil // strict priority: nothing lower jumps ahead
		}
		g.remove(signals.Class(c), t, now)
		for k, share := range g.cfg.Assured {
			if k != c && share > 0 {
				// share/(1−share) of the others' cost is share of the total
				g.credit[k] = min(g.credit[k]+share/(1-share)*t.Cost, 1)
			}
		}
		return t
	}
	return nil
}

// head returns the request class c would admit next — the oldest, or the
// newest while the queue is standing or when asked for it — dropping those
// whose deadline has passed; nil when the queue is empty.
func (g *Gate) head(c signals.Class, now time.Time, newest bool, drop func(*Ticket, signals.Reason)) *Ticket {
	q := &g.queues[c]
	for q.len() > 0 {
		var t *Ticket
		if newest || g.Standing(c, now) {
			t = q.back() // adaptive LIFO
		} else {
			t = q.front()
		}
		if t.Deadline.IsZero() || now.Before(t.Deadline) {
			return t
		}
		g.remove(c, t, now)
		drop(t, signals.ReasonDeadline)
	}
	return nil
}

// fold brings the demand model up to now and opens or closes classes.
func (g *Gate) fold(now time.Time) {
	g.dem.fold(now, g.queued.Load() > 0)
	open := signals.Class(signals.NumClasses - 1)
	for c := range signals.Class(signals.NumClasses - 1) {
		if g.dem.over[c] {
			open = c
			break
		}
	}
	g.open.Store(int32(open))
}

// inform tells the limit, before it moves, what its probes would cost
// the requests at the gate.
func (g *Gate) inform(now time.Time) {
	g.limit.critical = g.criticalWaits()
	g.limit.hurts = g.probeHurts(now)
}

// criticalWaits reports whether critical requests within capacity wait:
// what a probe of the limit would make wait longer.
func (g *Gate) criticalWaits() bool {
	return g.queues[signals.Critical].len() > 0 && !g.dem.over[signals.Critical]
}

// probeWaitShare is the share of its class's MaxWait a request may have
// waited, while the load is within capacity, before a probe of the limit
// that made it wait gives up: half, so that the queue the probe leaves
// drains, at the full limit, before anyone in it reaches the bound.
const probeWaitShare = 0.5

// probeHurts reports whether a probe running now makes requests wait
// that the load alone would not: no class is over capacity, yet a
// request has waited probeWaitShare of its MaxWait. A probe halves what
// the gate admits, and the limit settles near 1.6 × the knee, so its
// half is under the knee (with two workers and requests of 1.6 units, a
// single worker): at 65 % of capacity that lets a queue grow for as long
// as the probe lasts (up to a second), and the requests at its end were
// refused for a measurement. While a class is over capacity the queue is
// the load's, and the probe goes on: the limit may be what is wrong.
func (g *Gate) probeHurts(now time.Time) bool {
	if g.dem.over[signals.NumClasses-1] {
		return false
	}
	for c := range g.queues {
		q := &g.queues[c]
		if q.len() > 0 && now.Sub(q.front().Arrival) >= time.Duration(probeWaitShare*float64(g.cfg.MaxWait[c])) {
			return true
		}
	}
	return false
}

// Done records the end of an admitted request's work: Release, then
// Update. Callers serialize it.
func (g *Gate) Done(now time.Time, t *Ticket) {
	if _, due := g.Release(now, t); due {
		g.inform(now)
		g.limit.update(now)
	}
}

// Cancel removes a queued request (its client left, or its own timer
// fired). It reports whether the request was still queued.
func (g *Gate) Cancel(now time.Time, t *Ticket) bool {
	if !t.queued {
		return false
	}
	g.remove(t.Class, t, now)
	return true
}

// sweep drops, oldest first, the requests that have waited longer than
// their class allows or whose deadline has passed.
func (g *Gate) sweep(now time.Time, drop func(*Ticket, signals.Reason)) {
	for c := range g.queues {
		q := &g.queues[c]
		for q.len() > 0 {
			t := q.front()
			wait, why := g.allowed(signals.Class(c), now)
			switch {
			case !t.Deadline.IsZero() && !now.Before(t.Deadline):
				why = signals.ReasonDeadline
			case now.Sub(t.Arrival) <= wait:
				t = nil
			}
			if t == nil {
				break
			}
			g.remove(signals.Class(c), t, now)
			drop(t, why)
		}
	}
}

func (g *Gate) remove(c signals.Class, t *Ticket, _ time.Time) {
	if g.queues[c].remove(t) && g.queued.Add(-1) == 0 {
		g.dem.emptied = true
	}
	t.queued = false
	if g.queues[c].len() == 0 {
		g.since[c], g.standing[c] = time.Time{}, false // an empty queue is not standing
	}
}

// deque is a double-ended queue of tickets in arrival order.
type deque struct {
	items []*Ticket
	head  int
	cost  float64
}

func (d *deque) len() int       { return len(d.items) - d.head }
func (d *deque) front() *Ticket { return d.items[d.head] }
func (d *deque) back() *Ticket  { return d.items[len(d.items)-1] }
func (d *deque) push(t *Ticket) { d.items = append(d.items, t); d.cost += t.Cost }
func (d *deque) compact() {
	n := copy(d.items, d.items[d.head:])
	clear(d.items[n:])
	d.items = d.items[:n]
	d.head = 0
}
func (d *deque) reset() { clear(d.items); d.items, d.head, d.cost = d.items[:0], 0, 0 }

// remove takes t out, wherever it is (the ends are O(1)), and reports
// whether it was there.
func (d *deque) remove(t *Ticket) bool {
	switch {
	case d.len() == 0:
		return false
	case d.front() == t:
		d.items[d.head] = nil
		d.head++
	case d.back() == t:
		d.items[len(d.items)-1] = nil
		d.items = d.items[:len(d.items)-1]
	default:
		found := false
		for i := d.head; i < len(d.items); i++ {
			if d.items[i] == t {
				copy(d.items[i:], d.items[i+1:])
				d.items[len(d.items)-1] = nil
				d.items = d.items[:len(d.items)-1]
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	d.cost -= t.Cost
	if d.len() == 0 {
		d.reset()
	} else if d.head > 64 && d.head*2 > len(d.items) {
		d.compact()
	}
	return true
}

package dimmer

import (
	"math"
	"slices"
	"time"

	"github.com/brownout/brownout/signals"
)

// The work of a request (the model law, model.go): each period's mean
// work brought back to the all-off request's by the costs (demand), the
// priors' scale the moves teach (teach), the work at a brightness (work)
// and each feature's reach.

const (
	// minCostTicks is how many contrasted periods a learned cost needs
	// before it replaces the configured prior.
	minCostTicks = 10
	// maxCostSE is the largest relative standard error of a learned cost
	// that replaces the prior.
	maxCostSE = 0.25
	// minJumpCount is the fewest requests in a period whose mean may make
	// the tracker of a request's work jump: a standard error needs a
	// sample.
	minJumpCount = 20
	// minScaleMove is the smallest predicted change of a request's work,
	// relative to it, from which a move teaches the priors' scale: under
	// it the measured change is mostly the periods' noise.
	minScaleMove = 0.05
	// maxScaleStep is what one move teaches the priors' scale at most (a
	// factor, either way) for each teachZ standard errors by which its
	// predicted change stood out of the noise (see teach), and maxScale
	// bounds the scale itself: a configured cost is taken to be right
	// within 100× either way — costs typed in milliseconds where shares
	// of a page were meant are 10–100× too high, and a feature whose
	// cost is nothing is told apart from one of a hundredth of a page
	// by its contrast, not by the scale.
	maxScaleStep, maxScale = 2.0, 100.0
	// scaleMemory is the moves over which the scale taught is forgotten
	// (its variance grows by 1/(1 − 1/scaleMemory) at each): priors that
	// go wrong later — a feature that got heavier before it is
	// contrasted — are taught again within about ten moves.
	scaleMemory = 10.0
	// minScaleVar is the least variance of the scale's logarithm kept: a
	// scale known within a thousandth (no period measures it better), and
	// never 0, which stands for nothing taught yet.
	minScaleVar = 1e-6
	// spreadMemory is the periods over which a request's spread is
	// averaged: a minute, over which the levels and the service change
	// it little.
	spreadMemory = 60.0
	// reachJumpZ is the standard errors by which a period's share of
	// the requests that evaluate a feature must exceed its reach for the
	// reach to take it at once (see reachOf).
	reachJumpZ = 3.0
	// teachZ is the standard errors of the all-off work's estimates a
	// move's predicted change must exceed to teach the priors' scale.
	teachZ = 2.0
)

// scalePriorVar is the variance of the scale's logarithm before any move
// taught it: a configured cost right within maxScale either way, at two
// standard deviations.
var scalePriorVar = math.Pow(math.Log(maxScale)/2, 2)

// demand reads the period's tallies (without them, the window's latency:
// see observe), as the law above says. It fills
// m.mdl.cost with each feature's cost in the unit of work, m.mdl.w0 with
// the all-off request's and m.mdl.mean with a request's at the levels now.
// It returns the unit — seconds (tallies with completions) or all-off
// requests — and the work a second the period's requests took (0 when
// unknown) with its standard error.
//
// With tallies, each period's mean work x is brought back to the all-off
// request's by the costs — x₀ = (x − Σ learned sᵢĉᵢ)/(1 + scale·Σ prior
// sᵢCostᵢ), sᵢ the share of the period's requests that rendered feature i
// — and x₀ is tracked: it does not move when the levels do, so long as
// the costs are right; where the priors are wrong, the first period that
// shows a move says by how much (teach).
func (c *Controller) demand(now time.Time, o observation) (seconds bool, busy, busySE float64) {
	m := &c.mu
	fs := c.cfg.Features
	ts, span := o.tallies, o.recentSpan
	var all signals.Moments
	own := o.work.N > 0 || len(ts) > 0 // the period's own requests, not a window's
	switch {
	case o.work.N > 0:
		all = o.work
		c.reachOf(ts, all.N)
	case len(ts) > 0:
		// A source without the work of every request: a feature's
		// tally stands for it (right where every request evaluates it),
		// and the reach is 1 — one measured while the source gave the
		// work would make the features of the requests tallied cheap.
		all = ts[0].On
		all.Merge(ts[0].Off)
		if all.N > 0 {
			m.mdl.unreach()
		}
	case o.latency.N > 0:
		all, span = o.latency, o.latencySpan
	}
	// The unit is seconds once a period has measured a time; a period
	// that measured none (no completion in a stall) keeps the unit it
	// had: nothing measured is no change of unit.
	seconds = all.N > 0 && all.Sum > 0 || m.mdl.capacity.seconds
	if !own && all.N == 0 && o.gate && o.rate > 0 {
		// Completions without tallies, behind a gate: the unit is the
		// all-off request (see observe) — not a period that measured
		// nothing, which keeps the unit it had.
		seconds = false
	}
	if m.mdl.scale == 0 {
		m.mdl.scale = 1
	}
	for i := range fs {
		was := m.mdl.learned[i]
		m.mdl.learned[i] = false
		e := m.costs.estimate(i)
		if e.Known() && e.Contrasted >= minCostTicks && e.SE <= maxCostSE*max(math.Abs(e.Value), 0.1) {
			m.mdl.learned[i] = true
			m.mdl.cost[i] = max(e.Value, 0)
			if seconds {
				m.mdl.cost[i] = max(e.Seconds, 0)
			}
		}
		if m.mdl.learned[i] != was {
			// A cost learned (or forgotten) changes what the priors'
			// share counts: a pending move's shares, and the last
			// period's, were of another set of features.
			m.mdl.moveAt, m.mdl.lastOK = time.Time{}, false
		}
	}
	if seconds && all.N > 0 && all.Sum > 0 {
		// The period's shares of its requests that rendered each
		// feature; the ladder's where a feature has no tally.
		prior, priorT, learned := 0.0, 0.0, 0.0
		b := max(m.brightness, 0)
		for i, f := range fs {
			sh := c.lit(i, b, c.probeAt(b)) * m.mdl.reach[i]
			m.mdl.tallied[i] = false
			for _, t := range ts {
				if t.Feature == f.Name && t.On.N+t.Off.N > 0 {
					sh = float64(t.On.N) / float64(t.On.N+t.Off.N)
					if o.work.N > 0 {
						sh = min(float64(t.On.N)/float64(all.N), 1)
					}
					m.mdl.tallied[i] = true
					break
				}
			}
			switch {
			case m.mdl.learned[i]:
				learned += sh * m.mdl.cost[i]
			case m.mdl.tallied[i]:
				priorT += sh * f.Cost
				prior += sh * f.Cost
			default:
				prior += sh * f.Cost
			}
		}
		x, v := all.Mean(), max(all.Var(), 0)/float64(all.N)
		// What the learned costs leave of the period's work is the
		// all-off requests' (with the priors' share): where they leave
		// nothing, the costs say more than the period holds — a cost read
		// high, in a period of few requests — and the period says nothing
		// of the all-off work. (Folded in, the tracker followed it below
		// nothing, and the law took its unit for an all-off request.)
		whole := x-learned > 0
		restated := 0.0 // the variance of the all-off work a move restated this period
		if all.N >= minJumpCount && own && whole {
			// Only a period's own tallies teach: a window's mean latency
			// is mostly of the levels before a move.
			restated = c.teach(now, x-learned, v, prior, priorT)
		} else {
			m.mdl.moveAt = time.Time{} // a move teaches with a period's own tallies, or not at all
		}
		den := 1 + m.mdl.scale*prior
		r := c.sighting(&m.mdl.base, o, span)
		m.mdl.base.jv = r * c.spread(all) / float64(all.N) / (den * den)
		was := m.mdl.base.est
		m.mdl.base.own = own
		if whole && m.mdl.base.update((x-learned)/den, r*v/(den*den), fastWeight(m.sigWindow.Seconds()/c.cfg.Tick.Seconds()), all.N >= minJumpCount && o.fresh) {
			m.mdl.baseAt = now
			m.mdl.baseFell = own && m.mdl.base.est < was
		}
		// A period that restated the all-off work is the one its
		// estimate rests on: folded in again, it would count twice.
		m.mdl.base.atLeast(restated)
		m.mdl.lastPrior, m.mdl.lastPriorT, m.mdl.lastOK = prior, priorT, true
		m.mdl.baseOwn = own
		if sp := span.Seconds(); sp > 0 {
			// The work of a count of requests: its variance is the
			// count's times a request's second moment.
			busy, busySE = all.Sum/sp, math.Sqrt(all.SumSq)/sp
		}
	}
	m.mdl.w0 = 1
	if seconds && m.mdl.base.ok && m.mdl.base.est > 0 {
		m.mdl.w0 = m.mdl.base.est
	}
	for i, f := range fs {
		if !m.mdl.learned[i] {
			m.mdl.cost[i] = f.Cost * m.mdl.scale * m.mdl.w0
		}
	}
	m.mdl.mean = c.work(max(m.brightness, 0))
	return seconds, busy, busySE
}

// teach learns the priors' scale s from the period that shows a move (below):
// its work (less the learned features'), y = w₀·(1 + t·P′), against the
// all-off work tracked before it, ŵ₀ = w₀·(1 + t·P)/(1 + s·P), where P
// and P′ are the priors' shares before and after (Σ sᵢCostᵢ) and t the
// true scale. With A = y/(ŵ₀·(1 + s·P)) they give
//
//	t = (A − 1)/(P′ − A·P)
//
// A move that made the pages three times as heavy as the priors said
// teaches a scale of 2 (at most maxScaleStep a move) and the next ones the
// rest — until the features are contrasted and their own costs replace
// the priors. The tracked all-off work is then restated in the new scale.
// A predicted change within teachZ standard errors of the two estimates
// teaches nothing.
//
// P is the share measured in the period before the move, P′ the one
// measured in the period that teaches: a pinned feature, a segment's
// offset, the probe render other shares than the ladder's, and the
// tracked all-off work was measured at what was rendered.
//
// The period that teaches is the first whose requests rendered most of
// the move — the tallied features' shares went at least half the way the
// ladder moved them (afterT, of the features tallied) — within a signal
// window of it: an app that reads the levels from brownoutd renders them
// a push and a stream message after the daemon set them, and the period
// the daemon reads next is then mostly of the levels before: it would say
// the move changed nothing. (A feature without a tally is taken at the
// ladder's share, which moves at once: it cannot show the move.)
//
// It returns the variance of the all-off work it restated (0 when it
// taught nothing): the period's own, which the tracker must not halve by
// folding the same period in (see demand).
func (c *Controller) teach(now time.Time, y, v, after, afterT float64) float64 {
	m := &c.mu.mdl
	at := m.moveAt
	if at.IsZero() {
		return 0
	}
	if slices.Contains(m.tallied, true) && math.Abs(m.moveD) < math.Abs(m.moveAll)/2 {
		// Some features have tallies, and the move is mostly of those
		// that have none: their shares are the ladder's, which moved at
		// once, and no period can show whether the app rendered it.
		m.moveAt = time.Time{}
		return 0
	}
	if d := m.moveD; d != 0 && (afterT-m.moveT)/d < 0.5 && now.Sub(at) < max(c.mu.sigWindow, c.cfg.Tick) {
		return 0 // not seen yet
	}
	m.moveAt = time.Time{}
	if !m.baseAt.IsZero() && at.Sub(m.baseAt) <= c.cfg.Tick {
		// The all-off work jumped in the period of the move or the one
		// before (the service changed: a capacity back, a dependency
		// slower): the move's measured change is the service's as much
		// as the priors', and it teaches nothing of them.
		return 0
	}
	if !slices.Contains(m.tallied, true) && !m.loadJumpAt.IsZero() && at.Sub(m.loadJumpAt) <= c.cfg.Tick {
		// No feature has a tally, and the load jumped (or arrived) in
		// the period of the move, the one before, or since: the move was
		// the levels' answer to the load, and the periods it is measured
		// between are ones a request's work answers the load in too —
		// contention, the gate's concurrency, a cold start. Nothing tells
		// the two apart. (Where features have tallies, their costs are
		// learned from the contrast of requests with and without them
		// within one period, which no load moves, and the moves' teaching
		// only carries the priors until then: the four-worker and reach
		// labs, priors two to four times too low, need their first moves
		// to teach.) In the one-block lab, its costs configured right, the
		// first move, at the load's arrival, taught a scale of 1.23 from
		// a change 0.3 of a standard error past its prediction, and no
		// later move was large enough to take it back: a capacity dip's
		// return came 19 s late. The step's jumps taught the scale up and
		// down: 15, 12, 21 and 19 of its 100 runs turned more than twice
		// at its four settings, 11, 10, 19 and 14 without.
		return 0
	}
	before, s := m.movePrior, m.scale
	if !m.base.ok || m.base.est <= 0 || !(y > 0) {
		return 0
	}
	pred := (after - before) * s / (1 + s*before) // the predicted relative change
	noise := math.Sqrt(v/(y*y) + m.base.p/(m.base.est*m.base.est))
	if math.Abs(pred) < minScaleMove || math.Abs(pred) < teachZ*noise {
		return 0
	}
	a := y / (m.base.est * (1 + s*before))
	t := (a - 1) / (after - a*before)
	r := t / s
	// How far one move may teach: maxScaleStep for each teachZ standard
	// errors by which its prediction stood out of the noise — a move of
	// a few noisy periods teaches a factor of 2, one of thousands of
	// requests as far as it measured.
	step := math.Pow(maxScaleStep, math.Abs(pred)/(teachZ*max(noise, 1e-9)))
	moved := a - 1 // the measured relative change
	switch {
	case moved*pred < 0 && math.Abs(moved) > teachZ*noise:
		// The work moved the other way from the prediction, beyond the
		// noise: one period contradicts the move (a pause, a cold cache)
		// — it says the scale is off, not by how much: maxScaleStep,
		// however sure the period.
		r = 1 / maxScaleStep
	case math.IsNaN(r) || math.IsInf(r, 0) || (r <= 0 && moved*pred > 0):
		// More than any scale explains, the prediction's way: at or past
		// the pole of t (A at or beyond P′/P, where t is infinite or
		// negative — a period of a few per cent of noise puts a work
		// that rose nearly as far as the shares there). It teaches the
		// step, as a t beyond the step does (it taught 1/step, as a work
		// that did not move, where t was negative).
		r = step
	case r <= 0:
		// The work did not move, within its noise: the features cost
		// less than the priors by as far as the evidence reaches.
		r = 1 / step
	default:
		// What this move measured is weighed against what the moves
		// before taught, each by its precision: the scale's logarithm is
		// a Kalman estimate, the measured t's standard error the period's
		// noise carried through t (logSpread), and what the moves taught
		// is forgotten over scaleMemory moves. The first move is taken
		// nearly whole (the prior is wide); later ones refine it. Without
		// it each move restated the scale from its own period, and
		// through the lab's step the return to full brightness, read from
		// one period, moved the scale by a fifth and the levels with it.
		// A move that measured more than one move may teach (the step
		// above) teaches the step whole, and what it left untaught stays
		// in the variance, for the next move to take.
		whole := r
		r = min(max(r, 1/step), step)
		pv := m.scaleVar
		if pv <= 0 {
			pv = scalePriorVar
		}
		pv = min(pv/(1-1/scaleMemory), scalePriorVar)
		if r != whole {
			left := math.Log(whole / r)
			m.scaleVar = min(max(pv, left*left), scalePriorVar)
		} else {
			sm := logSpread(a, noise, before, after, t)
			g := pv / (pv + sm*sm)
			r = math.Exp(g * math.Log(r))
			m.scaleVar = (1 - g) * pv
		}
		m.scaleVar = max(m.scaleVar, minScaleVar)
	}
	ns := min(max(s*r, 1/maxScale), maxScale)
	f := (1 + s*before) / (1 + ns*before)
	m.base.rescale(f)
	// The all-off work restated rests on the period that taught the
	// scale (y over 1 + ns·after, where the scale is what the period
	// measured): it is no surer than that period, whatever the tracker
	// knew of the work at the old scale — so that the periods after it,
	// which measure the work at the new levels, correct it at once (at
	// the floors, each measures it whole). Restated with the tracker's
	// own variance, a period 15 % low held the work there for twenty
	// periods, and the lab's step brightened on it and dimmed back.
	rv := v / ((1 + ns*after) * (1 + ns*after))
	m.base.atLeast(rv)
	m.capacity.at, m.capacity.grown = m.capacity.at*f, m.capacity.grown*f // (a restatement, not a service that changed: see capacity.rebase)
	m.scale = ns
	return rv
}

// spread returns the variance of one request's work over about
// spreadMemory periods, updated with the period's requests all. Service
// times are skewed: a period whose sample lacks the tail (no slow request
// that second) has a small variance as well as a small mean, and read
// against its own variance its mean stood four standard errors under the
// work's estimate — the tracker jumped to it (12 % down in the lab, the
// levels up by 0.6 and back). The jump tests read a period with this
// spread at least (tracker.jv); the estimate still weighs it by its own.
func (c *Controller) spread(all signals.Moments) float64 {
	m := &c.mu.mdl
	if v := all.Var(); v >= 0 && !math.IsInf(v, 0) {
		if m.spread <= 0 {
			m.spread = v
		} else {
			m.spread += fastWeight(spreadMemory) * (v - m.spread)
		}
	}
	return max(m.spread, 0)
}

// work is w(b): the work of a request at brightness b — the all-off
// request's, plus the costs of the features b renders to the requests
// that evaluate them.
func (c *Controller) work(b float64) float64 {
	m := &c.mu.mdl
	w, probe := m.w0, c.probeAt(b)
	for i := range c.cfg.Features {
		w += c.published(i, b, probe) * c.costPer(i)
	}
	return max(w, 0)
}

// published is feature i's level at brightness b (probed by probe) as
// the levels publish it: a pin's, or the ladder's under a scheduled cap.
// A pinned feature does not move with b, and what dimming it would save
// is not there to be saved.
func (c *Controller) published(i int, b float64, probe probeLevels) float64 {
	m := &c.mu
	if pin, ok := m.pins[c.cfg.Features[i].Name]; ok {
		return pin.Level
	}
	l := c.lit(i, max(b, 0), probe)
	if m.capBy[i] >= 0 {
		l = min(l, m.caps[i])
	}
	return l
}

// priorShare is the priors' share of the all-off work at brightness b, as
// published: Σ ℓᵢ(b)·rᵢ·Costᵢ over the features whose cost is not
// learned — of those tallied in the last period alone, with tallied —
// each level the ladder's, a pin's, or under a scheduled cap.
func (c *Controller) priorShare(b float64, tallied bool) float64 {
	m := &c.mu
	p, probe := 0.0, c.probeAt(b)
	for i, f := range c.cfg.Features {
		if m.mdl.learned[i] || tallied && !m.mdl.tallied[i] {
			continue
		}
		p += c.published(i, b, probe) * f.Cost * m.mdl.reach[i]
	}
	return p
}

// costPer is what feature i, rendered to every request that evaluates
// it, adds to the work of an arriving request: its cost times its reach.
func (c *Controller) costPer(i int) float64 {
	m := &c.mu.mdl
	return m.cost[i] * m.reach[i]
}

// reachOf updates each feature's reach with a period's tallies ts and
// the count of its requests, n (Snapshot.Work.N): the share of requests
// that evaluated the feature, as counts forgotten over spreadMemory
// periods. A shop's cart and checkout evaluate no feature, and a product
// page's features are evaluated by its requests alone: without the reach
// the model would put a product page's cost on every arrival. A period
// whose share stands reachJumpZ standard errors over the reach sets it
// at once (a feature's pages back after a lull). A feature without a
// tally keeps a reach of 1.
func (c *Controller) reachOf(ts []signals.Tally, n int64) {
	m := &c.mu.mdl
	a := fastWeight(spreadMemory)
	m.reachAll = (1-a)*m.reachAll + float64(n)
	for i, f := range c.cfg.Features {
		var k int64
		found := false
		for _, t := range ts {
			if t.Feature == f.Name {
				k, found = min(t.On.N+t.Off.N, n), true
				break
			}
		}
		switch {
		case found && m.reachN[i] < 0:
			m.reachN[i] = float64(k) // first measured: as if every period before had been the same
			m.reachN[i] *= m.reachAll / float64(n)
		case found:
			m.reachN[i] = (1-a)*m.reachN[i] + float64(k)
			if p := float64(k) / float64(n); n >= minJumpCount && m.reachAll > 0 &&
				p-m.reachN[i]/m.reachAll > reachJumpZ*math.Sqrt(p*(1-p)/float64(n)) {
				// The period's share stands out over the forgotten
				// one: the feature's pages are back (after a lull of
				// them its reach was near 0, and its cost nearly
				// nothing to the law). The rise is taken at once; a
				// fall is forgotten over spreadMemory, erring heavy.
				m.reachN[i] = p * m.reachAll
			}
		case m.reachN[i] >= 0:
			m.reachN[i] *= 1 - a
		}
		if m.reachN[i] >= 0 && m.reachAll > 0 {
			m.reach[i] = min(m.reachN[i]/m.reachAll, 1)
		}
	}
}

// logSpread is the standard error of ln t, the scale a move measured
// (t = (A − 1)/(P′ − A·P)), for A known within a relative noise: the
// distance of ln t to its values at A(1 ± noise), averaged over the sides
// whose t is a scale (positive, finite) — near the pole of t (A → P′/P)
// one side is not, and the other says how far t is known from below.
func logSpread(a, noise, before, after, t float64) float64 {
	n, sum := 0, 0.0
	for _, s := range []float64{-1, 1} {
		ai := a * (1 + s*noise)
		ti := (ai - 1) / (after - ai*before)
		if ti > 0 && !math.IsInf(ti, 0) {
			sum += math.Abs(math.Log(ti / t))
			n++
		}
	}
	if n == 0 {
		return math.Inf(1)
	}
	return sum / float64(n)
}

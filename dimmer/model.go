package dimmer

import (
	"math"
	"slices"
	"time"

	"github.com/brownout/brownout/signals"
)

// The model law (Config.Model; docs/model.md has its equations and its
// figures in the lab). A request at brightness b costs
//
//	w(b) = w₀ + Σᵢ ℓᵢ(b)·ĉᵢ
//
// of work, where w₀ is the work of a request with every feature off,
// ℓᵢ(b) feature i's level on the ladder and ĉᵢ its cost. The unit of work
// is a second of service when the source tallies service time
// (signals.Tally: the local Recorder, apps pushing to brownoutd): w₀ is
// then measured — each period's mean work brought back to the all-off
// request's by the costs, and followed by a tracker (track.go) — and a
// cost not yet learned is its prior (Feature.Cost, a share of the all-off
// request) times w₀ times a scale the moves teach (see teach). Without
// tallies the unit is the all-off request: w₀ = 1 and ĉᵢ = Costᵢ.
//
// The service carries K of work a second within its targets (see
// capacity.go). At the offered load λ (a tracker of the periods' arrival
// rates) the levels that fit are those with λ·w(b) ≤ K: the law sets b to
// the brightest such level — a measured change of the load moves the
// levels at once, by the amount it calls for (a rise from one period, a
// fall once two show it) — and moves it only when that differs from the
// levels now by minMove (or a quantum, where the levels are published in
// quanta wider than that).

const (
	// coldConfirm is how many periods in a row over High make an
	// overload — at full brightness without a saturated gate to measure
	// it, or a level K must be corrected down from: a burst of one period
	// is not one.
	coldConfirm = 2
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
	// minMove is the smallest move of the brightness the law makes: the
	// noise that remains in the held estimates (a per cent or two of the
	// load and of a request's work) moves the brightness by up to three
	// times as much where the ladder is a third of a page.
	minMove = 0.05
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
	// spreadMemory is the periods over which a request's spread is
	// averaged: a minute, over which the levels and the service change
	// it little.
	spreadMemory = 60.0
	// reachJumpZ is the standard errors by which a period's share of
	// the requests that evaluate a feature must exceed its reach for the
	// reach to take it at once (see reachOf).
	reachJumpZ = 3.0
	// freshSlack is the share of RecentSpan by which an interval of the
	// fleet may end early and still be a new one: pushes on a period
	// arrive with a jitter of a few per cent of it.
	freshSlack = 0.1
	// teachZ is the standard errors of the all-off work's estimates a
	// move's predicted change must exceed to teach the priors' scale.
	teachZ = 2.0
)

// modelState is the model law's part of the controller's state.
type modelState struct {
	capacity capacity // K and Ĉ (see capacity.go)
	load     tracker  // the offered load (see estimateLoad)
	base     tracker  // the all-off request's work, measured (see demand)
	regime   bool     // the load or the all-off work jumped this period
	overRun  int      // periods in a row over High
	// satAt is when the last saturated interval ended (its RecentAt, or
	// the period's now where the source does not say), and satWhole
	// whether the one before it was saturated too: a run of two or more
	// (see capacity.saturated).
	satAt    time.Time
	satWhole bool
	mean     float64   // the mean work of a request at the levels now (see demand)
	w0       float64   // the all-off request's work: 1 without tallies, else base's estimate
	cost     []float64 // per feature, its cost in the unit of work (see demand)
	learned  []bool    // per feature: cost is the learned estimate, not the prior
	// The load's last two intervals, for brightening (see controlModel):
	// the load before the latest was folded in (the tracker's estimate,
	// or without one the last rate), the rate the one before it
	// measured, and the latest's rate; when the latest new interval
	// ended (Snapshot.RecentAt), to tell a new interval from one seen
	// again (see observe); and when the load was last known.
	lamPrev, ratePrev, rate float64
	// How the load moves beyond its noise (see loadMotion): motion is
	// the intervals' squared errors from the estimate over the variance
	// the tracker expected of them, averaged (1 for a load that holds),
	// and motionVar that variance, the latest; dispersion is the
	// arrivals' variance over a Poisson count's (see disperse).
	motion, motionVar, dispersion float64
	recentAt, loadAt              time.Time
	// reach is, per feature, the share of the requests that evaluate it
	// (see reachOf): a feature's cost is a request's that renders it,
	// and what it adds to the load's work is cost × reach × level.
	// reachN and reachAll are the counts it is the ratio of, forgotten
	// over spreadMemory periods (reachN < 0: not measured, reach 1).
	reach, reachN []float64
	reachAll      float64
	// scale multiplies every prior (Feature.Cost): what the moves taught
	// of how wrong the configured costs are (see teach). 1 at first.
	scale float64
	// The priors' share of a request's work measured in the last period
	// (Σ sᵢ·Costᵢ over the features not learned, sᵢ the share of its
	// requests that rendered feature i: what the tracked all-off work was
	// measured at), and the part of it of the features that had a tally
	// then (tallied, per feature).
	lastPrior, lastPriorT float64
	lastOK                bool
	tallied               []bool
	// The last move, until a period teaches the scale with it (see
	// teach): when; the priors' share measured before it; of the features
	// tallied, the share measured before it, the ladder's share at the
	// levels it moved from, and the ladder's change it made.
	// moveAll is the ladder's change over every feature not learned, and
	// moveAllFrom its share where the move began.
	moveAt                            time.Time
	movePrior, moveT, moveFrom, moveD float64
	moveAllFrom, moveAll              float64
	// spread is the variance of a request's work over about
	// spreadMemory periods (see spread).
	spread float64
	// errSum and errN: the pressure's errors since K last moved (see
	// capacity.go), and how many periods they are.
	errSum float64
	errN   int
	// baseAt is when the all-off work last jumped (see teach), and
	// baseOwn whether the last period measured it from its requests' own
	// tallies (a service's work), not from a window's latency (which
	// holds the queue's wait too: see capacity.rebase).
	baseAt  time.Time
	baseOwn bool
	// levelsAt is when the levels last moved: a signal window that began
	// before it measures the levels before, and corrects nothing.
	levelsAt time.Time
	// probe: the law probes (see probe.go), as of the last step, and
	// probeShare the share of the users it takes (0 until it starts).
	probe      bool
	probeShare float64
}

// size makes the per-feature slices for nf features.
func (s *modelState) size(nf int) {
	s.cost, s.learned, s.tallied = make([]float64, nf), make([]bool, nf), make([]bool, nf)
	s.reach, s.reachN = make([]float64, nf), make([]float64, nf) // reachAll, of every request, carries over
	for i := range s.reach {
		s.reach[i], s.reachN[i] = 1, -1
	}
}

// unreach makes every feature's reach unmeasured (1), and forgets the
// count of requests it was measured over.
func (s *modelState) unreach() {
	for i := range s.reach {
		s.reach[i], s.reachN[i] = 1, -1
	}
	s.reachAll = 0
}

// observe reads the model law's observation of one period from s:
// busy is the room signal when busyOK.
func (c *Controller) observe(now time.Time, s signals.Snapshot, busy float64, busyOK bool) (observation, bool) {
	cfg := &c.cfg
	o := observation{gate: busyOK, room: busyOK && busy < cfg.RoomBelow, full: !busyOK || busy >= cfg.SaturatedAt, load: -1, rate: -1}
	if v, ok := s.Get(cfg.LoadSignal); ok && v >= 0 {
		o.load = v
	}
	if v, ok := s.Get(signals.Throughput); ok && v >= 0 {
		o.rate = v
	}
	if v, ok := s.Get(signals.GateQueued); ok && v > 0 {
		o.queued = v
	}
	o.queues = 1
	if s.Instances > 1 && !math.IsInf(s.Instances, 0) {
		o.queues = s.Instances
	}
	o.tallies, o.work = s.Tallies, s.Work
	if len(o.tallies) == 0 && o.work.N == 0 && s.Window > 0 {
		// No per-request tallies: the window's mean latency stands for
		// a request's work (the source's latency is its service time),
		// as a tally of the window's completions would give it — their
		// second moment an exponential's, 2·mean².
		// A period's worth of them (the window's periods overlap: the
		// next period's mean is mostly this one's, and counting the
		// whole window's completions each period would make the
		// trackers as sure of it as of that many independent requests).
		mean, okm := s.Get(signals.LatencyMean)
		if n := math.Round(max(o.rate, 0) * cfg.Tick.Seconds()); okm && mean > 0 && n >= 1 {
			o.latency = signals.Moments{N: int64(n), Sum: mean * n, SumSq: 2 * mean * mean * n}
			o.latencySpan = cfg.Tick
		}
	}
	if s.RecentSpan > 0 {
		sp := s.RecentSpan.Seconds()
		o.recentSpan, o.recentLoad = s.RecentSpan, float64(s.Recent.Arrived)/sp
	}
	o.timed, o.recentAt = !s.RecentAt.IsZero(), s.RecentAt
	// A new interval of the fleet: one that ended a span after the last
	// new one, less freshSlack of it (pushes arrive with some jitter).
	// Instances that push at different times move RecentAt at each push,
	// and each instance's interval is then in several snapshots.
	o.fresh = !o.timed || c.mu.mdl.recentAt.IsZero() || s.RecentAt.Before(c.mu.mdl.recentAt) ||
		s.RecentAt.Sub(c.mu.mdl.recentAt) >= time.Duration((1-freshSlack)*float64(s.RecentSpan))
	if o.timed && o.fresh {
		c.mu.mdl.recentAt = s.RecentAt
	}
	// Saturated: a full gate, and arrivals beyond the completions —
	// refused or queued — so the completions are what the service can do.
	o.saturated = busyOK && busy >= cfg.SaturatedAt && o.load > 0 && o.rate > 0 && o.load >= o.rate*(1+saturatedExcess)
	var ok bool
	o.p, o.pc, ok, o.top = c.pressure(now, s, o.room)
	return o, ok
}

// observation is one period's signals, as the law reads them.
type observation struct {
	p, pc float64 // pressure, and that of the targets that may drive the cascade
	top   int
	load  float64 // offered load; < 0 when unknown
	rate  float64 // completions per second; < 0 when unknown
	// queued is the requests waiting at the admission gate (0 without one).
	queued float64
	// queues is how many instances' queues the snapshot sums
	// (Snapshot.Instances; at least 1).
	queues float64
	// The same over the last period alone, when the source counts it.
	recentLoad float64
	recentSpan time.Duration
	// fresh: the period's interval (Recent, Tallies, Work) was not seen
	// before — a daemon that ticks faster than its instances push sees
	// one several times, and a value seen again neither starts nor
	// confirms a jump of a tracker. timed: the source says when its
	// intervals end (Snapshot.RecentAt), so that fresh is known; without
	// it every period is taken as fresh (see sighting).
	fresh, timed bool
	recentAt     time.Time // Snapshot.RecentAt
	tallies      []signals.Tally
	work         signals.Moments // every tallied request's (Snapshot.Work)
	// latency and latencySpan: without tallies, the window's completions
	// as a tally of every request would give them (see observe).
	latency     signals.Moments
	latencySpan time.Duration
	gate        bool // an admission gate reports (RoomSignal present)
	saturated   bool // the arrivals exceed the completions at a full gate
	full        bool // the gate is full (for the cascade)
	room        bool
}

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
		if all.N >= minJumpCount && own {
			// Only a period's own tallies teach: a window's mean latency
			// is mostly of the levels before a move.
			c.teach(now, x-learned, v, prior, priorT)
		} else {
			m.mdl.moveAt = time.Time{} // a move teaches with a period's own tallies, or not at all
		}
		den := 1 + m.mdl.scale*prior
		r := c.sighting(&m.mdl.base, o, span)
		m.mdl.base.jv = r * c.spread(all) / float64(all.N) / (den * den)
		if m.mdl.base.update((x-learned)/den, r*v/(den*den), fastWeight(m.sigWindow.Seconds()/c.cfg.Tick.Seconds()), all.N >= minJumpCount && o.fresh) {
			m.mdl.baseAt = now
		}
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
func (c *Controller) teach(now time.Time, y, v, after, afterT float64) {
	m := &c.mu.mdl
	at := m.moveAt
	if at.IsZero() {
		return
	}
	if slices.Contains(m.tallied, true) && math.Abs(m.moveD) < math.Abs(m.moveAll)/2 {
		// Some features have tallies, and the move is mostly of those
		// that have none: their shares are the ladder's, which moved at
		// once, and no period can show whether the app rendered it.
		m.moveAt = time.Time{}
		return
	}
	if d := m.moveD; d != 0 && (afterT-m.moveT)/d < 0.5 && now.Sub(at) < max(c.mu.sigWindow, c.cfg.Tick) {
		return // not seen yet
	}
	m.moveAt = time.Time{}
	if !m.baseAt.IsZero() && at.Sub(m.baseAt) <= c.cfg.Tick {
		// The all-off work jumped in the period of the move or the one
		// before (the service changed: a capacity back, a dependency
		// slower): the move's measured change is the service's as much
		// as the priors', and it teaches nothing of them.
		return
	}
	before, s := m.movePrior, m.scale
	if !m.base.ok || m.base.est <= 0 || !(y > 0) {
		return
	}
	pred := (after - before) * s / (1 + s*before) // the predicted relative change
	noise := math.Sqrt(v/(y*y) + m.base.p/(m.base.est*m.base.est))
	if math.Abs(pred) < minScaleMove || math.Abs(pred) < teachZ*noise {
		return
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
	case math.IsNaN(r) || math.IsInf(r, 0):
		// More than any scale explains, the prediction's way.
		r = maxScaleStep
	case r <= 0:
		// The work did not move, within its noise: the features cost
		// less than the priors by as far as the evidence reaches.
		r = 1 / step
	default:
		r = min(max(r, 1/step), step)
	}
	ns := min(max(s*r, 1/maxScale), maxScale)
	f := (1 + s*before) / (1 + ns*before)
	m.base.rescale(f)
	m.capacity.at, m.capacity.grown = m.capacity.at*f, m.capacity.grown*f // (a restatement, not a service that changed: see capacity.rebase)
	m.scale = ns
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

// solve returns the brightest b in [0, ceil] with w(b) ≤ budget, by
// bisection (w is monotone in b); 0 when even the floors exceed it.
func (c *Controller) solve(budget, ceil float64) float64 {
	if c.work(ceil) <= budget {
		return ceil
	}
	if c.work(0) > budget {
		return 0
	}
	lo, hi := 0.0, ceil
	for hi-lo > c.cfg.Quantum/4 {
		mid := (lo + hi) / 2
		if c.work(mid) <= budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// carriedNow is, with every feature at its floor (b ≤ 0), a lower bound
// of the work a second the service carries there: the tracked load
// times a request's work at the floors, less carriedZ standard errors of
// the two trackers; 0 above the floors or while the load is not tracked.
// At the floors a K under the load's work holds the levels there, and
// nothing they do can show it too low; above them a period's work
// bounds K (and the tracked load, which lags a load that moves, would
// overstate it). The load is the tracked one or the period's, whichever
// is lower.
func (c *Controller) carriedNow(b, lam, period float64) float64 {
	m := &c.mu.mdl
	if b > 0 || lam <= 0 || !m.load.ok || m.load.est <= 0 {
		return 0
	}
	if period >= 0 {
		lam = min(lam, period)
	}
	rel := m.load.p / (m.load.est * m.load.est)
	if m.base.ok && m.base.est > 0 {
		rel += m.base.p / (m.base.est * m.base.est)
	}
	return lam * m.mean * (1 - carriedZ*math.Sqrt(rel))
}

// moveZ is the standard errors of the load's and a request's work
// estimates within which the levels now are taken to be right: the
// levels move only once the levels those estimates set, read moveZ
// standard errors lighter and heavier, all lie on one side of them. The
// estimates average ever more periods while the load holds, so the band
// narrows to minMove's within a few dozen periods of a change; right
// after one, where the load's estimate is the mean of a few periods, it
// keeps the levels from following their noise (at 150 req/s in the lab,
// where θ* is 0.05, a load 3 % higher or lower moves the levels by 0.06).
// One, not more: at 1.5 the lab's step turned less but a one-worker sine
// load kept 0.6 point fewer users in time and more constant runs were
// not calm; at 2 a constant load's in time fell under the goal's line
// (docs/model.md, "What is missing").
const moveZ = 1.0

// withinNoise reports whether the brightness b is one the load and a
// request's work allow within moveZ standard errors of their estimates,
// at capacity k: then a move would follow noise. The band is the one a
// feature's levels move within as the demand varies: where the service
// has room at either end, it is narrow.
func (c *Controller) withinNoise(b, k, lam, ceil float64) bool {
	m := &c.mu.mdl
	if k <= 0 || lam <= 0 || !m.load.ok || m.load.est <= 0 {
		return false
	}
	rel := m.load.p / (m.load.est * m.load.est)
	if m.base.ok && m.base.est > 0 {
		rel += m.base.p / (m.base.est * m.base.est)
	}
	d := moveZ * math.Sqrt(rel)
	if !(d > 0) {
		return false
	}
	hi := ceil // (a demand that may be nothing allows any brightness)
	if d < 1 {
		hi = c.solve(k/(lam*(1-d)), ceil)
	}
	return c.solve(k/(lam*(1+d)), ceil) <= b && b <= hi
}

// repeats is how many periods see the interval span — the fleet's
// sources report an instance's latest interval until its next reading, so
// a daemon that ticks faster than its instances push sees one interval
// several times: each sighting then counts for that share of a period
// (its variance times repeats), so that one interval weighs as one.
func (c *Controller) repeats(span time.Duration) float64 {
	return max(1, span.Seconds()/c.cfg.Tick.Seconds())
}

// sighting sets how tracker tr weighs a period that sees the interval
// span (see repeats): as its share of a period. Where the source says
// when its intervals end, only a first sighting tests for a jump, with
// the interval's own variance (tr.w); it returns 1, the factor of the
// variances the caller passes. Where it does not, any sighting may be a
// repeat, and its jump tests too read it as a share: it returns
// repeats, and the caller passes its variances times that.
func (c *Controller) sighting(tr *tracker, o observation, span time.Duration) float64 {
	if o.timed {
		tr.w = 1 / c.repeats(span)
		return 1
	}
	tr.w = 0
	return c.repeats(span)
}

// estimateLoad follows the offered load with a tracker of the periods'
// arrival rates (see tracker). Without per-period counts it is the
// source's windowed rate. It keeps the last two intervals' loads for
// brightening (lamPrev, ratePrev, rate).
func (c *Controller) estimateLoad(o observation) float64 {
	m := &c.mu
	if o.recentSpan <= 0 || o.recentLoad < 0 {
		m.mdl.load = tracker{}
		m.mdl.motion, m.mdl.motionVar, m.mdl.dispersion = 0, 0, 0 // (the load's motion is the tracker's errors)
		if o.load >= 0 {
			m.mdl.lamPrev, m.mdl.ratePrev, m.mdl.rate = m.mdl.rate, m.mdl.rate, o.load
		}
		return o.load
	}
	if o.fresh {
		c.disperse(o.recentLoad, o.recentSpan.Seconds())
		prev := m.mdl.rate // after a period without counts the tracker starts afresh
		if m.mdl.load.ok {
			prev = m.mdl.load.est
		}
		m.mdl.lamPrev, m.mdl.ratePrev, m.mdl.rate = prev, m.mdl.rate, o.recentLoad
	}
	s := o.recentSpan.Seconds()
	v := max(m.mdl.load.est, o.recentLoad, 1/s) / s // a Poisson count's variance, as a rate
	v *= c.sighting(&m.mdl.load, o, o.recentSpan)
	m.mdl.load.moves = true
	fresh := o.fresh && m.mdl.load.ok
	e := o.recentLoad - m.mdl.load.est
	pred := v + m.mdl.load.p
	if m.mdl.load.update(o.recentLoad, v, fastWeight(m.sigWindow.Seconds()/c.cfg.Tick.Seconds()), o.fresh) {
		m.mdl.regime = true
	} else if fresh && !m.mdl.load.held {
		// What the interval's rate moved from the estimate, over the
		// variance the tracker expected of it, as dispersed as the
		// arrivals are: 1 on average for a load that holds. A jump, or
		// an interval held out as one may be, is no motion: the tracker
		// restarts at the new level.
		if m.mdl.motion == 0 {
			m.mdl.motion = 1
		}
		d := max(m.mdl.dispersion, 1)
		if r := e * e / (d * pred); r >= 0 && !math.IsInf(r, 0) {
			m.mdl.motion += fastWeight(spreadMemory) * (min(r, jumpZ*jumpZ) - m.mdl.motion)
			m.mdl.motionVar = d * pred
		}
	}
	return m.mdl.load.est
}

// disperse folds a new interval's rate x, over span s seconds, into the
// arrivals' dispersion: how much more their counts vary than a Poisson
// count's — retries of refused requests in step, clients that send in
// bursts. The second difference of three intervals' rates, x − 2·x₁ + x₂,
// has six times an interval's variance and hardly any of a load that
// moves smoothly (a sine's curve over three intervals is a few requests
// a second): its square over six Poisson variances, averaged over
// spreadMemory intervals, is the dispersion. A second difference beyond
// jumpZ of it (a step) counts as jumpZ².
func (c *Controller) disperse(x, s float64) {
	m := &c.mu.mdl
	if s <= 0 || !m.load.ok || m.rate <= 0 || m.ratePrev <= 0 {
		return
	}
	d2 := x - 2*m.rate + m.ratePrev
	r := d2 * d2 / (6 * max(m.load.est, 1/s) / s)
	if !(r >= 0) || math.IsInf(r, 0) {
		return
	}
	if m.dispersion == 0 {
		m.dispersion = 1
	}
	m.dispersion += fastWeight(spreadMemory) * (min(r, jumpZ*jumpZ*max(m.dispersion, 1)) - m.dispersion)
}

// motionZ is the standard errors by which the intervals' mean squared
// error, over the arrivals' dispersion, must exceed a load's that holds
// (1) for the load to be taken to move: two, so that a load that holds is
// taken to move in about one period in forty, and then by little (over
// ten seeds of Poisson arrivals, 0–1.2 % of the periods: TestLoadMotion).
const motionZ = 2.0

// motionSE is the standard error of that ratio where the load holds: the
// mean of spreadMemory squared errors has a relative one of √(2/60) =
// 0.18, and the dispersion's mean of as many squared second differences
// one of √(2·1.94/60) = 0.25 — successive second differences share two
// of their three intervals (correlations −2/3 and 1/6 at lags one and
// two, 1 + 2·(4/9 + 1/36) = 1.94 times the variance of independent
// ones); together √(0.18² + 0.25²) = 0.31. (With the first alone, loads
// 10–15 % more dispersed than Poisson's were taken to move in up to a
// quarter of their periods, by up to a tenth of the load.)
var motionSE = math.Sqrt(2/spreadMemory + 2*(1+2*(4.0/9+1.0/36))/spreadMemory)

// loadMotion is how far the load may move in an interval beyond its
// noise, in requests a second: the standard deviation of the intervals'
// errors from the estimate that the arrivals' noise and the tracker's
// own uncertainty do not explain; 0 unless they stand motionZ standard
// errors over a load's that holds.
//
// The levels are set for the load this far over its estimate. A load
// that moves smoothly (a sine, traffic that swings) is tracked a
// period or two late, and a period served for the load of the one before
// costs users their answers where the load rose; a load that holds, or
// that jumped once and holds (the tracker restarts at a jump, and the
// jump is no motion), is served for its estimate. On the parts lab's
// sines (ten seeds) 95.4 % of users in time instead of 95.1 % at one
// worker, 99.0 % instead of 98.7 % at four; at constant loads, through
// the step and on square waves nothing moves. On real HTTP, sines around
// the capacity lost no answer where 0.3–0.5 % were refused (docs/model.md).
func (c *Controller) loadMotion() float64 {
	m := &c.mu.mdl
	over := m.motion - 1 - motionZ*motionSE
	if over <= 0 {
		return 0
	}
	return math.Sqrt(over * m.motionVar)
}

// overWindows is how many signal windows in a row the pressure must read
// over High for a period whose window began before the levels' last move
// to correct K: two, because one burst, however short, keeps a window's
// readings over High for as long as it stays in the window — a window —
// and only an overload that outlasts that is the levels' (see
// controlModel).
const overWindows = 2

// risingLoad is, while the load moves (loadMotion is not 0), the lower of
// the last two intervals' rates; 0 while it holds. The law sets the levels
// for it, where it is over the load served, when the period is over High.
//
// The tracker follows a load that moves a period or two late: on a rise
// the intervals run ahead of its estimate, by as much as its motion or
// more (the parts lab's one-worker sine: arrivals of 76–84/s read as
// 54–64/s). Two intervals in a row over the estimate, with the targets'
// pressure over High, are the load the service is getting, not noise:
// the pressure says the levels are too bright for what came. It is the
// rule of brightening turned round — a brightening goes only as far as
// the last two intervals allow, a fall taken once a second interval shows
// it; here a rise is served once two show it, where the service says it
// is there. A load that holds, or that jumped once and holds, has no
// motion, and is served for its estimate whatever the pressure, so that
// a window of refusals at a constant load does not move the levels on one
// interval's noise (taken at any load, the oracle table's constant loads
// turned 23–47 times in four minutes). On the parts lab's one-worker
// sines (ten seeds) 96.1 % of users in time, 95.4 % without it, at 0.96
// of the per-second oracle's share (1.01); every other lab figure is the
// same.
func (c *Controller) risingLoad() float64 {
	m := &c.mu.mdl
	if c.loadMotion() <= 0 {
		return 0
	}
	return min(m.rate, m.ratePrev)
}

// control applies the law for one period.
func (c *Controller) controlModel(now time.Time, o observation) why {
	m := &c.mu
	cfg := &c.cfg
	dt := cfg.Tick.Seconds()
	ceil := c.ceiling()
	if m.brightness > ceil {
		m.brightness = ceil // a scheduled cap holds the levels down: no windup above it
	}
	b := m.brightness
	w := why{top: o.top, load: o.load, model: true}
	e := &m.mdl.capacity
	lam := c.estimateLoad(o)
	if lam > 0 {
		w.load = lam // the reason gives the load the levels are set for
	}
	seconds, busy, busySE := c.demand(now, o)
	c.setProbe(now, lam)
	if seconds != e.seconds {
		// The unit of work changed (tallies appeared or went): what K
		// was measured in is no more.
		*e = capacity{seconds: seconds}
	}
	if busy <= 0 && o.rate > 0 {
		// No period's work measured (no tallies, or no per-period
		// counts): the completions' rate at a request's work now.
		busy = o.rate * m.mdl.mean
	}

	newSat := false
	if o.saturated && o.fresh {
		// A saturated interval not seen before, and whether it is the
		// second in a row: the one before ended a span before this one
		// (an interval seen again is no second, nor is one after a gap
		// the law did not see — frozen, stale, idle, another replica's
		// term). Where the source does not say when its intervals end,
		// one that ended less than a span after the last is taken for
		// it seen again (a source read more often than it counts).
		at, span := now, max(cfg.Tick, o.recentSpan)
		if o.timed && o.recentSpan > 0 {
			at, span = o.recentAt, o.recentSpan
		}
		gap := at.Sub(m.mdl.satAt)
		if newSat = m.mdl.satAt.IsZero() || gap < 0 || gap >= time.Duration((1-freshSlack)*float64(span)); newSat {
			m.mdl.satWhole = !m.mdl.satAt.IsZero() && gap > 0 && gap <= time.Duration((1+freshSlack)*float64(span))
			m.mdl.satAt = at
		}
	}
	if o.p >= cfg.High {
		m.mdl.overRun++
	} else {
		m.mdl.overRun = 0
	}

	// The capacity, at the all-off work now. Each instance of a fleet
	// queues its own requests: the idle a slower service needs is each
	// one's, o.queues times one's.
	e.rebase(m.mdl.w0, o.queues*cfg.queueIdle(), m.mdl.baseOwn && m.mdl.baseAt.Equal(now))
	kWas := e.k
	win := max(m.sigWindow, cfg.Tick)
	if m.mdl.regime {
		e.reset(now, cfg.Hold)
		m.mdl.regime = false
		m.mdl.errSum, m.mdl.errN = 0, 0
	}
	// An overload that has outlasted overWindows signal windows is no
	// burst; while the levels can still dim it is theirs, and its
	// saturated periods correct K too (see capacity.go's Corrected).
	overLong := time.Duration(m.mdl.overRun)*cfg.Tick >= overWindows*win
	lasting := overLong && b > 0
	if o.saturated && busy > 0 && newSat {
		// (An interval seen again is no second reading of it: a
		// daemon that ticks four times a push moved Ĉ by 59 % of a
		// reading's distance, not measureWeight's 20 %.)
		e.saturated(now, busy, busySE, m.mdl.satWhole, !lasting, cfg.Hold)
	}
	switch {
	case o.saturated && busy > 0 && (!lasting || e.k <= 0):
		// Measured above. (Without K, a saturated period that is not
		// new sets none: the next new one measures it.)
	case e.k <= 0:
		if m.mdl.overRun >= coldConfirm && busy > 0 {
			// Over target, and no saturated period has measured the
			// capacity: what the service carries now is all it carries
			// within target, or more. Where the requests queue at the
			// gate, the overload is that queue's, and a little less
			// work ends it: K is the work carried now. Where the gate
			// has room (or there is none), the latency is not its
			// queue's, and is taken to scale with a request's work (a
			// service that got slower, not one that queues): K is the
			// work carried now times the set point over the pressure.
			k := busy
			if (o.room || !o.gate) && o.top >= 0 && o.top < len(cfg.Targets) && cfg.Targets[o.top].Signal.IsDuration() {
				// (A latency: a refusal ratio does not scale with a
				// request's work.)
				k *= min(1, cfg.Setpoint/o.p)
			}
			e.k, e.src = k, capCold
			e.reset(now, cfg.Hold)
		}
	case o.p < cfg.Low && max(busy-carriedZ*busySE, c.carriedNow(b, lam, o.recentLoad)) > e.k:
		// Carried well within target, beyond K: K was too low (a first
		// measurement taken while the gate's limit was still opening
		// bounds nothing; one set while the service was slower holds
		// the levels at their floors). What it carried: the period's
		// work, less carriedZ standard errors — or, at the floors, the
		// load at their work (see carriedNow).
		e.carried(now, max(busy-carriedZ*busySE, c.carriedNow(b, lam, o.recentLoad)))
		m.mdl.errSum, m.mdl.errN = 0, 0
	case now.Sub(m.mdl.levelsAt) < win && !overLong:
		// The pressure's window still holds periods of the levels
		// before their last move: it says nothing of K at these —
		// unless the pressure has read over High for overWindows
		// windows in a row. The levels they span, before the move and
		// after, were each set for the load at K, and the overload
		// outlasted them all: K is too high, whatever the levels did
		// in between. (On a load that moves the levels move every few
		// periods, and a K set at 0.9 of a saturated period's work
		// held for a minute at one worker while the gate refused
		// 5–20 % of the requests against a target of 1 %.) The
		// periods it counts are over High: they pull K down. A window
		// under Low throughout is not counted so: the levels may have
		// been held under K by the load's estimate, and say nothing of
		// it.
	default:
		// The pressure's distance from the set point, in bands between
		// Low and High, within one band either way: a window of
		// refusals after a burst weighs as much as a band, not as
		// many as its pressure.
		m.mdl.errSum += min(max((cfg.Setpoint-o.p)/(cfg.High-cfg.Low), -1), 1)
		m.mdl.errN++
		if e.due(now, win) {
			err := m.mdl.errSum / float64(m.mdl.errN)
			m.mdl.errSum, m.mdl.errN = 0, 0
			if err < 0 || b < ceil {
				// (At the ceiling, a K that seems too low holds no
				// level down.)
				e.correct(now, err, lam*(c.work(1)-c.work(0)))
			}
		}
	}
	if e.k != kWas {
		e.at = m.mdl.w0 // K found at the all-off work now (see capacity.rebase)
	}
	w.capacity, w.source = e.k, e.src

	// The levels, for the load and its motion (see loadMotion) — and,
	// while the load moves and the period is over High, for the load the
	// last two intervals measured if it is higher (see risingLoad).
	served := lam
	if lam > 0 {
		served = lam + c.loadMotion()
		if r := c.risingLoad(); o.p >= cfg.High && r > served {
			served = r
			if e.k > 0 {
				w.rising = r // (without K the levels are not set for a load)
			}
		}
	}
	target := ceil
	switch {
	case e.k > 0 && lam > 0:
		lam := served
		target = c.solve(e.k/lam, ceil)
		// Brighten only as far as the load of the last two intervals
		// allows — a fall is taken once a second interval shows it, as a
		// rise is from one: a period served dim for a load that has gone
		// costs some optional content, one served bright for a load
		// still there costs answers. The tracker lets a load that jumped
		// go on moving, and one interval of a fall pulls its estimate
		// most of the way; the fall shows in two when the estimate before
		// the latest interval, or the rate the interval before it
		// measured, is as low. And only as far as the backlog waiting at
		// the gate, drained within a signal window, allows: a load that
		// fell after a spike does not brighten the levels while the
		// spike's queue still waits. (The backlog never dims: at a steady
		// load it is noise.)
		if up := max(lam, min(m.mdl.lamPrev, m.mdl.ratePrev)) + o.queued/win.Seconds(); target > b && up > lam {
			target = max(min(target, c.solve(e.k/up, ceil)), b)
		}
	case e.k > 0 && lam < 0 && now.Sub(m.mdl.loadAt) < win:
		// The load unknown this period, and known within a signal
		// window: nothing to set the levels for — they hold. (A source
		// that has not reported a load for longer gets the ceiling, as
		// without K: the law has no load to dim for.)
		target = b
	}
	if lam >= 0 {
		m.mdl.loadAt = now
	}
	w.budget = target

	if b < 0 {
		// Shedding: it stops once the floors fit the load, or it no
		// longer helps (under target, room at the gate).
		up := cfg.UnshedRate * dt
		switch {
		case target > 0:
			m.brightness, w.kind = 0, whyUnshedLoad
		case o.room:
			m.brightness, w.kind = min(b+up, 0), whyUnshedRoom
		case o.pc < 1:
			m.brightness, w.kind = min(b+up, 0), whyUnshed
		default:
			return c.cascadeModel(now, o, w)
		}
		m.overSince = time.Time{}
		return w
	}
	if target <= 0 && b <= 0 && o.p >= cfg.High {
		return c.cascadeModel(now, o, w)
	}
	m.overSince = time.Time{}
	// The ends are reached by any move: every feature on, or every one at
	// its floor, where the cascade starts.
	ends := (target >= ceil && b < ceil) || (target <= 0 && b > 0)
	small := math.Abs(target-b) < max(minMove, cfg.Quantum) && !ends
	// Within the estimates' noise the levels hold — but not from a dim
	// while the period is over High: the pressure then says the levels
	// are too bright, whatever the noise of the load's estimate (a period
	// served bright for a load still there costs answers).
	noise := !small && !ends && !(target < b && o.p >= cfg.High) && c.withinNoise(b, e.k, served, ceil)
	if small || noise {
		w.noise, w.levels = noise, b
		switch {
		case b >= 1:
			w.kind = whyFull
		case b >= ceil:
			w.kind = whyCapped
		default:
			w.kind, w.feature = whyHold, c.dimming(b)
		}
		return w
	}
	// The move teaches the priors' scale with the first period that
	// shows it (teach); a move made while one is still unseen extends
	// it — the all-off work is still tracked at the levels before both.
	if m.mdl.moveAt.IsZero() {
		m.mdl.moveAt, m.mdl.moveFrom, m.mdl.moveAllFrom = now, c.priorShare(b, true), c.priorShare(b, false)
		m.mdl.movePrior, m.mdl.moveT = m.mdl.moveAllFrom, m.mdl.moveFrom
		if m.mdl.lastOK {
			m.mdl.movePrior, m.mdl.moveT = m.mdl.lastPrior, m.mdl.lastPriorT
		}
	}
	m.brightness, m.mdl.levelsAt = target, now
	if m.mdl.probe {
		m.mdl.probeShare = c.probeShare(lam) // (see probeShare)
	}
	m.mdl.moveD = c.priorShare(target, true) - m.mdl.moveFrom
	m.mdl.moveAll = c.priorShare(target, false) - m.mdl.moveAllFrom
	if target < b {
		w.kind, w.feature = whyDim, c.dimming(b)
	} else {
		w.kind, w.feature = whyBrighten, c.dimming(target)
	}
	return w
}

// cascadeModel is the model law with every feature at its floor and the load still
// over K: after CascadeHold over CascadeAt at a full gate, the shed level
// rises with the pressure.
func (c *Controller) cascadeModel(now time.Time, o observation, w why) why {
	m := &c.mu
	cfg := &c.cfg
	b := m.brightness
	switch {
	case o.pc < cfg.CascadeAt || b <= -cfg.MaxShed:
		m.overSince = time.Time{}
		w.kind = whyFloor
		return w
	case !o.full:
		m.overSince = time.Time{}
		w.kind = whyFloorRoom
		return w
	}
	if m.overSince.IsZero() {
		m.overSince = now
	}
	if now.Sub(m.overSince) < cfg.CascadeHold {
		w.kind, w.held = whyFloor, now.Sub(m.overSince)
		return w
	}
	m.brightness = max(b-cfg.CascadeGain*(o.pc-cfg.Setpoint)*cfg.Tick.Seconds(), -cfg.MaxShed)
	w.kind = whyCascade
	return w
}

package dimmer

import (
	"math"
	"time"

	"github.com/brownout/brownout/signals"
)

// The law (docs/model.md has its equations and its figures in the lab). A request at brightness b costs
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
// tallies, behind a gate, the unit is the all-off request: w₀ = 1 and
// ĉᵢ = Costᵢ; without tallies or a gate, the window's mean latency stands
// for a request's work (see observe).
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
	// minMove is the smallest move of the brightness the law makes: the
	// noise that remains in the held estimates (a per cent or two of the
	// load and of a request's work) moves the brightness by up to three
	// times as much where the ladder is a third of a page.
	minMove = 0.05
	// freshSlack is the share of RecentSpan by which an interval of the
	// fleet may end early and still be a new one: pushes on a period
	// arrive with a jitter of a few per cent of it.
	freshSlack = 0.1
)

// modelState is the model law's part of the controller's state.
type modelState struct {
	capacity capacity // K and Ĉ (see capacity.go)
	load     tracker  // the offered load (see estimateLoad)
	base     tracker  // the all-off request's work, measured (see demand)
	regime   bool     // the load or the all-off work jumped this period
	overRun  int      // periods in a row over High
	standRun int      // periods in a row in which the gate said its queue stands
	// overSum is the pressure's excess over the target, underSum its
	// shortfall under Low, in bands between Low and High, each summed
	// while it stays above nothing (see correctK).
	overSum, underSum float64
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
	gated    bool      // the last period's source reported a gate (see Model)
	// The load's last two intervals, for brightening (see controlModel):
	// the load before the latest was folded in (the tracker's estimate,
	// or without one the last rate), the rate the one before it
	// measured, and the latest's rate; when the latest new interval
	// ended (Snapshot.RecentAt), to tell a new interval from one seen
	// again (see observe); and when the load was last known.
	lamPrev, ratePrev, rate float64
	// heldLast and heldPrev: the held-out interval's rate the levels
	// were set for during the latest interval and the one before it; 0
	// if none.
	heldLast, heldPrev float64
	// returns: the load's falls and returns (returns.go).
	returns returns
	// idleBack: the levels were set for a pause's return while idle
	// (idleModel), and go back to the ceiling if it does not come.
	idleBack bool
	// How the load moves beyond its noise (see loadMotion): motion is
	// the intervals' squared errors from the estimate over the variance
	// the tracker expected of them, averaged (1 for a load that holds),
	// and motionVar that variance, the latest; dispersion is the
	// arrivals' variance over a Poisson count's (see disperse).
	motion, motionVar, dispersion float64
	// between is the arrivals' dispersion between the load's jumps, for
	// the rise test (see disperseBetween): the latest interval's squared
	// second difference waits a period (betweenR, betweenOK) to show it
	// straddled no jump; betweenSkip: the next straddles one just found.
	between, betweenR      float64
	betweenOK, betweenSkip bool
	// trend predicts a load that moves (see trend.go), trendVar the
	// latest interval's variance it was given.
	trend    trend
	trendVar float64
	// trendAgain: sightings in a row of one interval, from a source
	// that does not say when its intervals end (see estimateLoad).
	trendAgain       int
	recentAt, loadAt time.Time
	// reach is, per feature, the share of the requests that evaluate it
	// (see reachOf): a feature's cost is a request's that renders it,
	// and what it adds to the load's work is cost × reach × level.
	// reachN and reachAll are the counts it is the ratio of, forgotten
	// over spreadMemory periods (reachN < 0: not measured, reach 1).
	reach, reachN []float64
	reachAll      float64
	// scale multiplies every prior (Feature.Cost): what the moves taught
	// of how wrong the configured costs are (see teach). 1 at first.
	// scaleVar is the variance of its logarithm (0: nothing taught yet,
	// scalePriorVar).
	scale, scaleVar float64
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
	// loadJumpAt is when the load's tracker last jumped or started (see
	// teach).
	loadJumpAt time.Time
	// baseFell: the all-off work's last jump was a fall measured from
	// the requests' own tallies (see correctK's staleWork).
	baseFell bool
	// levelsAt is when the levels last moved: a signal window that began
	// before it measures the levels before, and corrects nothing.
	levelsAt time.Time
	// blind: no load measured for a signal window, and K a request's
	// work (see controlModel's feedback only); lastLoad the load last
	// measured, which K is carried over by when the load goes (see
	// rebaseLoad), and lastLoadVar its variance.
	blind                 bool
	lastLoad, lastLoadVar float64
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
	o.standing = busyOK && s.Standing
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
	_, gated := s.Get(signals.GateLimit) // (a gate whose room signal is missing this period still queues)
	if len(o.tallies) == 0 && o.work.N == 0 && s.Window > 0 && !busyOK && !gated {
		// No per-request tallies, and no gate: the window's mean
		// latency stands for a request's work (nothing waits before
		// the work: the latency is its service time), as a tally of
		// the window's completions
		// would give it — their second moment an exponential's,
		// 2·mean². A period's worth of them (the window's periods
		// overlap: the next period's mean is mostly this one's, and
		// counting the whole window's completions each period would
		// make the trackers as sure of it as of that many independent
		// requests).
		//
		// Behind a gate the latency is no request's work: near the
		// capacity it is mostly the wait, at the gate and in the pool
		// behind it, which grows and drains with the queue — taken for
		// the work it moved the levels with the queue, and the queue
		// with the levels (the one-block lab, a source without
		// tallies, constant loads of 90–150 req/s: 13–55 turns in four
		// minutes, 90–99 % in time). There the gate's saturated
		// periods measure what the service does, in all-off requests
		// (the unit without tallies: w₀ = 1, ĉᵢ = Costᵢ), and the
		// pressure corrects it.
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
	// Counted over the period the reading measures where the source gives
	// the work of its every request (Snapshot.Work) and its counts
	// (Snapshot.Recent): a window's rates still hold the refusals of
	// seconds before, and a period served within capacity after them read
	// as saturated — its work, what the load brought, taken for what the
	// service can do (the lab's four-worker start read 2.7–3.2 s a second
	// for a service of 4; judged on the period's counts, 17 / 14 / 27 / 17
	// of the lab's 100 steps turn more than twice where 22 / 24 / 35 / 38
	// did). Else over the window: a feature's tally alone is the work of
	// the requests that evaluate it, not the period's (the reach lab's
	// hidden work, judged on the period's counts, fell to 0.41 of the
	// best fixed share).
	arrived, completed := o.load, o.rate
	if s.RecentSpan > 0 && s.Work.N > 0 {
		arrived, completed = float64(s.Recent.Arrived), float64(s.Recent.Completed)
	}
	o.saturated = busyOK && busy >= cfg.SaturatedAt && arrived > 0 && completed > 0 && arrived >= completed*(1+saturatedExcess)
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
	// standing: the gate says its queue stands (CoDel: its shortest
	// wait over the target for an interval).
	standing bool
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
// at capacity k, for the load lam whose estimate's variance is loadRel of
// its square — the tracker's, or the trend's prediction's while the
// levels are set for it (read at the tracker's, the band held the levels
// on the trend's noise after a swing had stopped, and they turned about
// five times as often) — then a move would follow noise. The band is the
// one a feature's levels move within as the demand varies: where the
// service has room at either end, it is narrow.
func (c *Controller) withinNoise(b, k, lam, loadRel, ceil float64) bool {
	m := &c.mu.mdl
	if k <= 0 || lam <= 0 || !m.load.ok || m.load.est <= 0 {
		return false
	}
	rel := loadRel
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

// overWindows is how many signal windows in a row the pressure must read
// over High for a period whose window began before the levels' last move
// to correct K: two, because one burst, however short, keeps a window's
// readings over High for as long as it stays in the window — a window —
// and only an overload that outlasts that is the levels' (see
// controlModel).
const overWindows = 2

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
	w := why{top: o.top, load: o.load, gateless: !o.gate}
	e := &m.mdl.capacity
	m.mdl.idleBack = false // (the levels are the law's again)
	lam, loadJumped := c.estimateLoad(o)
	if tr := &m.mdl.load; tr.held && lam > 0 {
		w.heldOutOK, w.heldOut = true, tr.heldX
	}
	if loadJumped {
		m.mdl.loadJumpAt = now
	}
	ahead, aheadVar, onTrend := c.loadAhead(now, lam, o)
	if lam > 0 {
		w.load = ahead // the reason gives the load the levels are set for
	}
	seconds, busy, busySE := c.demand(now, o)
	c.setProbe(now, lam)
	if seconds != e.seconds {
		c.convertUnit(seconds)
	}
	win := max(m.sigWindow, cfg.Tick)
	if busy <= 0 && o.rate > 0 {
		// No period's work measured (no tallies, or no per-period
		// counts): the completions' rate at a request's work now, with
		// the standard error of a count of them over the window the
		// source counted the rate in, where it says (Poisson:
		// √(rate/window) a second) — at a full gate. There a period's
		// completions are a queue's departures, and read as carried
		// within target they raised K by their noise: in the one-block
		// lab without tallies, K climbed to 0.95–0.97 of what the
		// service does, and a run turned up to 12 times in four
		// minutes (97.4–97.9 % in time). With room at the gate no
		// request waited for it: what the period completed is what it
		// was offered, carried within target — what the service does,
		// not an estimate of it — and it is what raises K again after
		// a dip of the capacity, which nothing else here measures (with
		// the error there too, the levels of the lab at 70 req/s were
		// still at 0–0.24 a minute and a half after a halving of the
		// capacity ended, where the search law was back at 0.76–1).
		busy = o.rate * m.mdl.mean
		if m.sigWindow > 0 && !o.room {
			busySE = m.mdl.mean * math.Sqrt(o.rate/m.sigWindow.Seconds())
		}
	}
	if busy <= 0 && lam > 0 {
		// No completions counted either: the load at the levels' work —
		// what the service carries when it keeps up, an upper bound
		// when it does not (the pressure then says so).
		busy, busySE = lam*c.work(b), 0
	}
	// Feedback only: no load measured for a signal window (a source that
	// gives the latency alone). K is then the work a request may take —
	// the law's equations at a nominal load of one request a second —
	// measured by nothing but the pressure: the cold overload's and the
	// corrections (no saturated reading: its work is not per request).
	blind := lam < 0 && now.Sub(m.mdl.loadAt) >= win
	if lam > 0 {
		// The load K is carried over by if it goes, and its variance:
		// the tracker's, or without one a Poisson count's over the
		// window the rate was counted in.
		m.mdl.lastLoad, m.mdl.lastLoadVar = lam, lam/win.Seconds()
		if m.mdl.load.ok && m.mdl.load.p > 0 {
			m.mdl.lastLoadVar = m.mdl.load.p
		}
	}
	if blind != m.mdl.blind {
		c.rebaseLoad(blind, lam)
	}
	lamK := lam
	if blind {
		lamK, busy, busySE = 1, c.work(b), 0
		o.saturated = false
	}

	m.mdl.gated = o.gate
	c.correctK(now, o, b, ceil, lamK, busy, busySE, blind)
	w.capacity, w.source, w.blind = e.k, e.src, blind

	// The levels, for the load ahead and its margin (see loadAhead,
	// loadMargin).
	served := lam
	span := 0.0
	if o.fresh {
		span = o.recentSpan.Seconds()
	}
	m.mdl.returns.observe(now, cfg.Tick, lam, loadJumped, o.recentLoad, span)
	if lam > 0 {
		served = ahead + c.loadMargin()
	}
	if from, back := m.mdl.returns.returned(); lam >= 0 && back && from > served {
		// The latest interval went back to the level the load fell
		// from, as the downs before went back (see returns.go): the
		// levels are set for it, though the tracker holds that interval
		// out.
		served, w.back, w.backNow = from, true, true
	}
	if from, back := m.mdl.returns.ahead(now, cfg.Tick); lam >= 0 && back && from > served {
		// A return to the level the load fell from is due (see
		// returns.go): the levels are set for it — after a pause too,
		// whose load of nothing would have them at the ceiling.
		served, w.back = from, true
	}
	if low, fell := m.mdl.returns.fell(); lam > 0 && fell && !w.back && !onTrend && max(low, o.recentLoad) < served {
		// The latest interval fell back to the low the load went up
		// from, at an age at which the ups before fell (see returns.go):
		// the levels are set for it — its own count, or the low if
		// higher — though the tracker holds it out, and the fall needs
		// no second interval to show it (below).
		served, w.fell = max(low, o.recentLoad), true
	}
	if o.fresh {
		// (The rise held out during the interval before the latest: the
		// brightening below waits for a second interval to show its
		// fall, however often the source is read in between.)
		m.mdl.heldPrev, m.mdl.heldLast = m.mdl.heldLast, 0
	}
	if tr := &m.mdl.load; lam > 0 && tr.held && tr.heldX > tr.est && tr.heldX > served {
		// The latest interval rose too far over the estimate to be
		// folded in before the next shows whether it holds (see
		// tracker): the estimate waits, the levels do not. A period
		// served bright for a load that has come costs answers; one
		// served dim for a burst that has gone, some optional content.
		// (Set for the estimate, the lab's one-worker square waves
		// served each such rise's first period at the levels of the
		// trough: 2.8 % of the users of a 10-s square of ±40 % late
		// on seed 1, 1.5 % set for it.) The levels come back only as a
		// fall does, once a second interval shows it (heldPrev, below),
		// and the move teaches the priors nothing: it answers the load
		// (see teach). Over a return the returns expect (above), the
		// interval's own count wins.
		served, w.heldRise, m.mdl.heldLast = tr.heldX, true, tr.heldX
		w.back, w.backNow = false, false
		m.mdl.loadJumpAt = now
	}
	target := ceil
	switch {
	case e.k > 0 && blind:
		target = c.solve(e.k, ceil)
	case e.k > 0 && served > 0:
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
		// load it is noise.) While shedding, a fall is taken as the
		// load's estimate shows it, not a period later: a period shed
		// for a load that has gone costs answers, where one served dim
		// for it costs some optional content. (Not from the latest
		// interval alone: one that misses
		// an instance of a fleet — a scrape that failed, an instance's
		// first push — reads low, and the tracker holds out a single
		// interval.) The backlog still waits.
		up := max(lam, min(max(m.mdl.lamPrev, m.mdl.heldPrev), m.mdl.ratePrev)) + o.queued/win.Seconds()
		if b < 0 || w.fell {
			up = lam + o.queued/win.Seconds()
		}
		if target > b && up > lam {
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
	if e.k <= 0 && b < target && o.p >= cfg.Low {
		// K unknown, the levels dimmed, and the targets not well met:
		// levels adopted from a checkpoint that held no capacity (an
		// earlier release's), or left by a cap that lifted before any
		// overload. They hold until an overload measures K (the cold
		// rule) or a period well within target lets them go to the
		// ceiling: taken there at once, an adopted dim under load was
		// undone in the first period after a replica took over.
		target = b
	}
	w.budget = target

	if b < 0 {
		// Shedding: it stops once the floors fit the load (see the
		// brightening's limit above), or it no longer helps (under
		// target, room at the gate).
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
	move := max(minMove, cfg.Quantum)
	if blind || !o.gate && !m.mdl.load.ok && !m.mdl.base.ok {
		// K from the pressure alone (see correctK), and no held
		// estimate whose noise would move the levels (no load, or one
		// read as the source gives it, and no work tallied): they
		// follow K's corrections, paced, in quanta.
		move = cfg.Quantum
	}
	small := math.Abs(target-b) < move && !ends
	// Within the estimates' noise the levels hold — but not from a dim
	// while the period is over High: the pressure then says the levels
	// are too bright, whatever the noise of the load's estimate (a period
	// served bright for a load still there costs answers). It is made
	// within a window after the load fell too, though that window's
	// pressure may still hold the load that has gone: a load that falls
	// and still overloads the service refuses at the levels the fall
	// brightened, and a dim held there lost users (docs/model.md, "Calm
	// through a step of the load"). Nor a move the trend's way (a dim on
	// a rise, a brightening on a fall) while the load more likely moves
	// on its trend than holds (the levels set for the trend's prediction,
	// trend.moving over one half): the band is the noise of a load that
	// holds around its estimate, and one that moves has left the levels
	// by the period they serve. A move against the trend is noise by the
	// trend's own account, and the band holds it. (Held within the
	// prediction's noise whichever way, the parts lab's one-worker
	// ten-second sines kept 0.9–1.7 points fewer of their users in time
	// on seeds 1–3; with the band off on a swing whichever way, slow
	// swings turned half as often again: docs/model.md, "A load that
	// moves".)
	g := m.mdl.trend.moving()
	slope := m.mdl.trend.slope()
	withTrend := onTrend && g > 1-g && (target < b && slope > 0 || target > b && slope < 0)
	noise := !small && !ends && !blind && !withTrend && !(target < b && o.p >= cfg.High) && c.withinNoise(b, e.k, served, aheadVar/max(ahead*ahead, math.SmallestNonzeroFloat64), ceil)
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

// idleModel is the model law in a period no request reached (idle): the
// levels hold — nobody is served them — but for the period a pause's
// return is due (returns.go), which is set for the level the load paused
// from, as controlModel sets the end of a low half: a pause longer than
// the signal window reads as idle by then, and its return would be served
// at the levels of no load, the ceiling.
func (c *Controller) idleModel(now time.Time) why {
	m := &c.mu
	e := &m.mdl.capacity
	b := m.brightness
	from, back := m.mdl.returns.ahead(now, c.cfg.Tick)
	ceil := c.ceiling()
	if !back && m.mdl.idleBack && b >= 0 && b < ceil {
		// The return it was set for did not come: the levels of no
		// load again, as controlModel sets them (held, they would serve
		// whatever load comes next, however light, dimmed).
		m.brightness, m.mdl.levelsAt, m.mdl.idleBack = ceil, now, false
		return why{kind: whyIdleUnback, feature: c.dimming(ceil)}
	}
	if !back || e.k <= 0 || m.mdl.blind || b < 0 {
		return why{kind: whyIdle}
	}
	target := c.solve(e.k/from, ceil)
	if target >= b-minMove {
		return why{kind: whyIdle}
	}
	m.brightness, m.mdl.levelsAt, m.mdl.idleBack = target, now, true
	return why{kind: whyIdleBack, capacity: e.k, source: e.src, budget: target, back: true, feature: c.dimming(b)}
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

// rebaseLoad carries K between its two units as the law goes blind (no
// load measured: K a request's work) or sees the load again (K work a
// second): divided or multiplied by the load, the last known one going
// blind and the one measured now coming back. Without such a load K is
// unknown again, and the next overload measures it.
func (c *Controller) rebaseLoad(blind bool, lam float64) {
	m := &c.mu.mdl
	e := &m.capacity
	m.blind = blind
	m.errSum, m.errN = 0, 0
	f := lam
	if !blind && m.load.ok && m.load.p > 0 {
		// A lower bound of the load that has come back (carriedZ
		// standard errors under its first estimate): one noisy
		// interval over the load would carry K over it, and the levels
		// would brighten for work the service does not carry.
		f = max(lam-carriedZ*math.Sqrt(m.load.p), lam/2)
	}
	if blind {
		// (By the load the law last measured, where it stands carriedZ
		// of its standard errors over nothing: a load that is mostly
		// noise, or a checkpoint's garbage, would make K a request's
		// work many times over what the service carries, and the
		// levels go to full brightness.)
		f = 0
		if m.lastLoad > carriedZ*math.Sqrt(max(m.lastLoadVar, 0)) {
			f = 1 / m.lastLoad
		}
	}
	if !(f > 0) || math.IsInf(f, 0) {
		*e = capacity{seconds: e.seconds}
		return
	}
	e.k, e.c, e.held = e.k*f, e.c*f, e.held*f
	e.beforeSum, e.beforeVar = e.beforeSum*f, e.beforeVar*f*f
}

// convertUnit carries K over to the unit of work the period measured in
// (seconds: seconds of service; else all-off requests) — tallies appeared
// or went, a gate appeared in front of a source without them (see
// observe), a checkpoint in the other unit was adopted. The all-off
// request's work converts them: the one K was found at (capacity.at)
// going to all-off requests, the one measured now coming to seconds.
// Without it, what K was measured in is no more, and K is unknown again.
func (c *Controller) convertUnit(seconds bool) {
	m := &c.mu.mdl
	e := &m.capacity
	f, at := 0.0, 1.0
	switch {
	case !seconds && e.at > 0:
		f = 1 / e.at
	case seconds && m.base.ok && m.base.est > 0:
		f, at = m.base.est, m.base.est
	}
	k, cc, held, grown := e.k*f, e.c*f, e.held*f, e.grown*f
	if !(f > 0) || e.k <= 0 || math.IsInf(k+cc+held+grown, 0) || math.IsNaN(k+cc+held+grown) {
		// (Nothing to convert, or no factor: an all-off work of a
		// checkpoint's 1e-300 s would make K infinite.)
		*e = capacity{seconds: seconds}
		return
	}
	e.k, e.c, e.held, e.grown = k, cc, held, grown
	e.at, e.seconds = at, seconds
	e.beforeSum, e.beforeVar = e.beforeSum*f, e.beforeVar*f*f
}

package dimmer

import (
	"math"
	"time"
)

// The offered load (the model law, model.go): a tracker of the periods'
// arrival rates (estimateLoad), their dispersion, the load's motion beyond
// its estimate (loadMotion), and while it moves the trend's prediction of
// the period the levels will serve (loadAhead, loadMargin; trend.go).

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
// brightening (lamPrev, ratePrev, rate), and reports whether the tracker
// jumped or started this period.
func (c *Controller) estimateLoad(o observation) (lam float64, jumped bool) {
	m := &c.mu
	if o.recentSpan <= 0 || o.recentLoad < 0 {
		m.mdl.load, m.mdl.trend = tracker{}, trend{}
		m.mdl.motion, m.mdl.motionVar, m.mdl.dispersion = 0, 0, 0 // (the load's motion is the tracker's errors)
		m.mdl.between, m.mdl.betweenOK, m.mdl.betweenSkip = 0, false, false
		if o.load >= 0 {
			m.mdl.lamPrev, m.mdl.ratePrev, m.mdl.rate = m.mdl.rate, m.mdl.rate, o.load
		}
		return o.load, false
	}
	last := m.mdl.rate // the interval before, for the trend (below)
	var r float64      // the new interval's squared second difference (see disperse)
	rOK := false
	preEst, preP := m.mdl.load.est, m.mdl.load.p
	if o.fresh {
		r, rOK = c.disperse(o.recentLoad, o.recentSpan.Seconds())
		prev := m.mdl.rate // after a period without counts the tracker starts afresh
		if m.mdl.load.ok {
			prev = m.mdl.load.est
		}
		m.mdl.lamPrev, m.mdl.ratePrev, m.mdl.rate = prev, m.mdl.rate, o.recentLoad
	}
	s := o.recentSpan.Seconds()
	v := max(m.mdl.load.est, o.recentLoad, 1/s) / s // a Poisson count's variance, as a rate
	f := c.sighting(&m.mdl.load, o, o.recentSpan)
	v *= f
	// A count over s seconds, read by the jump tests as a share 1/f of
	// it where a sighting may be a repeat (see sighting): as counted
	// over s/f (see tracker.rises).
	m.mdl.load.moves, m.mdl.load.span, m.mdl.load.disp = true, s/f, m.mdl.between
	fresh := o.fresh && m.mdl.load.ok
	e := o.recentLoad - m.mdl.load.est
	pred := v + m.mdl.load.p
	started := !m.mdl.load.ok
	jumped = m.mdl.load.update(o.recentLoad, v, fastWeight(m.sigWindow.Seconds()/c.cfg.Tick.Seconds()), o.fresh)
	if o.fresh {
		c.disperseBetween(r, rOK, jumped)
	}
	if jumped {
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
	if o.fresh {
		// The trend (trend.go), a step a new interval, with the
		// interval's own noise (not a sighting's share of it) as
		// dispersed as the arrivals are: restarted at a jump, and moved
		// on without a measurement past an interval the tracker holds
		// out — or, where the source does not say when its intervals
		// end, past a sighting that reads the interval before again (a
		// source read more often than it counts: four sightings of one
		// interval taken as four measurements of it made the trend's
		// misses look like noise, and its margin 0).
		m.mdl.trendVar = max(m.mdl.load.est, o.recentLoad, 1/s) / s * max(m.mdl.dispersion, 1)
		// (At most as many sightings in a row as a tick's share of the
		// interval allows: one more is a new interval of the same count,
		// or a source whose count froze, which the trend must measure,
		// not extrapolate past.)
		again := !o.timed && o.recentLoad == last && float64(m.mdl.trendAgain+1) < math.Ceil(c.repeats(o.recentSpan)-1e-9)
		if again {
			m.mdl.trendAgain++
		} else {
			m.mdl.trendAgain = 0
		}
		if jumped || !m.mdl.trend.ok {
			m.mdl.trend.restart(m.mdl.load.est, m.mdl.trendVar)
		} else {
			m.mdl.trend.update(o.recentLoad, m.mdl.trendVar, m.mdl.load.held || again, preEst, preP)
		}
	}
	// (The load's arrival — the tracker's first reading — is reported as
	// a jump too, from nothing: see teach.)
	return m.mdl.load.est, jumped || started && m.mdl.load.ok
}

// loadAhead is the load the levels are set for, from the load's estimate
// lam, and its variance: while the load moves (loadMotion) and the trend
// has predicted two intervals, the trend's prediction for the period the
// levels will serve — the next tick, whose middle is half a tick after
// now, and now is the last interval's age after its end and half its
// span after its middle — in the trend's steps: one a new interval, a
// tick or the interval's span, whichever is longer, where the source
// says when its intervals end (a daemon that ticks faster than its
// instances push sees one interval several times, one that ticks slower
// one in several), a tick where it does not (every sighting is a step;
// one that reads the interval before again is moved on without a
// measurement); else lam and the tracker's variance. ahead reports which.
func (c *Controller) loadAhead(now time.Time, lam float64, o observation) (load, variance float64, ahead bool) {
	m := &c.mu.mdl
	if lam <= 0 || !m.trend.ok || m.trend.n < 2 || o.recentSpan <= 0 || c.loadMotion() <= 0 {
		return lam, m.load.p, false
	}
	tick, span := c.cfg.Tick.Seconds(), o.recentSpan.Seconds()
	step, age := tick, 0.0
	if o.timed {
		// (An interval older than a step is one the source has not
		// followed: the trend is not carried past it — a fleet keeps its
		// instances' last interval for a while after they stop.)
		step = max(tick, span)
		age = min(max(now.Sub(o.recentAt).Seconds(), 0), step)
	}
	h := (span/2 + age + tick/2) / step
	// The trend's prediction and the tracker's level, by the chance that
	// the load moves on (trend.moving).
	g := m.trend.moving()
	x, v := m.trend.predict(h), m.trend.predictVar(h)
	d := x - lam
	return max(lam+g*d, 0), (1-g)*m.load.p + g*v + g*(1-g)*d*d, true
}

// loadMargin is how far over loadAhead the levels are set: while the load
// moves, how far the trend's predictions missed beyond the intervals'
// noise and the tracker's motion, by the chance that the load moves on the
// trend (the motion alone until the trend has predicted two intervals);
// else 0.
func (c *Controller) loadMargin() float64 {
	m := &c.mu.mdl
	mv := c.loadMotion()
	if mv <= 0 || !m.trend.ok || m.trend.n < 2 {
		return mv
	}
	g := m.trend.moving()
	return g*m.trend.margin(m.trendVar) + (1-g)*mv
}

// disperse folds a new interval's rate x, over span s seconds, into the
// arrivals' dispersion: how much more their counts vary than a Poisson
// count's — retries of refused requests in step, clients that send in
// bursts. The second difference of three intervals' rates, x − 2·x₁ + x₂,
// has six times an interval's variance and hardly any of a load that
// moves smoothly (a sine's curve over three intervals is a few requests
// a second): its square over six Poisson variances, averaged over
// spreadMemory intervals, is the dispersion. A second difference beyond
// jumpZ of it (a step) counts as jumpZ². It returns the interval's squared
// second difference over the Poisson variance (ok false: none), for
// disperseBetween.
func (c *Controller) disperse(x, s float64) (r float64, ok bool) {
	m := &c.mu.mdl
	if s <= 0 || !m.load.ok || m.rate <= 0 || m.ratePrev <= 0 {
		return 0, false
	}
	d2 := x - 2*m.rate + m.ratePrev
	r = d2 * d2 / (6 * max(m.load.est, 1/s) / s)
	if !(r >= 0) || math.IsInf(r, 0) {
		return 0, false
	}
	foldDispersion(&m.dispersion, r)
	return r, true
}

// foldDispersion folds r, an interval's squared second difference over
// its Poisson variance, into the dispersion *d: a mean over spreadMemory
// intervals (1 to start with), r capped at jumpZ² of it.
func foldDispersion(d *float64, r float64) {
	if *d == 0 {
		*d = 1
	}
	*d += fastWeight(spreadMemory) * (min(r, jumpZ*jumpZ*max(*d, 1)) - *d)
}

// disperseBetween folds the intervals' squared second differences (r of
// the latest, from disperse; ok false: none) into the arrivals'
// dispersion between the load's jumps, which the rise test reads the
// counts with (tracker.rises). The dispersion counts a step's second
// differences as noise, which the load's motion wants (a square wave
// does not move smoothly), but a rise test must not: after five minutes
// of a square wave of Poisson arrivals every ten seconds it reads 4.4 at
// one worker and 13.8 at four, and a rise test read with it (at jumpZ
// of it, at least twice Poisson's) missed the rises (the one-worker
// square kept 2.4 points fewer of its users in time, the four-worker one
// 7.3). Here a second difference waits a period, and is left out if the
// tracker jumped in either (the step came before this interval or the
// one before it), as is the next; and one of a period in which the
// tracker takes the level more likely to move than to hold is the
// move's: on a repeating square the moving filter follows many steps
// without a jump (of 50 ↔ 100 req/s every five seconds, a quarter of the
// second differences counted straddled a step, and made two thirds of
// the sum), and the one-worker ten-second square then kept 1.9 points
// fewer of its users in time. Where the arrivals are dispersed and the
// tracker's jumps false ones, leaving out theirs biases it low: the rise
// test allows for that (riseZ).
func (c *Controller) disperseBetween(r float64, ok, jumped bool) {
	m := &c.mu.mdl
	if m.load.mu > 1-m.load.mu {
		ok = false // (the level more likely moving: see above)
	}
	switch {
	case jumped:
		m.betweenOK, m.betweenSkip = false, true
		return
	case m.betweenOK:
		foldDispersion(&m.between, m.betweenR)
	}
	m.betweenR, m.betweenOK = r, ok && !m.betweenSkip
	m.betweenSkip = false
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
// It says whether the load moves. While it does, the levels are set for
// the trend's prediction of the period they will serve, and its margin
// (loadAhead, loadMargin: trend.go) — this far over the estimate before
// the trend has predicted two periods; a load that holds, or that jumped
// once and holds (the tracker restarts at a jump, and the jump is no
// motion), is served for its estimate. At constant loads, through the
// step and on square waves nothing moves.
func (c *Controller) loadMotion() float64 {
	m := &c.mu.mdl
	over := m.motion - 1 - motionZ*motionSE
	if over <= 0 {
		return 0
	}
	return math.Sqrt(over * m.motionVar)
}

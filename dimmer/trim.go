package dimmer

import (
	"math"
	"time"
)

// The trim: the law's slow path while dimmed (see law.go for the fast
// paths). Each period adds evidence about the level to an account (see
// weigh); at ±need the level steps down or up. It has two phases.
//
// Landing. For settleFor after a fresh start (a fast move, the start of an
// episode) the trim looks for the level the load allows: steps start at
// two quanta and double while they go the same way, up to a span that
// each reversal halves (from MaxStep down to a quantum), and each reversal
// doubles the evidence the next step needs (Kesten's rule for stochastic
// approximation). A step up that proves over goes back near the last good
// level; steps up bisect toward the last level that was over and pass it
// a quantum at a time (the memory CUBIC keeps of its last window).
//
// Settled. Then the level is where the evidence of the landing put it,
// and what the signals say about it from there on is mostly noise: in the
// lab, the best in-time share is within ±0.1 of the level the landing
// finds, and a minute more of evidence narrows that only to ±0.05 —
// moving on it would swing a feature more than it gains. So a settled
// trim moves a quantum at a time, and each step waits longer before the
// next (holdFirst, doubling up to holdMax): probes back off. A regime move
// (a run far from target) needs twice the run; an average pressure over
// overMean for overSpan steps down overStep quanta at once (a level that
// is clearly over, not noise). A load that drifts 0.4·LoadMargin from
// where the trim settled, or a scheduled cap that held the level and
// lifts, unsettles it for another settleFor of landing steps, so that a
// slowly changing load is still followed.
//
// For a signal window after each step the signals still describe the
// level before it, and only readings against the step count (over target
// after a step up, under Low after a step down), from contraSettle of the
// window on: the level before was on the other side, so they are the new
// level's. They are evidence about the level, not a change of regime.

// heavySettle is the share of a signal window the trim waits after a fast
// fall before its first step when the signals are still far over (over
// 4×farOver): they then describe a level that is over by a wide margin,
// not the one before.
const heavySettle = 0.3

// contraSettle is the share of a signal window after a trim step from
// which evidence against the step counts: over target after a step up, or
// under Low after a step down. The rest of the window still describes the
// level before the step, which was on the other side; readings that are
// already against the step are not its leftovers but the new level's.
const contraSettle = 0.4

// badMemory is how long the trim remembers a level that was over.
const badMemory = 2 * time.Minute

// maxBackoff caps the trim's backoff: each reversal doubles the evidence
// the next step needs, up to 2^maxBackoff times.
const maxBackoff = 3

// backShare is where a probe up that proved over goes back to, as a share
// of the probe above the last good level: a third. The probe failing says
// the level before it was good; it says less about the quanta just above
// it, and going all the way back made the landing settle low.
const backShare = 1.0 / 3

// The settled trim. Times are at least the given number of signal windows
// (a 30 s PromQL range settles later than a 5 s window).
const (
	settleFor      = 45 * time.Second // landing, after a fresh start…
	settleWindows  = 9                // …or this many signal windows
	holdFirst      = 10 * time.Second // a settled step's first wait…
	holdFirstWins  = 2
	holdMax        = 60 * time.Second // …doubling with each step, up to this
	holdMaxWins    = 12
	settledRegime  = 2    // a settled regime move needs this many times the run
	heavyOver      = 16.0 // …except a run this far over target (8·farOver)
	overSpan       = 30 * time.Second
	overMean       = 2.2 // mean of min(p, overCap) over overSpan that steps down at once
	overCap        = 5.0
	overStep       = 2   // quanta
	driftShare     = 0.4 // of LoadMargin: a load drift that ends the settled phase
	slowLoadWindow = 30 * time.Second
)

// window returns d, or n signal windows when that is longer.
func (m *controllerState) window(d time.Duration, n int) time.Duration {
	return max(d, time.Duration(n)*m.sigWindow)
}

// trim is the law's slow path while dimmed: evidence, then a step.
func (c *Controller) trim(now time.Time, p, b, ceil float64, fallen, headroom bool, w why) why {
	m := &c.mu
	cfg := &c.cfg
	w.kind, w.feature = whyTrimHold, c.dimming(b)
	if m.landAt.IsZero() {
		m.land(now) // dimmed without a fast move (the cascade under a cap at 0)
	}
	w.settled = m.landed(now)
	m.peak = max(m.peak, p)
	if p < 1 && m.lastDir == 0 {
		m.dipped = true
	}
	if !c.evidence(now, p, headroom) {
		return w
	}
	if fallen && p < cfg.High {
		return w // the load fell: brightening at full speed after Hold
	}
	q := cfg.Quantum
	need := c.need()
	settled := c.settled(now)
	w.settled = settled
	// A run of 2·Evidence settled periods far from target one way is no
	// noise at the level the trim settled on: conditions changed (the
	// capacity dipped or came back, the load moved within the margin).
	// The trim starts afresh with a fast move. Settled, the run must be
	// twice as long, unless it returns to a level a regime fall left or
	// the pressure is heavy: at a level held for minutes, a lull or a
	// burst of refusals that long still happens now and then.
	// A level a regime fall left is a guide back, unless the load rose
	// past the margin since it was held.
	rose := m.loadMark > m.priorMark*(1+cfg.LoadMargin)
	guide := m.prior > b+q/2 && !rose
	up, down := c.regimeRuns(settled, guide, p)
	// With a guide, a run under Low whose mean is far under will do: that
	// level is known good, and at the floor the readings of a capacity
	// that came back straddle Low/2.
	calm := float64(m.calmRun) >= up
	back := guide && float64(m.underRun) >= up && m.underSum < float64(m.underRun)*cfg.Low/2
	if (calm || back) && b < ceil {
		// Back to the level a regime fall left (the capacity that
		// dipped came back); without one, a span, and the trim's steps
		// double from there. A calm run is also what a lull in a steady
		// load looks like: a jump to anywhere else would be a guess.
		// The level before is no good level to go back to.
		w.run, w.onMean = c.runTime(up), !calm
		m.forget(now, -1)
		m.lastDir = 1
		step := m.span
		w.kind = whyRegimeUp
		if guide {
			step, w.kind = m.prior-b, whyRegimeBack
		}
		m.brightness = min(b+step, ceil)
		m.upStep = m.brightness - b
		if m.brightness >= m.prior || rose {
			m.prior = 0 // reached, or held at a lower load: no guide
		}
		w.feature = c.dimming(m.brightness)
		return w
	} else if float64(m.hotRun) >= down && b > 0 {
		w.run = c.runTime(down)
		if b > m.prior {
			m.prior, m.priorMark = b, m.loadMark
		}
		m.forget(now, b)
		fall := max(fallMin, fallPerDoubling*math.Log2(p/farOver))
		m.brightness = max(b-fall, 0)
		w.kind, w.feature = whyRegimeDown, c.dimming(b)
		return w
	}
	if settled && now.Sub(m.movedAt) >= m.sigWindow {
		if mean, full := m.overAverage(p); full && mean >= overMean && b > 0 {
			// Over target on average for overSpan: the level is clearly
			// over, whatever the wait says.
			m.brightness = max(b-overStep*q, 0)
			m.movedAt, m.acc, m.lastDir = now, 0, -1
			m.downStep = b - m.brightness
			m.clearOver()
			w.kind, w.feature = whyTrimOver, c.dimming(b)
			return w
		}
	}
	if settled && now.Sub(m.movedAt) < m.holdWait {
		w.kind, w.held = whyTrimWait, m.holdWait-now.Sub(m.movedAt)
		return w
	}
	switch {
	case m.acc >= need && b <= 0, m.acc <= -need && b >= ceil:
		// Nowhere to go (the floor; the ceiling of a scheduled cap):
		// hold, the account full.
		return w
	case m.acc >= need:
		// This level is over: remember it. Above the last good level
		// (a step up that failed) go back near there; at or under it,
		// conditions changed: step down.
		m.acc, m.bad, m.badAt = 0, b, now
		var nb float64
		if m.good >= 0 && b > m.good+q/2 {
			nb = m.good
			if b-m.good > 3.5*q { // four quanta or more
				nb = math.Round((m.good+backShare*(b-m.good))/q) * q
			}
			m.downStep = q // a step down after this one is 2 quanta
			w.kind = whyTrimBack
		} else {
			w.kind = whyTrimDown
			switch {
			case m.lastDir == 0 && p >= 2*farOver && !m.dipped:
				// The first step after a fast fall, far over: the
				// signals now describe the level it fell to, and how
				// far over they are says how far it is from enough.
				// Right after a fall they over-state it while the
				// admission gate's adaptive limit grows back, and the
				// pressure comes down from its peak; one still at its
				// peak says the fall fell short of a deep overload:
				// twice the step. Pressure that went under target
				// since the fall says the level was enough at times:
				// what is over now is a burst, or the gate's
				// warm-up, and the first step is the ordinary one.
				m.downStep = m.span * math.Log2(p/farOver)
				if p >= m.peak {
					m.downStep *= 2
				}
			default:
				switch {
				case m.lastDir < 0:
					m.downStep = min(2*m.downStep, m.span)
				case m.lastDir == 0:
					m.downStep = m.span
				default:
					m.downStep = min(2*q, m.span)
				}
				// Without a good level below, halve the distance to 0
				// at most: a descent slows as it nears the floor.
				m.downStep = min(m.downStep, max(b/2, q))
			}
			nb = max(b-m.downStep, 0)
			m.good = -1
		}
		if settled {
			nb = max(nb, b-q)
			m.downStep = b - nb
			m.backOff()
		}
		m.turn(-1)
		m.movedAt = now
		m.brightness = nb
	case m.acc <= -need:
		// This level is good. Step up: quickly while far under the last
		// level that was over, a quantum at a time near it.
		m.acc, m.good = 0, b
		switch {
		case m.bad >= 0 && now.Sub(m.badAt) >= badMemory:
			m.bad = -1 // long ago: conditions may have changed
		case m.bad >= 0 && b >= m.bad-q/2:
			// At the level that was over, and it holds: pass it a
			// quantum at a time.
			m.bad = b + 2*q
		}
		switch {
		case b < m.maxStep/2 && (m.lastDir != 0 || b < m.span):
			// Near the floor (under half of MaxStep): a quantum at a
			// time — additive increase, so that a step that fails there
			// is no change of direction. The load that dims this far
			// leaves little to gain.
			m.upStep = q
		case m.lastDir > 0:
			m.upStep = min(2*m.upStep, m.span)
		case m.lastDir == 0 && b < m.span:
			// The first step after a fall that went under a span: that
			// was a heavy overload, and a step from there that failed
			// would be a change of direction. A quantum, then double.
			m.upStep = q
		case m.lastDir == 0 && m.bad >= 0:
			m.upStep = m.span // the first step after a fall
		default:
			m.upStep = min(2*q, m.span)
		}
		m.turn(1)
		st := m.upStep
		if m.bad >= 0 {
			st = max(min(st, (m.bad-b)/2), q)
		}
		if settled {
			st = q
			m.upStep = q
			m.backOff()
		}
		m.brightness = min(b+st, ceil)
		if m.brightness >= m.prior {
			m.prior = 0 // climbed back on its own
		}
		m.movedAt = now
		w.kind = whyTrimUp
	default:
		return w
	}
	m.clearOver() // the average is of this level's readings
	w.feature = c.dimming(max(m.brightness, b))
	return w
}

// regimeRuns returns how many settled periods in a row far under and far
// over target make a regime move: 2·Evidence seconds' worth, twice that
// once the trim has settled — unless the move up would return to a level a
// regime fall left (guide), or the pressure p is heavy.
func (c *Controller) regimeRuns(settled, guide bool, p float64) (up, down float64) {
	cfg := &c.cfg
	regime := 2 * cfg.Evidence / cfg.Tick.Seconds()
	up, down = regime, regime
	if settled {
		if !guide {
			up *= settledRegime
		}
		if p < heavyOver {
			down *= settledRegime
		}
	}
	return up, down
}

// runTime is how long a run of n periods lasts.
func (c *Controller) runTime(n float64) time.Duration {
	return time.Duration(math.Ceil(n)) * c.cfg.Tick
}

// backOff doubles the wait before the settled trim's next step, up to
// holdMax: each step holds little more than the last.
func (m *controllerState) backOff() {
	m.holdWait = min(2*m.holdWait, m.window(holdMax, holdMaxWins))
}

// settled reports whether the trim has landed: settleFor (or
// settleWindows signal windows) since its last fresh start. A settled
// trim whose load drifted driftShare·LoadMargin from where it settled
// lands afresh.
func (c *Controller) settled(now time.Time) bool {
	m := &c.mu
	if !m.landed(now) {
		return false
	}
	if m.slowLoad <= 0 {
		return true // no load signal: nothing to drift
	}
	if m.holdLoad <= 0 {
		m.holdLoad = m.slowLoad
		return true
	}
	if math.Abs(m.slowLoad/m.holdLoad-1) > driftShare*c.cfg.LoadMargin {
		m.land(now)
		return false
	}
	return true
}

// landed reports whether settleFor (or settleWindows signal windows) has
// passed since the trim's last fresh start.
func (m *controllerState) landed(now time.Time) bool {
	return now.Sub(m.landAt) >= m.window(settleFor, settleWindows)
}

// trackLoad follows the offered load with an EWMA over slowLoadWindow, for
// the settled trim's drift (see settled).
// Since the last fast move it is a plain mean until it has slowLoadWindow
// of readings, so that a load that stepped up before the move (a fall's
// cause) is not caught up with later, as a drift.
func (c *Controller) trackLoad(load float64) {
	m := &c.mu
	if load < 0 {
		return
	}
	m.slowN++
	m.slowLoad += (load - m.slowLoad) * max(c.cfg.Tick.Seconds()/slowLoadWindow.Seconds(), 1/float64(m.slowN))
}

// overAverage adds a settled period's pressure to the ring of the last
// overSpan and returns its mean, and whether the ring is full.
func (m *controllerState) overAverage(p float64) (float64, bool) {
	r := m.overRing
	v := min(p, overCap)
	if m.overN == len(r) {
		m.overSum -= r[m.overPos]
	} else {
		m.overN++
	}
	r[m.overPos] = v
	m.overSum += v
	m.overPos = (m.overPos + 1) % len(r)
	return m.overSum / float64(m.overN), m.overN == len(r)
}

// clearOver empties the ring of overAverage.
func (m *controllerState) clearOver() {
	m.overN, m.overPos, m.overSum = 0, 0, 0
}

// land starts the trim's landing afresh: settleFor of landing steps. The
// trim's span, backoff and direction stay (forget resets those).
func (m *controllerState) land(now time.Time) {
	m.landAt, m.holdLoad = now, 0
	m.holdWait = m.window(holdFirst, holdFirstWins)
	m.clearOver()
}

// need is the evidence the trim's next step needs: Evidence, doubled by
// each reversal in a row (see turn).
func (c *Controller) need() float64 {
	return c.cfg.Evidence * float64(int(1)<<c.mu.fails)
}

// evidence adds this period's evidence about the level to the trim's
// account (see weigh). For a signal window after a step the signals still
// describe the level before it: only readings against the step count, from
// contraSettle of the window on (see contrary). It reports whether the
// period counted.
func (c *Controller) evidence(now time.Time, p float64, headroom bool) bool {
	m := &c.mu
	settle := m.sigWindow
	if m.lastDir == 0 && p >= 4*farOver {
		settle = time.Duration(heavySettle * float64(settle))
	}
	since := now.Sub(m.movedAt)
	settled := since >= settle
	if !settled && (since < time.Duration(contraSettle*float64(m.sigWindow)) || !c.contrary(p)) {
		return false
	}
	c.weigh(p, headroom, 1)
	if !settled {
		// Against the step, but the window still holds the level
		// before it: evidence about this level, not a change of regime.
		return true
	}
	cfg := &c.cfg
	if p < cfg.Low/2 || p < cfg.Low && headroom {
		m.calmRun++
	} else {
		m.calmRun = 0
	}
	if p < cfg.Low {
		m.underRun++
		m.underSum += p
	} else {
		m.underRun, m.underSum = 0, 0
	}
	if p >= 2*farOver {
		m.hotRun++
	} else {
		m.hotRun = 0
	}
	return true
}

// contrary reports whether pressure p is evidence against the trim's last
// step: over target after a step up; under Low after a step down, unless
// near the floor (under half of MaxStep), where a load that dims this far
// leaves little to gain from a quick step back up and much to lose.
func (c *Controller) contrary(p float64) bool {
	m := &c.mu
	return m.lastDir > 0 && p >= 1 || m.lastDir < 0 && p < c.cfg.Low && m.brightness >= m.maxStep/2
}

// weigh adds one period's evidence to the account, per second of Tick:
// over target 2 (at full brightness and at the floor 2·log₂ of the
// pressure, so that a heavy overload counts for more), over High 1, under
// Low −1, under Low/2 (or under Low with headroom at the gate) −2. The
// account stays within [−clamp·need, need], so that a long calm stretch
// does not take as long to undo.
func (c *Controller) weigh(p float64, headroom bool, clamp float64) {
	m, cfg := &c.mu, &c.cfg
	prev := m.acc
	// Evidence is counted per second of Tick: a period of 100 ms reads
	// nearly the same windowed signals as the one before it.
	dt := cfg.Tick.Seconds()
	switch {
	case p >= 1 && (!m.dimmed || m.brightness < 2*cfg.Quantum):
		m.acc += 2 * max(1, math.Log2(p)) * dt
	case p >= 1:
		m.acc += 2 * dt
	case p >= cfg.High:
		m.acc += dt
	case p < cfg.Low/2 || p < cfg.Low && headroom:
		m.acc -= 2 * dt
	case p < cfg.Low:
		m.acc -= dt
	}
	n := c.need()
	lo := -clamp * n
	if prev < lo {
		// Below the clamp (an episode's end): relax toward it.
		lo = min(prev+coolRelax*dt, lo)
	}
	m.acc = min(max(m.acc, lo), n)
}

// turn records a trim step in direction dir. A reversal halves the span
// (down to a quantum) and doubles the evidence the next step needs (up to
// 2^maxBackoff times); a step the same way as the last halves that again.
func (m *controllerState) turn(dir int) {
	switch {
	case m.lastDir != 0 && m.lastDir != dir:
		m.fails = min(m.fails+1, maxBackoff)
		m.span = max(m.span/2, m.q)
	case m.lastDir == dir:
		m.fails = max(m.fails-1, 0)
	}
	m.lastDir = dir
}

// forget resets the trim after a fast move; bad is the level the move
// started from when it was a fall (−1 otherwise). The trim lands afresh.
func (m *controllerState) forget(now time.Time, bad float64) {
	m.acc, m.lastDir, m.good, m.bad, m.badAt, m.fails = 0, 0, -1, bad, now, 0
	m.peak, m.dipped = 0, false
	m.span = m.maxStep
	m.movedAt = now
	m.calmRun, m.hotRun = 0, 0
	m.underRun, m.underSum = 0, 0
	m.slowLoad, m.slowN = 0, 0
	m.land(now)
}

package dimmer

import (
	"math"
	"time"

	"github.com/brownout/brownout/signals"
)

// The law. Brightness b runs from 1 (every feature on) down to 0 (every
// feature at its floor) and below 0 into the cascade (shedding). One period
// of the law (control) is a pure function of the controller's state, now
// and the snapshot's pressure; it moves b by one of three paths:
//
//   - Fast. A confirmed overload from full brightness, a load that rose
//     while dimmed or latency over CascadeAt dims at once, by a step that
//     grows with how far over the signals are (a refusal ratio 20 times
//     its target is a heavy overload; one 1.5 times is not). A load that
//     fell below the load mark brightens at MaxRise.
//   - Trim. While dimmed, each period adds evidence for "this level is
//     over" or "this level is good" (see evidence); at ±need the level
//     steps down or up. Steps start at two quanta and double while they go
//     the same way, up to a span that each reversal halves (from MaxStep
//     down to a quantum), and each reversal doubles the evidence the next
//     step needs (Kesten's rule for stochastic approximation: near the
//     level the load allows, the noise would otherwise walk it). A step up
//     that proves over goes back to the last good level; steps up bisect
//     toward the last level that was over and pass it a quantum at a time
//     (the memory CUBIC keeps of its last window). For a signal window
//     after a step the signals still describe the level before it, and
//     only readings against the step count (over target after a step
//     up, under Low after a step down), from 0.4 of the window on: the
//     level before was on the other side, so they are the new level's.
//     They are evidence about the level, not a change of regime.
//   - Cascade. With every feature at its floor and latency over CascadeAt
//     at a full gate, b goes below 0 (see Config.CascadeAt).

// fallMin is the smallest cap on a fast dimming step, in brightness per
// second; the cap grows by fallPerDoubling for each doubling of the
// pressure over farOver. A signal 1.5 times its target says there is an
// overload, one 20 times its target how deep it is.
const (
	fallMin         = 0.2
	fallPerDoubling = 0.25
	farOver         = 2.0
)

// fullClamp bounds the evidence against an overload kept at full
// brightness, in units of need: a service that has been calm for a while
// needs more than a burst to dim (a heavy overload still dims within 2–4
// periods). coolClamp is where an episode leaves the account: after an
// overload the admission gate's adaptive limit is still growing back, and
// the refusals of that warm-up are no new overload; it relaxes back to
// fullClamp at coolRelax a second (40 s).
const (
	fullClamp = 4
	coolClamp = 8
	coolRelax = 0.5 // per second, from coolClamp back to fullClamp
)

// overloadAt is a pressure that confirms an overload at full brightness
// in one period, whatever the account holds: a refusal ratio of 24 %
// against a 1 % target is no burst (the first second of a flash sale at
// 2.5 times the capacity reads 34 %).
const overloadAt = 12 * farOver

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

// markWeight is the weight of the newest load in the load mark's EWMA.
const markWeight = 0.3

// pressure reads the targets from s into the readings and returns the
// largest pressure, and the largest over the targets that may drive the
// cascade. A snapshot older than StaleAfter periods counts as no snapshot.
// With room at the gate, DimOnly targets are read but not counted (their
// refusals are an overload that is over).
func (c *Controller) pressure(now time.Time, s signals.Snapshot, room bool) (p, cascade float64, ok bool, top int) {
	old := !s.Time.IsZero() && now.Sub(s.Time) >= time.Duration(c.cfg.StaleAfter)*c.cfg.Tick
	discounted := -1
	defer func() {
		if !ok && discounted >= 0 {
			// Every signal present was discounted: measured, and calm.
			p, ok, top = 0, true, discounted
		}
	}()
	for i, t := range c.cfg.Targets {
		v, present := s.Get(t.Signal)
		present = present && !old
		c.mu.readings[i] = Reading{Signal: t.Signal, Value: v, Target: t.Target, Missing: !present}
		if !present {
			continue
		}
		pr := v / t.Target
		c.mu.readings[i].Pressure = pr
		if room && t.DimOnly {
			c.mu.readings[i].Discounted = true
			discounted = i
			continue
		}
		if !ok || pr > p {
			p, ok, top = pr, true, i
		}
		if !t.DimOnly {
			cascade = max(cascade, pr)
		}
	}
	return p, cascade, ok, top
}

// control applies the law for one period: p is the pressure, pc the
// pressure of the targets that may drive the cascade, load the offered
// load (negative when unknown); room and saturated say whether the
// admission gate has room and whether it is full, headroom whether it
// would take twice the work in flight.
func (c *Controller) control(now time.Time, p, pc float64, top int, load float64, room, saturated, headroom bool) why {
	m := &c.mu
	cfg := &c.cfg
	dt := cfg.Tick.Seconds()
	e := p - cfg.Setpoint
	rise := e - m.prevErr
	m.prevErr = e
	ceil := c.ceiling()
	if m.brightness > ceil {
		// A scheduled cap holds the levels down: the integrator tracks
		// what is published instead of winding up above it, so that
		// dimming acts at once and the end of the window brightens
		// from the cap at the law's pace. From full brightness the
		// cap is no dimming of the law's: its episode is over.
		if m.brightness >= 1 {
			m.dimmed, m.loadMark, m.prior = false, 0, 0
		}
		m.brightness = ceil
		m.movedAt = now // the signals describe the level before the cap
	}
	b := m.brightness
	// Against the mark as it was: updated first, it would chase a rise
	// and hide one under LoadMargin·(1/markWeight).
	loadUp := m.loadMark > 0 && load >= 0 && load > m.loadMark*(1+cfg.LoadMargin)
	fallen := m.loadMark > 0 && load >= 0 && load < m.loadMark*(1-cfg.LoadMargin)
	if b < 1 && m.dimmed && load >= 0 && load >= m.loadMark*(1-cfg.LoadMargin) {
		// Dimmed, and the load has not dropped: follow it with an EWMA
		// (weight markWeight). An average, not a maximum: a windowed rate
		// is noisy, and a mark inflated by noise would make ordinary load
		// look like a drop. Once the load drops below the margin the mark
		// stays, so that the drop is seen.
		if m.loadMark == 0 {
			m.loadMark = load
		}
		m.loadMark += markWeight * (load - m.loadMark)
	}
	w := why{top: top, load: load, mark: m.loadMark}

	if b < 0 {
		// Shedding. It stops as soon as it no longer helps: at once when
		// the load that forced it has gone, quickly when latency is back
		// under target or the gate has room (then latency over target is
		// the app's own service time, which refusing does not lower).
		up, unwind := cfg.UnshedRate*dt, true
		switch {
		case load >= 0 && m.loadMark > 0 && load < m.loadMark*(1-cfg.LoadMargin):
			m.brightness, w.kind = 0, whyUnshedLoad
		case room:
			m.brightness, w.kind = min(b+up, 0), whyUnshedRoom
		case pc < 1:
			m.brightness, w.kind = min(b+up, 0), whyUnshed
		default:
			unwind = false
		}
		if unwind {
			m.overSince, m.underSince = time.Time{}, time.Time{}
			return w
		}
	}

	if p < cfg.Low {
		if m.underSince.IsZero() {
			m.underSince = now
		}
	} else {
		m.underSince = time.Time{}
	}
	if fallen && p < cfg.High {
		if m.belowSince.IsZero() {
			m.belowSince = now
		}
	} else {
		m.belowSince = time.Time{}
	}
	calm := p < cfg.Low && now.Sub(m.underSince) >= cfg.Hold
	if fallen {
		// The load that caused the dimming has gone: brighten unless
		// over High, held for Hold.
		calm = p < cfg.High && now.Sub(m.belowSince) >= cfg.Hold
	}
	confirmed := false
	if !m.dimmed {
		// At full brightness the account weighs evidence of an
		// overload: a burst of refusals at a load the service carries
		// (a few periods a little over) is none; a heavy overload shows
		// within a period or two.
		c.weigh(p, headroom, fullClamp)
		confirmed = m.acc >= c.need() || pc >= cfg.CascadeAt || p >= overloadAt
	}
	if m.dimmed && b >= 1 {
		// Back at full brightness (the trim got there): the episode is
		// over, whatever the load.
		c.endEpisode(now)
	}
	switch {
	case p >= cfg.High && (b <= 0 || confirmed || m.dimmed && (loadUp || pc >= cfg.CascadeAt)):
		if b > 0 {
			// Fast: a step that grows with the pressure.
			fall := max(fallMin, fallPerDoubling*math.Log2(p/farOver))
			step := max(min(cfg.DownGain*e*dt+cfg.Proportional*max(rise, 0), fall*dt), 0)
			w.kind, w.feature = whyDim, c.dimming(b)
			m.brightness = max(b-step, 0) // the floor stops the features
			m.overSince = time.Time{}
			m.dimmed = true
			if loadUp {
				m.prior = 0 // a level held at a lower load is no guide
			}
			m.forget(now, b)
			return w
		}
		if b == 0 {
			// Over at the floor is evidence against the next probe up.
			c.evidence(now, p, headroom)
		}
		// Every feature at its floor: the cascade, only when pressure
		// stays over CascadeAt and the gate is full.
		if pc < cfg.CascadeAt || b <= -cfg.MaxShed {
			m.overSince = time.Time{}
			w.kind = whyFloor
			return w
		}
		if !saturated {
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
		m.brightness = max(b-cfg.CascadeGain*(pc-cfg.Setpoint)*dt, -cfg.MaxShed)
		m.dimmed = true
		w.kind = whyCascade
		return w
	case calm && (!m.dimmed || fallen):
		m.overSince = time.Time{}
		w.held = now.Sub(m.underSince)
		if b >= ceil {
			if ceil < 1 {
				w.kind = whyCapped // the law would brighten; a scheduled cap holds it
				return w
			}
			if m.dimmed {
				c.endEpisode(now)
			}
			w.kind = whyFull
			return w
		}
		up := min(max(cfg.UpGain*(-e)*dt, cfg.Quantum), cfg.MaxRise*dt)
		m.brightness = min(b+up, ceil)
		m.forget(now, -1)
		w.feature = c.dimming(m.brightness)
		w.kind = whyBrighten
		return w
	case !m.dimmed:
		m.overSince = time.Time{}
		switch {
		case p >= cfg.High:
			w.kind = whyConfirm
		case p < cfg.Low && b >= 1:
			w.kind = whyFull // calm, not yet for Hold: nothing to brighten anyway
		default:
			w.kind = whyBand
		}
		return w
	}
	m.overSince = time.Time{}
	if b < 0 {
		w.kind = whyFloor // shedding that does not unwind yet: hold
		return w
	}
	return c.trim(now, p, b, ceil, load, fallen, headroom, w)
}

// endEpisode ends a dimming episode at full brightness. The load that
// caused it may come back as bursts while the service warms up again:
// the account starts at its calmest.
func (c *Controller) endEpisode(now time.Time) {
	m := &c.mu
	m.loadMark, m.dimmed, m.prior = 0, false, 0
	m.forget(now, -1)
	m.acc = -coolClamp * c.need()
}

// trim is the law's slow path while dimmed: evidence, then a step.
func (c *Controller) trim(now time.Time, p, b, ceil, load float64, fallen, headroom bool, w why) why {
	m := &c.mu
	cfg := &c.cfg
	w.kind, w.feature = whyTrimHold, c.dimming(b)
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
	// A run of 2·Evidence settled periods far from target one way is no
	// noise at the level the trim settled on: conditions changed (the
	// capacity dipped or came back, the load moved within the margin).
	// The trim starts afresh with a fast move.
	if regime := 2 * cfg.Evidence / cfg.Tick.Seconds(); float64(m.calmRun) >= regime && b < ceil {
		// Back to the level a regime fall left (the capacity that
		// dipped came back), unless the load rose past the margin
		// since; without one, a span, and the trim's steps double
		// from there. A calm run is also what a lull in a steady load
		// looks like: a jump to anywhere else would be a guess. The
		// level before is no good level to go back to.
		m.forget(now, -1)
		m.lastDir = 1
		up := m.span
		w.kind = whyRegimeUp
		rose := m.loadMark > m.priorMark*(1+cfg.LoadMargin)
		if m.prior > b+m.span && !rose {
			up, w.kind = m.prior-b, whyRegimeBack
		}
		m.brightness = min(b+up, ceil)
		m.upStep = m.brightness - b
		if m.brightness >= m.prior || rose {
			m.prior = 0 // reached, or held at a lower load: no guide
		}
		w.feature = c.dimming(m.brightness)
		return w
	} else if float64(m.hotRun) >= regime && b > 0 {
		if b > m.prior {
			m.prior, m.priorMark = b, m.loadMark
		}
		m.forget(now, b)
		fall := max(fallMin, fallPerDoubling*math.Log2(p/farOver))
		m.brightness = max(b-fall, 0)
		w.kind, w.feature = whyRegimeDown, c.dimming(b)
		return w
	}
	switch {
	case m.acc >= need && b <= 0, m.acc <= -need && b >= ceil:
		// Nowhere to go (the floor; the ceiling of a scheduled cap):
		// hold, the account full.
		return w
	case m.acc >= need:
		// This level is over: remember it. Above the last good level
		// (a step up that failed) go back there; at or under it,
		// conditions changed: step down.
		m.acc, m.bad, m.badAt = 0, b, now
		var nb float64
		if m.good >= 0 && b > m.good+q/2 {
			nb = m.good
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
		m.brightness = min(b+st, ceil)
		if m.brightness >= m.prior {
			m.prior = 0 // climbed back on its own
		}
		m.movedAt = now
		w.kind = whyTrimUp
	default:
		return w
	}
	w.feature = c.dimming(max(m.brightness, b))
	return w
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
// Low −1, under Low/2 (or under Low with headroom at the gate) −2. The account stays within
// [−clamp·need, need], so that a long calm stretch does not take as long
// to undo.
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
// started from when it was a fall (−1 otherwise).
func (m *controllerState) forget(now time.Time, bad float64) {
	m.acc, m.lastDir, m.good, m.bad, m.badAt, m.fails = 0, 0, -1, bad, now, 0
	m.peak, m.dipped = 0, false
	m.span = m.maxStep
	m.movedAt = now
	m.calmRun, m.hotRun = 0, 0
}

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
//     over" or "this level is good"; at ±need the level steps down or up:
//     freely for a while after each fast move (the landing), then a
//     quantum at a time with growing waits (settled). See trim.go.
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
	if ceil > m.lastCeil+cfg.Quantum/2 && m.brightness >= m.lastCeil-cfg.Quantum/2 {
		// A cap that held the level lifted: the trim lands afresh from
		// where it held it (a settled trim would climb back a quantum a
		// minute).
		m.land(now)
	}
	m.lastCeil = ceil
	b := m.brightness
	c.trackLoad(load)
	falling := m.falling // the last period was a fast fall: this one goes on with it
	m.falling = false
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
			switch {
			case loadUp:
				m.prior = 0 // a level held at a lower load is no guide
			case m.dimmed && !falling && now.Sub(m.movedAt) >= m.sigWindow && b > m.prior:
				// Latency over CascadeAt at a level the trim held (for
				// a signal window since it last moved), at the same
				// load: the capacity dropped, as a regime fall says.
				// That level is where to go back to when it returns.
				m.prior, m.priorMark = b, m.loadMark
			}
			m.dimmed, m.falling = true, true
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
	return c.trim(now, p, b, ceil, fallen, headroom, w)
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

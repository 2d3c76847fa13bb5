package dimmer

import (
	"math"
	"time"

	"github.com/brownout/brownout/signals"
)

// correctK is the feedback of the model law (see capacity.go for what each
// reading does to K): a period's saturated reading, a carried one, a cold
// overload's, and the corrections from the targets' pressure, at the
// brightness b under the ceiling ceil, for the load lam, with the work a
// second busy (standard error busySE) the period's requests took; blind:
// no load measured (see controlModel's feedback only).
func (c *Controller) correctK(now time.Time, o observation, b, ceil, lam, busy, busySE float64, blind bool) {
	m := &c.mu
	cfg := &c.cfg
	e := &m.mdl.capacity
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
	if o.standing {
		m.mdl.standRun++
	} else {
		m.mdl.standRun = 0
	}

	// The capacity, at the all-off work now. Each instance of a fleet
	// queues its own requests: the idle a slower service needs is each
	// one's, o.queues times one's.
	e.rebase(m.mdl.w0, o.queues*cfg.queueIdle(), m.mdl.baseOwn && m.mdl.baseAt.Equal(now), m.mdl.baseOwn)
	kWas := e.k
	win := max(m.sigWindow, cfg.Tick)
	// As much pressure past its mark as overWindows windows (each at
	// least a Hold) one band past it: a regime change, for a law that
	// has no saturated period to tell it (see below).
	regimeSum := overWindows * max(win, cfg.Hold).Seconds() / cfg.Tick.Seconds()
	feedbackOnly := blind || !o.gate
	// A signal window that began before the all-off work last fell, as
	// the requests' own tallies measured it, holds the pressure of the
	// slower work before: where nothing but the pressure corrects K, it
	// says nothing of K at the work now — K was rebased for that
	// (capacity.rebase) — and is not summed nor corrected from, as a
	// window that began before the levels' last move is not (below).
	// (Answers 900 ms slow for half a minute, then 50 ms again: the
	// p99's window held the slow ones for ten seconds more, and its sums
	// cut K four times over while the features were already back on —
	// the features were all back 30 s after the answers, 4.5 s without
	// it.) Not after a rise — a pressure still high then is the slower
	// service's, and cuts K — nor after a jump of a window's mean
	// latency standing for the work without tallies: that holds the
	// queue's wait, jumps as the queue grows and drains, and rebases
	// nothing (a gateless pool that loses half its workers kept
	// 0.57–0.80 of its users in time with such windows held stale,
	// 0.84–0.98 without: sim's TestModelLawGatelessPoolLosesWorkers).
	staleWork := m.mdl.baseFell && !m.mdl.baseAt.IsZero() && now.Sub(m.mdl.baseAt) < win
	switch {
	case staleWork:
		// The sums start afresh: what they summed before the fall was
		// of the slower service, which K was rebased from. (Kept, the
		// slow answers' last feature came back 14.5–15.5 s after them,
		// not 5.5–7.5 s; a dependency that flaps faster than the window
		// — see TestModelLawFlappingWork — had its p99 over target 0.68
		// of the time, not 0.84: a window's pressure cannot follow a
		// service that changes within it either way.)
		m.mdl.overSum, m.mdl.underSum = 0, 0
	case feedbackOnly && !m.shadow:
		// Each period counts for one window's worth at most: one
		// outlier reading is no regime.
		most := regimeSum / overWindows
		band := cfg.High - cfg.Low
		m.mdl.overSum = max(m.mdl.overSum+min((o.p-1)/band, most), 0)
		if o.top >= 0 && o.top < len(cfg.Targets) && cfg.Targets[o.top].Signal.IsDuration() {
			// (Under Low, a refusal ratio is mostly nothing refused:
			// the norm under capacity, not the end of an overload.)
			m.mdl.underSum = max(m.mdl.underSum+min((cfg.Low-max(o.p, 0))/band, most), 0)
		}
	default:
		// (A gate measures the regime; a shadow's pressure is of levels
		// the law did not set.)
		m.mdl.overSum, m.mdl.underSum = 0, 0
	}
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
	if o.p >= cfg.High && b > 0 && time.Duration(m.mdl.standRun)*cfg.Tick >= win && !o.saturated && busy > 0 && e.k > setShare*busy {
		// An overload at a gate that no period measured as saturated:
		// a queue that stands — the gate has said so for a whole
		// signal window (CoDel: its shortest wait over its target for
		// an interval; a burst's queue drains within one), and the
		// pressure is over High — its
		// arrivals over its completions by less than saturatedExcess,
		// a few per cent refused. While a queue stands the pool is
		// never idle, and what the period carried is what the service
		// does: K goes to setShare of it, as at a first saturation (the
		// tenth a standing queue needs to drain), and the run starts
		// afresh. (The corrections alone, a band's error a step each
		// Hold or slower, took minutes: on real HTTP the shop's gate
		// queue stood for the last minute of a run, every page waiting
		// 300 ms, while K came down by 0.05 s a second every seven
		// seconds, and the levels, within minMove of their target,
		// held.)
		e.k, e.src, e.guessed = setShare*busy, capMeasured, false
		e.reset(now, cfg.Hold)
		e.dir = -1
		m.mdl.errSum, m.mdl.errN, m.mdl.standRun = 0, 0, 0
	}
	if kWas <= 0 && e.k <= 0 && !o.saturated && o.p < cfg.Low && busy > 0 && !blind && o.fresh {
		// Carried well within target while K is unknown: a lower
		// bound of the K to come (see capacity.go's Carried; below).
		// (Not blind — there busy is the model's work of a request,
		// not a measurement — nor an interval seen again, which would
		// count as two.)
		e.carriedBefore(now, busy, busySE)
	}
	switch {
	case o.saturated && busy > 0 && (!lasting || e.k <= 0):
		// Measured above. (Without K, a saturated period that is not
		// new sets none: the next new one measures it.)
	case e.k <= 0:
		if m.mdl.overRun >= coldConfirm && busy > 0 {
			// Over target, and no saturated period has measured the
			// capacity: what the service carries now is all it carries
			// within target, or more (see coldK).
			e.k, e.src, e.guessed = c.coldK(o, busy), capCold, true
			e.reset(now, cfg.Hold)
			m.mdl.overSum, m.mdl.underSum = 0, 0
		}
	case feedbackOnly && m.mdl.overSum >= regimeSum && (c.cutK(o, lam) < e.k || e.wait > cfg.Hold):
		// No gate whose saturated periods measure the capacity (or no
		// load to measure it in), and the pressure has run past the
		// target by as much as overWindows windows (each at least a
		// Hold) one band past it — a few periods far past, or many a
		// little (a cumulative sum, Page's CUSUM): the regime changed. A latency
		// grows at least in proportion to a request's work (a queue's
		// faster), so K·setpoint/p is as deep as K need go; K goes to
		// half way there in logarithm (see cutK), and the corrections
		// start afresh from it, the first due at once (the pace they
		// slowed to while K was found would take minutes).
		e.k, e.src, e.guessed = min(e.k, c.cutK(o, lam)), capDown, false
		e.reset(now.Add(-cfg.Hold), cfg.Hold)
		m.mdl.errSum, m.mdl.errN, m.mdl.overSum, m.mdl.underSum = 0, 0, 0, 0
	case feedbackOnly && m.mdl.underSum >= regimeSum && e.k > 0 && b < ceil && e.wait > cfg.Hold:
		// And as far under Low: the overload has ended (a slowdown, a
		// load that fell). The corrections start afresh, the first due
		// at once.
		e.reset(now.Add(-cfg.Hold), cfg.Hold)
		m.mdl.errSum, m.mdl.errN, m.mdl.overSum, m.mdl.underSum = 0, 0, 0, 0
	case o.p < cfg.Low && max(busy-carriedZ*busySE, c.carriedNow(b, lam, o.recentLoad)) > e.k:
		// Carried well within target, beyond K: K was too low (a first
		// measurement taken while the gate's limit was still opening
		// bounds nothing; one set while the service was slower holds
		// the levels at their floors). What it carried: the period's
		// work, less carriedZ standard errors — or, at the floors, the
		// load at their work (see carriedNow).
		e.carried(now, max(busy-carriedZ*busySE, c.carriedNow(b, lam, o.recentLoad)))
		m.mdl.errSum, m.mdl.errN = 0, 0
	case feedbackOnly && staleWork:
		// (See staleWork above.)
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
			if (err < 0 || b < ceil) && !(err < 0 && b <= 0 && feedbackOnly) {
				// (At the ceiling, a K that seems too low holds no
				// level down; at the floors, with nothing to measure
				// the capacity, one that seems too high dims nothing,
				// and would only wind down.)
				kWas := e.k
				e.correct(now, err, lam*(c.work(1)-c.work(0)))
				if floors := lam * c.work(0); err < 0 && b <= 0 && lam > 0 && !feedbackOnly && e.k < floors {
					// At the floors a K under the floors' work at the
					// load dims nothing more: the correction only winds
					// K down (an integrator against its actuator's
					// limit). It goes no lower than that work, nor
					// lower at all from under it.
					e.k = max(e.k, min(kWas, floors))
				}
				if f := c.latencyRoom(); err > 0 && e.guessed && !blind && o.gate && o.room && f > 1 {
					// A guess of K under what the latency allows:
					// half way there in logarithm, at most what the
					// ceiling's levels take (capacity.go's Roomed).
					if k := min(kWas*math.Sqrt(f), lam*c.work(ceil)); k > e.k {
						e.k, e.src = k, capRoom
					}
				}
			}
		}
	}
	if lb := e.before(now); kWas <= 0 && e.k > 0 && lb > e.k && o.p < cfg.Low {
		// K's first measure, taken within target, is no lower than
		// what the periods before it carried within target over the
		// last minute (capacity.before): had K been known, each would
		// have raised it so (the carried case above). One taken in an
		// overload is what the service does now, and what it carried
		// before says nothing of a service that has since lost
		// capacity (half its workers gone: K held at 2.7 s a second
		// where the pool did 2, a third refused).
		// (A one-worker lab at 40–80 % of its capacity: a burst that
		// its gate read as saturated set K to 0.9 of the 0.33 s a
		// second it carried, and every feature went to its floor for
		// up to two minutes — 5–12 of 40 runs at each load swung a
		// feature more than 0.2, 0–5 with the bound.)
		e.k, e.c, e.src = lb, max(e.c, lb), capCarried
	}
	if e.k != kWas {
		e.at = m.mdl.w0 // K found at the all-off work now (see capacity.rebase)
	}
}

// coldK is K for an overload that no saturated period measured: the work
// carried now, busy. Where the requests queue at the gate, the overload is
// that queue's, and a little less work ends it. Where the gate has room (few
// requests waited for it) or there is none, the latency is not its queue's,
// and is taken to scale
// with a request's work (a service that got slower, not one that queues):
// the work carried now times the set point over the pressure. (A refusal
// ratio does not scale with a request's work.)
func (c *Controller) coldK(o observation, busy float64) float64 {
	cfg := &c.cfg
	if (o.room || !o.gate) && o.top >= 0 && o.top < len(cfg.Targets) && cfg.Targets[o.top].Signal.IsDuration() {
		return busy * min(1, cfg.Setpoint/o.p)
	}
	return busy
}

// cutK is K after a regime change over target where nothing measures the
// capacity (see correctK): half way in logarithm from K to the
// proportional cut coldK gives (a bisection's first probe between K and
// the deepest cut a latency can call for), but not under the work the
// floors take at the load lam — under it the levels cannot dim further,
// and K would only wind down (pins, or the pressure of a shadow's levels,
// cut it towards nothing). For a refusal ratio, which does not scale with
// a request's work, K.
func (c *Controller) cutK(o observation, lam float64) float64 {
	e := &c.mu.mdl.capacity
	k := math.Sqrt(e.k * c.coldK(o, e.k))
	if floors := lam * c.work(0); lam > 0 && k < floors {
		k = min(e.k, floors)
	}
	return k
}

// latencyRoom is how many times its work the service could take before
// its response latencies reach the set point, at most: a latency grows at
// least in proportion to a request's work, so a latency target read at
// pressure p allows at most Setpoint/p. Where a target on anything else
// reads anything — refusals, errors (a limit the latencies do not show),
// the gate's wait or its own readings (which say nothing of the work) —
// there is no such room: 1.
func (c *Controller) latencyRoom() float64 {
	p := 0.0
	for _, r := range c.mu.readings {
		switch {
		case r.Missing:
		case r.Signal > signals.LatencyMax:
			if r.Value > 0 {
				return 1
			}
		default:
			p = max(p, r.Pressure)
		}
	}
	if !(p > 0) {
		return 1
	}
	return max(c.cfg.Setpoint/p, 1)
}

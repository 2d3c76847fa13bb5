package dimmer

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/brownout/brownout/signals"
)

// why is the reason for a step, kept as data so that a step that changes
// nothing formats nothing.
type why struct {
	kind    whyKind
	top     int // index of the dominating reading
	feature int // feature being dimmed or brightened
	held    time.Duration
	load    float64 // the offered load now

	// The model: K, what set it last, and the brightness it gives.
	capacity float64
	source   capSource
	budget   float64
	// noise: the levels held at levels, within the estimates' noise of
	// the budget (see withinNoise).
	noise  bool
	levels float64
	blind  bool // no load measured: K is a request's work (feedback only)
	// gateless: no gate reported its room — no saturated period measures
	// K; the pressure alone corrects it.
	gateless bool
	back     bool // the levels are set for a return of the load (returns.go)
	// backNow: the return came in the latest interval (returns.returned)
	backNow bool
	// fell: the latest interval fell back to the low the load went up
	// from, as the ups before did (returns.fell)
	fell bool
	// heldOut: the period's rate the load's tracker held out of its
	// estimate until a second period shows whether the load moved (see
	// tracker.update), when held.
	heldOut   float64
	heldOutOK bool
	heldRise  bool // the levels are set for the held-out interval's rise
}

type whyKind uint8

const (
	whyStart whyKind = iota
	whyNoSignal
	whyStale
	whyIdle
	whyFrozen
	whyReconfigured
	whyAdopted    // another controller's step, adopted (AdoptAt)
	whyIdleBack   // the model law, idle: the levels set for a pause's return (idleModel)
	whyIdleUnback // the model law, idle: the return did not come, the levels back to the ceiling
	whyCascade
	whyDim
	whyFloor
	whyFloorRoom
	whyUnshed
	whyUnshedRoom
	whyUnshedLoad
	whyFull
	whyBrighten
	whyCapped
	whyHold // nothing moved the levels by a step
)

// action maps the last step's why to what the law did, and its cause.
// Callers hold the lock.
func (c *Controller) action() (Action, signals.Key, bool) {
	w := c.mu.why
	if w.kind == whyAdopted {
		ad := &c.mu.adopted
		return ad.action, ad.cause, ad.causeOK
	}
	var a Action
	switch w.kind {
	case whyDim, whyIdleBack:
		a = Dim
	case whyCascade:
		a = Shed
	case whyBrighten, whyIdleUnback, whyUnshed, whyUnshedRoom, whyUnshedLoad:
		a = Brighten
	}
	if w.kind < whyCascade || w.kind == whyUnshedLoad || w.top >= len(c.mu.readings) {
		return a, 0, false
	}
	return a, c.mu.readings[w.top].Signal, true
}

// reason formats the last step's why. Callers hold the lock.
func (c *Controller) reason() string {
	m := &c.mu
	w := m.why
	if w.kind == whyAdopted {
		return m.adopted.reason // the other controller's whole account
	}
	cfg := &c.cfg
	sig := ""
	if w.kind >= whyCascade {
		sig = describe(m.readings[w.top])
	}
	var r string
	switch w.kind {
	case whyStart:
		r = "starting at full brightness"
	case whyNoSignal:
		r = "no signal this period: holding levels"
	case whyStale:
		r = fmt.Sprintf("no signal for %s: stale, holding levels", w.held.Round(time.Millisecond))
	case whyIdle:
		r = "idle: no request in the window, holding levels"
	case whyIdleUnback:
		r = fmt.Sprintf("idle: no request in the window, and the return expected did not come: brightening %s", cfg.Features[w.feature].Name)
	case whyIdleBack:
		r = fmt.Sprintf("idle: no request in the window; %s: dimming %s", c.describeModel(w), cfg.Features[w.feature].Name)
	case whyFrozen:
		r = "frozen by operator: " + m.freezeWhy
	case whyReconfigured:
		r = "configuration reloaded"
	case whyCascade:
		r = fmt.Sprintf("%s with every feature at its floor: shedding %s", sig, shedName(-m.brightness))
	case whyDim:
		r = fmt.Sprintf("%s: %s: dimming %s", sig, c.describeModel(w), cfg.Features[w.feature].Name)
	case whyFloor:
		r = fmt.Sprintf("%s: every feature at its floor, shedding %s", sig, shedName(-m.brightness))
		if w.capacity > 0 {
			r = fmt.Sprintf("%s: %s: every feature at its floor, shedding %s", sig, c.describeModel(w), shedName(-m.brightness))
		}
	case whyUnshed:
		r = fmt.Sprintf("%s: back under target, unwinding the cascade: shedding %s", sig, shedName(-m.brightness))
	case whyUnshedRoom:
		r = fmt.Sprintf("%s, but the gate has room (%.0f%% of arrivals waited): shedding does not lower this latency, unwinding: shedding %s",
			sig, 100*m.busy, shedName(-m.brightness))
	case whyUnshedLoad:
		r = fmt.Sprintf("%s: the load fell below what the floors carry (%s): shedding nothing", sig, c.describeModel(w))
	case whyFloorRoom:
		r = fmt.Sprintf("%s: every feature at its floor, but the gate has room (%.0f%% of arrivals waited): not shedding", sig, 100*m.busy)
		if w.capacity > 0 {
			r = fmt.Sprintf("%s: %s: every feature at its floor, but the gate has room (%.0f%% of arrivals waited): not shedding", sig, c.describeModel(w), 100*m.busy)
		}
	case whyFull:
		r = sig + ": full brightness (" + c.describeModel(w) + ")"
	case whyBrighten:
		r = fmt.Sprintf("%s: %s: brightening %s", sig, c.describeModel(w), cfg.Features[w.feature].Name)
	case whyHold:
		r = fmt.Sprintf("%s: %s: holding", sig, c.describeModel(w))
		if w.noise {
			r = fmt.Sprintf("%s: %s, within the estimates' noise of the levels' %.2f: holding", sig, c.describeModel(w), w.levels)
		}
	case whyCapped:
		r = sig + ": at the scheduled cap, holding"
	}
	if sr := c.scheduleReason(); sr != "" {
		r = sr + "; " + r
	}
	if m.mode == Shadow {
		r = "shadow (nothing applied): " + r
	}
	return r
}

// describeModel gives the model law's numbers behind a level, e.g. "load
// 412/s, carries 3.6 s of service a second (measured while saturated),
// recommendations costs 31±3 ms (learned) → brightness 0.35".
func (c *Controller) describeModel(w why) string {
	m := &c.mu
	var b strings.Builder
	if w.load >= 0 {
		fmt.Fprintf(&b, "load %.4g/s", w.load)
		if c.loadMotion() > 0 {
			fmt.Fprintf(&b, " moving by ±%.2g/s", c.loadMotion())
		}
		switch {
		case w.heldRise:
			fmt.Fprintf(&b, " (the last interval's %.4g/s held out until the next shows whether it holds; the levels set for it)", w.heldOut)
		case w.heldOutOK:
			fmt.Fprintf(&b, " (the last interval's %.4g/s held out until the next shows whether it holds)", w.heldOut)
		}
		switch {
		case w.backNow:
			fmt.Fprintf(&b, ", back at %.4g/s (the last interval's count is a return to the level the load fell from)", m.mdl.returns.from)
		case w.back:
			fmt.Fprintf(&b, ", going back to %.4g/s (it went back after as long down before)", m.mdl.returns.from)
		case w.fell:
			fmt.Fprintf(&b, ", back down at %.4g/s (the last interval's count is a fall to the level the load went up from, after as long up as before)", m.mdl.returns.low)
		}
		b.WriteString(", ")
	}
	if w.capacity <= 0 && w.blind {
		fmt.Fprintf(&b, "no load measured (%s): feedback only, over target for %d periods in a row to begin", c.cfg.LoadSignal, coldConfirm)
		return b.String()
	}
	if w.capacity <= 0 {
		b.WriteString("capacity unknown until an overload measures it")
		return b.String()
	}
	unit := "all-off requests"
	if m.mdl.capacity.seconds {
		unit = "s of service"
	}
	if w.blind {
		if m.mdl.capacity.seconds {
			fmt.Fprintf(&b, "no load measured (%s): feedback only, a request may take %s of service (%s)", c.cfg.LoadSignal, fmtValue(signals.LatencyMean, w.capacity), sourceNames[w.source])
		} else {
			fmt.Fprintf(&b, "no load measured (%s): feedback only, a request may take %.3g times an all-off request's work (%s)", c.cfg.LoadSignal, w.capacity, sourceNames[w.source])
		}
	} else {
		if w.gateless {
			fmt.Fprintf(&b, "carries %.3g %s a second (%s; without a gate to measure it, the pressure corrects it)", w.capacity, unit, sourceNames[w.source])
		} else {
			fmt.Fprintf(&b, "carries %.3g %s a second (%s)", w.capacity, unit, sourceNames[w.source])
		}
	}
	if i := w.feature; i >= 0 && i < len(m.mdl.cost) {
		f := c.cfg.Features[i].Name
		switch e := m.costs.estimate(i); {
		case m.mdl.learned[i] && m.mdl.capacity.seconds:
			fmt.Fprintf(&b, ", %s costs %.2f±%.2g of an all-off request (learned: %s±%s)", f, e.Value, e.SE, fmtValue(signals.LatencyMean, e.Seconds), fmtValue(signals.LatencyMean, e.SE*e.Base))
		case m.mdl.learned[i]:
			fmt.Fprintf(&b, ", %s costs %.2f±%.2g of an all-off request (learned)", f, e.Value, e.SE)
		default:
			if sc := m.mdl.scale; sc > 0 && math.Abs(sc-1) > 0.005 {
				fmt.Fprintf(&b, ", %s costs %.3g of an all-off request (configured %.3g, × %.3g taught by the moves)", f, c.cfg.Features[i].Cost*sc, c.cfg.Features[i].Cost, sc)
			} else {
				fmt.Fprintf(&b, ", %s costs %.2f of an all-off request (configured)", f, c.cfg.Features[i].Cost)
			}
		}
	}
	fmt.Fprintf(&b, " → brightness %.2f", w.budget)
	return b.String()
}

var sourceNames = [...]string{capNone: "none", capMeasured: "measured while saturated", capDown: "lowered: over target",
	capUp: "raised: under target", capCold: "carried at the first overload", capCarried: "carried within target", capRoom: "raised: the latency has room",
	capSlower: "lowered: the service got slower, its queue waits longer", capFaster: "raised: the service got faster again"}

func shedName(level float64) string {
	switch {
	case level <= 0:
		return "nothing"
	case level <= 1:
		return fmt.Sprintf("%.0f%% of sheddable requests", 100*level)
	}
	return fmt.Sprintf("every sheddable and %.0f%% of default requests", 100*(level-1))
}

// describe renders a reading, e.g. "latency.p99 1.3s > 1s target".
func describe(r Reading) string {
	val, tgt := fmtValue(r.Signal, r.Value), fmtValue(r.Signal, r.Target)
	rel := "<"
	switch {
	case r.Value > r.Target:
		rel = ">"
	case r.Value == r.Target:
		rel = "="
	}
	return fmt.Sprintf("%s %s %s %s target", r.Signal, val, rel, tgt)
}

func fmtValue(k signals.Key, v float64) string {
	if k.IsDuration() {
		d := time.Duration(v * float64(time.Second))
		switch {
		case d >= time.Second:
			return d.Round(10 * time.Millisecond).String()
		case d >= time.Millisecond:
			return d.Round(time.Millisecond).String()
		}
		return d.Round(time.Microsecond).String()
	}
	return fmt.Sprintf("%.3g", v)
}

package dimmer

import "time"

// The cascade's trial: refusing requests at the door helps a service that
// is saturated — its completions capped, a backlog behind them — and no
// other: a service whose every answer got slow (a slow dependency) completes
// all it admits, and refusing some of it makes none faster. A gate says
// which it is (gate.busy: a full gate queues, one with room does not).
// Without one, the cascade sheds on the latency alone and then checks what
// the shedding did, against the period before it began, once a signal
// window has passed (the pressure's window, and the rates', must be of
// the shedding):
//
//   - the pressure fell by trialDrop or more: it helps;
//   - the admitted requests (arrivals less refusals, a second) fell by
//     trialShed of them or more, and the completions did not fall with
//     them (by under half as much): the service was saturated — its
//     backlog drains — and it helps;
//   - neither: it does not. The cascade unwinds at UnshedRate, says so,
//     and does not start again until the pressure falls under CascadeAt
//     or the arrivals rise by LoadMargin over those of the verdict (a new
//     overload).
//
// Without the rates (a source that gives the latency alone) there is no
// verdict: the cascade works on the latency, as before.
const (
	// trialDrop is how much of the cascade's pressure when shedding
	// began must be gone for the shedding to have helped: a tenth, more
	// than a window's p99 moves by itself at a steady load.
	trialDrop = 0.1
	// trialShed is the least share of the admitted requests the
	// shedding must have taken away for the completions' holding to
	// speak: 5 %, beyond the window's counting noise at tens of
	// requests a second.
	trialShed = 0.05
)

// shedTrial is the state of the cascade's trial.
type shedTrial struct {
	on                   bool      // shedding, and its baseline taken
	at                   time.Time // when shedding began
	p0, admitted0, done0 float64   // the pressure and the rates then (< 0 unknown)
	futile               bool      // shedding was found not to help
	futileLoad           float64   // the arrivals a second at that verdict
	futileCut            float64   // the share of the admitted requests shedding took away by then
}

// shedFutile runs the trial for a period in which the cascade sheds (the
// brightness below 0) at cascade pressure pc, and reports whether the
// shedding has been found not to help. Only without a gate: a gate's room
// says it (see the cascade's unwinding).
func (c *Controller) shedFutile(now time.Time, pc float64) bool {
	m := &c.mu
	t := &m.trial
	if m.busyOK {
		return false
	}
	if !t.on {
		t.on, t.at, t.p0, t.admitted0, t.done0 = true, now, pc, m.admitted, m.done
		return false
	}
	if now.Sub(t.at) < max(m.sigWindow, c.cfg.Hold) || t.admitted0 < 0 || m.admitted < 0 || t.done0 < 0 || m.done < 0 {
		return false
	}
	cut := t.admitted0 - m.admitted
	if pc <= t.p0*(1-trialDrop) || cut >= trialShed*t.admitted0 && m.done >= t.done0-cut/2 {
		return false
	}
	t.futile, t.futileLoad, t.futileCut, t.on = true, m.arrived, cut/max(t.admitted0, 1e-9), false
	return true
}

// rearm ends a verdict that shedding was futile once the cascade
// pressure pc of a period is under CascadeAt, a gate reports, or the
// arrivals rise by LoadMargin over the verdict's (a new overload, perhaps):
// the cascade may try again. Every period calls it.
func (c *Controller) rearm(pc float64) {
	m := &c.mu
	t := &m.trial
	if t.futile && (pc < c.cfg.CascadeAt || m.busyOK || m.arrived > t.futileLoad*(1+c.cfg.LoadMargin)) {
		t.futile = false
	}
}

// cascadeBarred reports whether the trial found shedding futile (see
// rearm): the cascade does not start.
func (c *Controller) cascadeBarred() bool { return c.mu.trial.futile }

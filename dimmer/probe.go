package dimmer

import (
	"math"
	"time"
)

// The probe (model law). A feature's cost is learned while its level is
// fractional — the provider's buckets then give it to some requests and
// not to others, a randomised experiment within each period (estimate.go)
// — but under a ranked ladder only one feature is fractional at a time:
// the others sit all on or all off, and what they cost is never measured
// (or is forgotten after costMemory). The probe keeps every feature's
// level within [p, 1 − p]: a feature all on is withheld from a share p of
// the users, one all off is given to as many, and each is contrasted every
// period. The share is as small as measuring a cost within costMemory
// calls for at the offered load (probeSample), at most Config.Probe.
//
// What it costs: a share p of the users miss each feature that is on
// (the same users, by their bucket: a user's page does not flicker), and
// the features that are off cost p of their work — which the law
// budgets (work counts the levels as published), so the fractional
// feature gives it back and the load carried stays within K. Nothing is
// probed where it would add to an overload the floors do not hold (every
// feature at its floor, or shedding), without tallies to learn from (a
// probe nobody measures is a cost with nothing learned), at full
// brightness while the load is under half of what the service carries
// (probeRoom, probeRoomOff); a pin, shadow
// mode, a freeze and a scheduled cap decide over it (levels), as over
// every level the law sets. A segment is probed at its own brightness.

// DefaultProbe is Config.Probe's default: at most 5 % of the users — "a
// few", so that a user rarely misses a feature the service has room for.
const DefaultProbe = 0.05

// MaxProbe bounds Config.Probe: past a fifth of the users the probe is an
// A/B test, not a measurement on the side.
const MaxProbe = 0.2

// probeSample is how many requests a probe aims to contrast each way over
// a cost memory: the share it takes is probeSample/(λ·costMemory), within
// Config.Probe. With service times about as spread as their mean (a
// queue's, the lab's), the standard error of a cost is then about
// 1.3/√probeSample ≈ 0.06 of the all-off request's work: a cost of a
// quarter of a page is learned (maxCostSE) within a memory. Under about
// 170 requests a second the share is Config.Probe, and a cost that small
// takes longer; at 1 000 a second the probe takes 1 %.
const probeSample = 500

// probeRoom is the share of K under which a load served at full
// brightness needs no probe: at most half of what the service carries, a
// doubling of the load still fits with every feature on, and what the
// features cost matters only once the load grows — until then nobody
// misses a feature for it. (A K not yet measured — a service never
// overloaded — is no reason to probe either: its first overload makes the
// dimmed features fractional, and the probe starts there.)
const probeRoom = 0.5

// probeRoomOff is the share of K under which a probe that runs at full
// brightness stops: under probeRoom, so that a steady load whose noise
// (and the estimates') straddles probeRoom·K does not start and stop the
// probe every few periods — each time republishing the levels, and giving
// the users probed their features back and taking them again.
const probeRoomOff = 0.4

// probing reports whether the law probes now (see above): under the model
// law, with a probe share, tallies seen within costMemory, and the levels
// dimmed or the load within reach of K (probeRoom).
func (c *Controller) probing(now time.Time) bool {
	m := &c.mu
	last := m.costs.last
	if c.cfg.Probe <= 0 || last.IsZero() || now.Sub(last) >= costMemory {
		return false
	}
	if m.brightness < 1 {
		return true
	}
	k, lam := m.mdl.capacity.k, m.mdl.load.est
	if k <= 0 || !m.mdl.load.ok {
		return false
	}
	all := m.mdl.w0 // a request's work with every feature on (a Floor makes it no lighter)
	for i := range c.cfg.Features {
		all += c.costPer(i)
	}
	room := probeRoom
	if m.mdl.probe {
		room = probeRoomOff // (hysteresis: see probeRoomOff)
	}
	return lam*all > room*k
}

// setProbe decides at now whether the law probes, and its share at the
// offered load lam when it starts (or Config.Probe was lowered under it by
// Reconfigure). The law calls it once a period has measured the costs.
func (c *Controller) setProbe(now time.Time, lam float64) {
	m := &c.mu.mdl
	switch m.probe = c.probing(now); {
	case !m.probe:
		m.probeShare = 0
	case m.probeShare == 0, m.probeShare > c.cfg.Probe:
		m.probeShare = c.probeShare(lam)
	}
}

// probeShare is the share of the users the probe takes at the offered
// load lam (see probeSample), rounded up to the quantum so that it is
// published as taken, and at most Config.Probe (0 where the quantum is
// wider). The law sets it when it moves the levels (and when
// the probe starts): a load that drifts does not republish the levels.
func (c *Controller) probeShare(lam float64) float64 {
	p := c.cfg.Probe
	if lam > 0 {
		p = min(p, probeSample/(lam*costMemory.Seconds()))
	}
	q := c.cfg.Quantum
	if q > c.cfg.Probe+1e-9 {
		return 0 // levels in quanta wider than the probe: a probe would be a quantum
	}
	return min(math.Ceil(p/q-1e-9)*q, math.Floor(c.cfg.Probe/q+1e-9)*q)
}

// probeBudget is the most of the optional work the levels give (the
// ladder's, over the floors) that probing the features that are off may
// take: a quarter. Where little optional content fits, the probe does not
// take it all — at the lab's heaviest load the best level is 0.05 of the
// ladder, and 5 % of a feature of one and a half pages would cost more
// than all of it — and at the floors it takes nothing.
const probeBudget = 0.25

// probeLevels is the probe at a brightness: features all on are kept at
// most at 1 − down, features all off at least at up (0, 0: no probe).
type probeLevels struct{ down, up float64 }

// probeAt is the probe at the law's brightness b (see above): none when
// the law does not probe or b is at the floors; else the share p down,
// and up as much of p as probeBudget of the optional work at b pays for.
func (c *Controller) probeAt(b float64) probeLevels {
	m := &c.mu.mdl
	p := m.probeShare
	if !m.probe || p <= 0 || b <= 0 || p > c.cfg.Probe {
		return probeLevels{} // (a Reconfigure may have changed the law or the probe since the last step)
	}
	var opt, off float64
	for i, f := range c.cfg.Features {
		l := c.ladder(i, b)
		opt += (l - f.Floor) * c.costPer(i)
		if l < p {
			off += (p - l) * c.costPer(i)
		}
	}
	up := p
	if off > 0 {
		up = min(p, p*probeBudget*opt/off)
	}
	return probeLevels{down: p, up: up}
}

// lit is feature i's level at brightness b (a segment's, offset) as the
// law sets it: its rung of the ladder, kept within the probe pr.
func (c *Controller) lit(i int, b float64, pr probeLevels) float64 {
	l := c.ladder(i, b)
	if pr != (probeLevels{}) {
		l = max(min(max(l, pr.up), 1-pr.down), c.cfg.Features[i].Floor)
	}
	return l
}

package dimmer

import "math"

// RequestCost is what a request is expected to take of the service at the
// published levels, in all-off requests (the work of a request with every
// feature off):
//
//	1 + Σᵢ ℓᵢ·cᵢ·rᵢ
//
// ℓᵢ feature i's published level (a pin's, a scheduled cap's, the
// probe's: what the users get), cᵢ its cost in the model's unit (learned
// from the tallies, or its prior at the scale the moves taught) and rᵢ its
// reach, the share of requests that evaluate it. It is 1 under the search
// law, which has no model of a request's work, and until the model law
// has measured the all-off request's work.
//
// It is the unit an admission gate that counts work in flight should
// charge a request (shed.Config.Cost; brownout.New does so on the model
// law). A gate that counts requests reads a brightening as a queue: the
// requests take longer, so latency at its limit grows against a baseline
// measured while they were cheap, and it shrinks the limit — on real HTTP
// (two workers, an 8-ms page, parts of 3 and 2 ms) the model law's return
// to full brightness a second after a spike took the limit from 3.8 to 2.9
// requests and brought three bursts of CoDel refusals in the next eight
// seconds at 65 % of the capacity. Charged in work, the limit holds what
// the pool holds whatever the levels, as the lab's gate always assumed
// (sim charges each request its cost at the dimmer's level).
//
// Safe for concurrent use: a load, no lock.
func (c *Controller) RequestCost() float64 {
	return math.Float64frombits(c.reqCost.Load())
}

// store publishes st and what a request is expected to cost at its
// levels. Callers hold the lock (or own c).
func (c *Controller) store(st *State) {
	c.state.Store(st)
	c.noteCost(st)
}

// noteCost sets RequestCost for the levels st publishes. Callers hold the
// lock (or own c).
func (c *Controller) noteCost(st *State) {
	m := &c.mu.mdl
	w := 1.0
	if c.cfg.Model && m.w0 > 0 && st != nil {
		for i := range min(len(c.cfg.Features), len(st.Features), len(m.cost), len(m.reach)) {
			w += st.Features[i].Level * c.costPer(i) / m.w0
		}
	}
	if !(w >= 1) || math.IsInf(w, 0) {
		w = 1 // (a cost is never negative; NaN or ±Inf from a broken estimate charges a request as one)
	}
	c.reqCost.Store(math.Float64bits(w))
}

package dimmer

import "math"

// RequestCost is what a request is expected to take of the service at the
// published levels, as a share of a request with every feature on:
//
//	(1 + Σᵢ ℓᵢ·kᵢ) / (1 + Σᵢ kᵢ)      kᵢ = cᵢ·rᵢ / w₀
//
// ℓᵢ feature i's published level (a pin's, a scheduled cap's, the
// probe's: what the users get), cᵢ its cost (learned from the tallies, or
// its configured Cost at the scale the moves taught — a feature's default
// Cost of 1 until then), rᵢ its reach (the share of requests that
// evaluate it) and w₀ the all-off request's work. It is 1 at full
// brightness and before the law's first step; never under
// minRequestCost. Segments are not told apart: a request is charged the
// default segment's levels.
//
// It is what an admission gate that counts work in flight should charge
// a request (shed.Config.Cost; brownout.New does): a gate that counts
// requests reads a brightening as a queue — the requests take longer, its
// latency at the limit grows against a baseline measured while they were
// cheap, and it shrinks the limit. On real HTTP (two workers, an 8-ms
// page, parts of 3 and 2 ms) the model law's return to full brightness a
// second after a spike took the limit from 3.8 to 2.9 requests and
// brought bursts of CoDel refusals for the next five to nine seconds at
// 65 % of the capacity. Charged in work, the gate's latency per unit
// holds as the levels move, as the lab's gate always assumed (sim charges
// each request its cost at the dimmer's level); its limit, in work, then
// grows by what a request's work grew, half again per window, and
// under-fills a pool meanwhile where that is more than the limit's
// tolerance (see docs/model.md, "The gate counts work"). In units of a
// full request the gate's bounds and its metrics mean what they meant at
// full brightness (a limit of 1000 is 1000 full requests, more when
// dimmed), and a request of Shedder.Acquire's default cost of 1 is a full
// one.
//
// Safe for concurrent use: a load, no lock.
func (c *Controller) RequestCost() float64 {
	return math.Float64frombits(c.reqCost.Load())
}

// minRequestCost bounds RequestCost below: a request dimmed to a
// hundredth of a full one is charged a hundredth (the least a declared
// route cost may be, shed.Routes), so that estimates gone astray — a
// scale at its bound, a w₀ near nothing — cannot make requests free.
const minRequestCost = 0.01

// store publishes st and what a request is expected to cost at its
// levels. Callers hold the lock (or own c).
func (c *Controller) store(st *State) {
	c.noteMoves(c.state.Load(), st)
	c.state.Store(st)
	c.noteCost(st)
}

// noteMoves records, for the cost estimates (see costs.mixed), which
// features' published levels — any segment's — moved by minMove or more
// between old and st, as moved at the controller's time. A smaller move
// (the probe's share as the load changes, a quantum) biases another
// feature's contrast by less than its share of that feature's cost — a
// twentieth at most, within the estimate's noise — and skipping the
// contrasts of every tick it came in lost most of the probe's on a load
// that holds (the parts lab with half the requests rendering no part and
// their work unreported: 0.59 of the best fixed level's optional share,
// 0.75 before). Callers hold the lock.
func (c *Controller) noteMoves(old, st *State) {
	k := c.mu.costs
	if old == nil || k == nil {
		return
	}
	// By name: a Reconfigure adds, drops and reorders features and
	// segments. A segment new in st was served the default levels.
	for i, name := range st.core.names {
		j, ok := k.index[name]
		oi, had := old.index[name]
		if !ok || !had {
			continue // (a feature new in st: nothing of it was tallied before)
		}
		moved := math.Abs(old.LevelAt(oi, -1)-st.LevelAt(i, -1)) >= minMove
		for s := 0; s < len(st.segNames) && !moved; s++ {
			os, ok := old.segIndex[st.segNames[s]]
			if !ok {
				os = -1
			}
			moved = math.Abs(old.LevelAt(oi, os)-st.LevelAt(i, s)) >= minMove
		}
		if moved {
			k.movedAt[j] = c.mu.at
		}
	}
}

// noteCost sets RequestCost for the levels st publishes. Callers hold the
// lock (or own c).
func (c *Controller) noteCost(st *State) {
	m := &c.mu.mdl
	at, full := 1.0, 1.0
	if m.w0 > 0 && st != nil {
		for i := range min(len(c.cfg.Features), len(st.Features), len(m.cost), len(m.reach)) {
			k := c.costPer(i) / m.w0
			at += st.Features[i].Level * k
			full += k
		}
	}
	w := at / full
	if math.IsNaN(w) || math.IsInf(full, 0) {
		w = 1 // (costs are never negative: NaN or ±Inf from a broken estimate charges a full request)
	}
	c.reqCost.Store(math.Float64bits(min(max(w, minRequestCost), 1)))
}

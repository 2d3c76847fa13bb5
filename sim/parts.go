package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
)

// Part is one optional part of every page, switched on or off per user by
// its own level, as a dimmer feature is (Name matches the feature's name,
// and is the flag key the user is bucketed under). Cost is the part's TRUE
// extra work, in units of the request's mandatory cost: a request of cost
// m with parts i on does m·(1 + Σ Costᵢ) units of the server's work. What
// a dimmer is configured with may differ from it: the lab's truth is here.
type Part struct {
	Name string
	Cost float64
}

// maxParts bounds Config.Parts: a request keeps which parts it rendered as
// a bit set in one uint64.
const maxParts = 64

// checkParts panics on parts the engine cannot run (configs are code).
func checkParts(ps []Part) {
	if len(ps) > maxParts {
		panic(fmt.Sprintf("sim: %d parts, at most %d", len(ps), maxParts))
	}
	for _, p := range ps {
		if !(p.Cost >= 0) {
			panic(fmt.Sprintf("sim: part %q has cost %v", p.Name, p.Cost))
		}
	}
}

// partsCost returns Σ Costᵢ: the extra work, in mandatory-cost units, of a
// request with every part on.
func partsCost(ps []Part) float64 {
	var s float64
	for _, p := range ps {
		s += p.Cost
	}
	return s
}

// WeightedLevel returns the true-cost-weighted mean of levels (aligned with
// parts): the share of the optional work served when part i is served to
// levels[i] of users. It is 1 when no part costs anything.
func WeightedLevel(parts []Part, levels []float64) float64 {
	var sum, w float64
	for i, p := range parts {
		sum += p.Cost * levels[i]
		w += p.Cost
	}
	if w == 0 {
		return 1
	}
	return sum / w
}

// Ladder returns the per-part levels that serve share ∈ [0, 1] of the
// optional work (true-cost-weighted), dimming in the order of parts as
// package dimmer's ranked ladder does: parts[0] is the first to dim (rank
// 0), so it occupies the top of the scale — the last part is the first to
// come back on when the share grows from 0. Each part spans its share of
// the total cost, as dimmer's spans do with the configured costs.
func Ladder(parts []Part, share float64) []float64 {
	out := make([]float64, len(parts))
	total := partsCost(parts)
	if total == 0 {
		for i := range out {
			out[i] = min(max(share, 0), 1)
		}
		return out
	}
	var before float64
	for i, p := range parts {
		hi := 1 - before/total
		lo := hi - p.Cost/total
		before += p.Cost
		if hi == lo {
			out[i] = min(max(share, 0), 1) // a free part follows the share
			continue
		}
		out[i] = min(max((share-lo)/(hi-lo), 0), 1)
	}
	return out
}

// Fixed is a Dimmer that never moves, with a level per part (aligned with
// Config.Parts): the per-part Static. Without Parts its Level is the plain
// mean of its levels.
type Fixed []float64

// Step implements Dimmer.
func (f Fixed) Step(time.Time, signals.Snapshot) Dim {
	var sum float64
	for _, l := range f {
		sum += l
	}
	lv := 0.0
	if len(f) > 0 {
		lv = sum / float64(len(f))
	}
	return Dim{Level: lv, Levels: f}
}

// decideParts returns the bit set of the parts user key gets at the
// current levels: provider.On with the part's name as the flag key and the
// user's key, in decimal, as the targeting key — the sticky bucketing the
// provider does in production, so that a part's users at level ℓ are those
// it would serve, and raising ℓ only adds users.
func (e *engine) decideParts(key uint32) uint64 {
	var buf [10]byte // a uint32 in decimal
	user := strconv.AppendUint(buf[:0], uint64(key), 10)
	var on uint64
	for i, p := range e.cfg.Parts {
		if provider.On(p.Name, string(user), e.partLevel[i]) {
			on |= 1 << i
		}
	}
	return on
}

// onCost returns Σ Costᵢ over the parts in the bit set on.
func (e *engine) onCost(on uint64) float64 {
	var s float64
	for i, p := range e.cfg.Parts {
		if on&(1<<i) != 0 {
			s += p.Cost
		}
	}
	return s
}

// resolveLevels sets each part's level from the Dimmer's decision (see Dim)
// and makes Dim.Level their true-cost-weighted mean.
func (e *engine) resolveLevels() {
	d := &e.dim
	for i, p := range e.cfg.Parts {
		l := d.Level
		switch {
		case d.Names == nil && len(d.Levels) == len(e.cfg.Parts):
			l = d.Levels[i]
		case d.Names != nil:
			for j, n := range d.Names {
				if n == p.Name && j < len(d.Levels) {
					l = d.Levels[j]
					break
				}
			}
		}
		e.partLevel[i] = min(max(l, 0), 1)
	}
	d.Level = WeightedLevel(e.cfg.Parts, e.partLevel)
}

// tally records r's service time — from the start of its service to now,
// the time it held a worker, its wait left out — in the tick's work of
// every request and in every part's tally of the current tick, on or off
// as r got the part (in none when its kind evaluates no part). A request counts in the
// tick it completes, whether its client still waits or not.
func (e *engine) tally(r *Request) {
	held := e.vt(e.now).Sub(r.Start).Seconds()
	e.work[e.cur].Add(held)
	if r.noParts {
		return
	}
	for i := range e.tallies[e.cur] {
		t := &e.tallies[e.cur][i]
		if r.parts&(1<<i) != 0 {
			t.On.Add(held)
		} else {
			t.Off.Add(held)
		}
	}
}

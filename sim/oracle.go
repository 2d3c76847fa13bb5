package sim

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// OracleGrid is the coarse grid a per-second oracle is measured on.
type OracleGrid struct {
	// Loads are the constant arrival rates measured, ascending.
	Loads []float64
	// Shares are the fixed optional shares tried at each load, each
	// turned into per-part levels by the parts' ladder ([Ladder]).
	Shares []float64
	// Duration of each constant run (default 30 s) and its Warmup, the
	// first seconds not judged (default 5 s: the admission's adaptive
	// limit and the signals' window settle).
	Duration, Warmup time.Duration
	// Table, when set, holds what the grid's loads measured for every
	// oracle that shares it — oracles of several shapes built on the
	// same build and grid need the same constant runs, and each is made
	// once. Share a Table only among oracles of one build and grid.
	Table *OracleTable
}

// OracleTable is the best fixed outcome of each grid load measured so far,
// shared by the oracles of one build and grid ([OracleGrid.Table]). It is
// safe for concurrent use: a load that two oracles need at once is
// measured once. The zero value is an empty table.
type OracleTable struct {
	mu    sync.Mutex
	loads map[float64]*tableLoad
	grid  *OracleGrid // the grid of its first use, which every other must match
}

type tableLoad struct {
	once sync.Once
	out  Outcome
}

// at returns load's outcome on grid g, measuring it on first need. A grid
// whose runs differ from the one the table was first used with panics: its
// outcomes are not the table's.
func (t *OracleTable) at(g OracleGrid, load float64, measure func() Outcome) Outcome {
	t.mu.Lock()
	if t.loads == nil {
		t.loads, t.grid = map[float64]*tableLoad{}, &g
	}
	if !slices.Equal(t.grid.Shares, g.Shares) || t.grid.Duration != g.Duration || t.grid.Warmup != g.Warmup {
		t.mu.Unlock()
		panic("sim: an OracleTable shared by grids whose runs differ")
	}
	l, ok := t.loads[load]
	if !ok {
		l = &tableLoad{}
		t.loads[load] = l
	}
	t.mu.Unlock()
	l.once.Do(func() { l.out = measure() })
	return l.out
}

// OracleSecond is the oracle's verdict on one second of a load shape.
type OracleSecond struct {
	T    int
	Rate float64 // the shape's mean arrival rate over the second
	// Below and Above are the grid loads around Rate (equal at or beyond
	// the grid's ends).
	Below, Above float64
	// Best is the best fixed share (Setting) at Rate and what it did, as
	// [SweepRho] judges: the most optional content among the shares within
	// half a point of the best users in time — measured at Below and
	// Above and interpolated linearly in the rate between them.
	Best Outcome
}

// Oracle is θ*(λ(t)): for each second of a load shape, the best fixed
// level at that second's arrival rate, as if the load had stayed there.
// No controller can know it; it tells what a controller that tracked the
// load perfectly, second by second, with a fixed level's steady state at
// every rate, could serve.
type Oracle struct {
	Seconds []OracleSecond
	// ByLoad is each measured grid load's best outcome (loads the shape
	// never needed are not run).
	ByLoad map[float64]Outcome
}

// NewOracle measures the oracle of shape over dur on grid g. build returns
// a fresh Config (with Parts) running a given load and dimmer; the oracle
// runs it at constant grid loads with fixed levels ([Fixed] on the parts'
// ladder), each load once, when the shape first needs it (or not at all,
// when g's Table holds it).
func NewOracle(build func(load Profile, d Dimmer) Config, shape Profile, dur time.Duration, g OracleGrid) Oracle {
	if g.Duration <= 0 {
		g.Duration = 30 * time.Second
	}
	if g.Warmup <= 0 {
		g.Warmup = 5 * time.Second
	}
	o := Oracle{ByLoad: map[float64]Outcome{}}
	at := func(load float64) Outcome {
		b, ok := o.ByLoad[load]
		if !ok {
			measure := func() Outcome { return bestFixed(build, load, g) }
			if g.Table != nil {
				b = g.Table.at(g, load, measure)
			} else {
				b = measure()
			}
			o.ByLoad[load] = b
		}
		return b
	}
	last := len(g.Loads) - 1
	for t := range int(dur / time.Second) {
		rate := meanRate(shape, time.Duration(t)*time.Second, time.Second)
		i := sort.SearchFloat64s(g.Loads, rate) // g.Loads[i-1] < rate ≤ g.Loads[i]
		lo, hi := g.Loads[max(min(i-1, last), 0)], g.Loads[min(i, last)]
		s := OracleSecond{T: t, Rate: rate, Below: lo, Above: hi, Best: at(hi)}
		if lo < hi {
			a, b, f := at(lo), s.Best, (rate-lo)/(hi-lo)
			s.Best = Outcome{
				Setting:       a.Setting + f*(b.Setting-a.Setting),
				InTime:        a.InTime + f*(b.InTime-a.InTime),
				OptionalShare: a.OptionalShare + f*(b.OptionalShare-a.OptionalShare),
			}
		}
		o.Seconds = append(o.Seconds, s)
	}
	return o
}

// bestFixed runs every share of g at constant load and returns the best.
func bestFixed(build func(Profile, Dimmer) Config, load float64, g OracleGrid) Outcome {
	out := make([]Outcome, len(g.Shares))
	parts := build(Constant(load), nil).Parts
	for i, share := range g.Shares {
		cfg := build(Constant(load), Fixed(Ladder(parts, share)))
		cfg.Duration = g.Duration
		r := Run(cfg)
		w := r.Between(int(g.Warmup/time.Second), len(r.Seconds))
		out[i] = Outcome{Setting: share, InTime: w.InTime, OptionalShare: w.OptionalShare}
	}
	return best(out)
}

// OptionalShare returns the oracle's optional share over seconds [from,
// to): each second's best share as measured at its load, weighted by the
// second's arrivals.
func (o Oracle) OptionalShare(from, to int) float64 {
	var sum, w float64
	for _, s := range o.Seconds[max(from, 0):min(to, len(o.Seconds))] {
		sum += s.Rate * s.Best.OptionalShare
		w += s.Rate
	}
	if w == 0 {
		return 0
	}
	return sum / w
}

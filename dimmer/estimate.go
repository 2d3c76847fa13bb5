package dimmer

import (
	"math"
	"time"

	"github.com/brownout/brownout/signals"
)

// CostEstimate is what the controller has learned of a feature's cost
// from the per-request tallies (signals.Tally): the extra work a request
// that renders the feature takes, as a share of the work of a request with
// every feature off (0.3: a third of a page more).
type CostEstimate struct {
	// Value is the estimate and SE its standard error, both in shares of
	// the all-off request's work; NaN while unknown.
	Value, SE float64
	// Seconds is the extra service time itself, and Base the all-off
	// request's, in seconds; NaN while unknown.
	Seconds, Base float64
	// Contrasted is how many ticks the feature was contrasted in: on for
	// some requests and off for others, each side at least
	// minContrastSide of them.
	Contrasted int
	// InUse reports whether the law sets the levels with this estimate:
	// once it is precise enough (see the model's Learned bullet in
	// doc.go); until then it uses the feature's Cost, scaled by what the
	// moves taught. Costs fills it in.
	InUse bool
}

// Known reports whether the estimate has a finite value (the zero
// CostEstimate has none).
func (e CostEstimate) Known() bool {
	return e.Contrasted > 0 && !math.IsNaN(e.Value) && !math.IsInf(e.Value, 0) && !math.IsNaN(e.SE) && !math.IsInf(e.SE, 0)
}

const (
	// costMemory is how long the estimates remember: an observation
	// weighs e^(−age/costMemory). A minute: a feature's cost drifts with
	// its data and its dependencies over minutes, and a minute of ticks
	// with a few hundred requests each puts the standard error of a
	// feature of a tenth of a page within a few per cent.
	costMemory = time.Minute
	// minContrastSide is the fewest requests on each side (rendered, not
	// rendered) for a tick's contrast to count: a variance needs two. A
	// tick weighs by its counts (see weighted), so one with a few
	// rendered requests — a probe's at a light load — weighs as little as
	// it knows, and a slow request among them does not swing the mean.
	minContrastSide = 2
)

// costs estimates each feature's cost online from the dimmer's own
// randomisation. While a feature's level is fractional, the provider's
// sticky buckets give it to some users and not to others — independently
// of the other features, whose buckets hash another flag key — so within
// one tick the requests that rendered it and those that did not differ,
// on average, by its cost alone:
//
//	Δᵢ = mean(service | i on) − mean(service | i off)
//	     standard error √(s²_on/n_on + s²_off/n_off)
//
// The contrast is taken within each tick and never across ticks: levels
// fall as the load rises, and pooling the requests of several ticks would
// compare the rendered ones of calm ticks with the others of busy ones
// (biasing Δᵢ low). The ticks' contrasts are combined weighted by their
// counts (see weighted), each forgotten over costMemory. The all-off request's work
// is what remains of a tick's mean service time once each feature's
// expected share is taken out:
//
//	b = mean(service) − Σᵢ pᵢ·Δ̂ᵢ      pᵢ: the tick's share of requests that rendered i
//
// and the cost is cᵢ = Δ̂ᵢ / b̂. A feature never contrasted (always on or
// always off since the start) is unknown, and counts as costing nothing
// in b — so while a feature that is always on is unknown, b̂ holds its
// cost and the others' shares read a little low.
//
// A tick's contrast is an experiment only among requests that drew their
// features from one set of levels. A request is tallied when it ends, and
// drew its features when it began: the requests that end in the tick
// after a move of the levels began partly before it. Where another
// feature's levels moved too, the two populations differ in it as well,
// and together — a dim takes both features from the requests that began
// after it — so feature i's contrast holds part of feature j's cost: on a
// square wave of the load at four workers, every part on, then off, then
// on, reviews (5 ms) read 9 ± 1 ms, the all-off work's estimate that the
// learned costs leave went below nothing, and the law lost its unit. Both
// must have moved: where feature i's levels held, its rendered and
// unrendered requests hold the two populations alike; where j's held,
// the populations do not differ in it. So a tick's contrast of feature i
// is skipped where i's levels and another's moved while its requests drew
// their features — within its interval or a tick before it began (see
// mixed): a move of the ladder from one feature's stretch into the next,
// not a move within one.
type costs struct {
	delta []weighted // per feature: Δ̂ᵢ in seconds
	base  weighted   // b̂ in seconds
	ticks []int
	// movedAt is when each feature's published levels (any segment's)
	// last changed (see Controller.noteMoves).
	movedAt []time.Time
	// part accumulates the weights of the periods that saw an interval
	// also seen by others (see observe's w) toward the next whole tick.
	part  []float64
	last  time.Time
	index map[string]int
	// unknown is the first feature the last tick's tallies name that the
	// configuration does not have, unknownN how many such names they
	// held, unknownAt when (see ModelEstimate.Unconfigured).
	unknown   string
	unknownN  int
	unknownAt time.Time
}

// weighted is a weighted mean with exponential forgetting. Each tick
// weighs by its counts — 1/(1/n_on + 1/n_off), the inverse of its
// variance under a common spread — and not by its own sample variance:
// service times are skewed, a tick whose sample came out fast has a small
// variance as well, and weighing by it pulls the mean low (a feature of
// 0.2 of a page read 0.17 on average over 40 runs). The ticks' own
// variances enter the standard error alone: Var = Σ wₜ²·vₜ / (Σ wₜ)².
type weighted struct{ w, s, q float64 }

func (m *weighted) decay(f float64) { m.w *= f; m.s *= f; m.q *= f }

// add folds in x with weight w and its variance v.
func (m *weighted) add(x, w, v float64) {
	if !(w > 0) || math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	m.w += w
	m.s += w * x
	m.q += w * w * v
}

func (m weighted) mean() float64 {
	if m.w <= 0 {
		return math.NaN()
	}
	return m.s / m.w
}

// se is the standard error of the mean.
func (m weighted) se() float64 {
	if m.w <= 0 {
		return math.NaN()
	}
	return math.Sqrt(m.q) / m.w
}

func newCosts(features []Feature) *costs {
	c := &costs{delta: make([]weighted, len(features)), ticks: make([]int, len(features)), part: make([]float64, len(features)), movedAt: make([]time.Time, len(features)), index: make(map[string]int, len(features))}
	for i, f := range features {
		c.index[f.Name] = i
	}
	return c
}

// mixed reports whether feature i and another moved their levels while
// the requests of the interval from–to drew their features: within it, or
// up to mixSpan before it began — how long before its interval a request
// a tick tallies may have drawn them, a tick (requests that queue and run
// longer are few where the targets hold, a p99 under a tick; the lab's
// gate bounds a default request's wait at a quarter of one). A move after
// the interval ended is not its requests': a source that pushes every
// five ticks is read five times, and a move at the first reading would
// skip the other four.
func (c *costs) mixed(i int, from, to time.Time, mixSpan time.Duration) bool {
	cut := from.Add(-mixSpan)
	in := func(at time.Time) bool { return at.After(cut) && !at.After(to) }
	if !in(c.movedAt[i]) {
		return false
	}
	for j, at := range c.movedAt {
		if j != i && in(at) {
			return true
		}
	}
	return false
}

// observe folds in at now one tick's tallies, of the requests that ended
// in the interval from–to; mixSpan: see mixed. It allocates nothing.
func (c *costs) observe(now, from, to time.Time, mixSpan time.Duration, ts []signals.Tally, w float64) {
	seen, unknownN := false, 0
	for _, t := range ts {
		_, ok := c.index[t.Feature]
		switch {
		case ok && t.On.N+t.Off.N > 0:
			seen = true
		case !ok && t.On.N+t.Off.N+t.Unattributed > 0:
			if unknownN == 0 {
				c.unknown = t.Feature
			}
			unknownN++
		}
	}
	if unknownN > 0 {
		c.unknownN, c.unknownAt = unknownN, now
	}
	if !seen {
		// No request tallied for a feature configured (none at all, or
		// the app's flag keys are not the features' names): nothing to
		// learn, and no sign of tallies (costs.last, which the probe
		// waits for). The forgetting catches up at the next.
		return
	}
	if !c.last.IsZero() && now.After(c.last) {
		f := math.Exp(-now.Sub(c.last).Seconds() / costMemory.Seconds())
		for i := range c.delta {
			c.delta[i].decay(f)
		}
		c.base.decay(f)
	}
	c.last = now
	var all signals.Moments
	for _, t := range ts {
		i, ok := c.index[t.Feature]
		if !ok {
			continue
		}
		if all.N == 0 {
			all = t.On
			all.Merge(t.Off) // every feature's tally counts the same requests
		}
		if t.On.N < minContrastSide || t.Off.N < minContrastSide || c.mixed(i, from, to, mixSpan) {
			continue
		}
		d := t.On.Mean() - t.Off.Mean()
		non, noff := float64(t.On.N), float64(t.Off.N)
		// The contrast's variance from each side's own spread (Welch's;
		// each side has minContrastSide requests at least): the side that
		// renders a feature has more work, and often more spread, than
		// the other — a spread pooled over both, weighted by a probe's few
		// rendered requests against the many others, read it too small.
		c.delta[i].add(d, w/(1/non+1/noff), t.On.Var()/non+t.Off.Var()/noff)
		if c.part[i] += w; c.part[i] >= 1-1e-9 {
			c.ticks[i]++
			c.part[i]--
		}
	}
	if all.N < 2 {
		return
	}
	b := all.Mean()
	for _, t := range ts {
		i, ok := c.index[t.Feature]
		if n := t.On.N + t.Off.N; !ok || n == 0 {
			continue
		}
		if d := c.delta[i].mean(); !math.IsNaN(d) {
			b -= float64(t.On.N) / float64(t.On.N+t.Off.N) * d
		}
	}
	c.base.add(b, w*float64(all.N), all.Var()/float64(all.N))
}

// estimate returns feature i's estimate.
func (c *costs) estimate(i int) CostEstimate {
	e := CostEstimate{Value: math.NaN(), SE: math.NaN(), Seconds: c.delta[i].mean(), Base: c.base.mean(), Contrasted: c.ticks[i]}
	if math.IsNaN(e.Seconds) || !(e.Base > 0) {
		return e
	}
	v, se := e.Seconds/e.Base, c.delta[i].se()/e.Base
	if math.IsInf(v, 0) || math.IsInf(se, 0) {
		return e // a base too small to divide by: not known
	}
	e.Value, e.SE = v, se
	return e
}

// remap returns the estimator for a new list of features: what was
// learned of a feature that remains is kept, by name.
func (c *costs) remap(features []Feature) *costs {
	n := newCosts(features)
	n.base, n.last = c.base, c.last
	for i, f := range features {
		if j, ok := c.index[f.Name]; ok {
			n.delta[i], n.ticks[i], n.movedAt[i] = c.delta[j], c.ticks[j], c.movedAt[j]
		}
	}
	return n
}

// Costs returns what the controller has learned of each feature's cost,
// in the order of Config.Features. It allocates: for operators and tests,
// not request paths.
func (c *Controller) Costs() []CostEstimate {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]CostEstimate, len(c.cfg.Features))
	for i := range out {
		out[i] = c.mu.costs.estimate(i)
		out[i].InUse = i < len(c.mu.mdl.learned) && c.mu.mdl.learned[i]
	}
	return out
}

// ModelEstimate is what the law knows of the service (see Model).
type ModelEstimate struct {
	// Mode is how the law sets the levels: ModelCold before the capacity
	// is known (full brightness until an overload measures it),
	// ModelFeedback when no load is measured (the capacity is a
	// request's work, set by the pressure alone), ModelNoGate when the
	// load is measured but no gate reports its room (no saturated
	// period measures the capacity; the pressure corrects it), else
	// ModelMeasured.
	Mode string
	// Capacity is K, the work a second the service carries within
	// target — in seconds of service a second when Seconds (the source
	// tallies service time), else in all-off requests a second; under
	// ModelFeedback, the work one request may take. 0 while unknown.
	Capacity float64
	Seconds  bool
	// Source says what set Capacity last, as the reason does ("measured
	// while saturated", "raised: under target", …).
	Source string
	// Saturated is Ĉ, what the service did while its gate was saturated,
	// in Capacity's unit: K's ceiling. 0 while never measured.
	Saturated float64
	// Step is how far the next correction of Capacity moves it at most,
	// in Capacity's unit: the resolution the corrections know it to
	// (halved at each reversal of their direction, restarted by a change
	// of regime). 0 before the first.
	Step float64
	// Load is the offered load's estimate in requests a second, and
	// LoadSE its standard error; 0 when no load is measured.
	Load, LoadSE float64
	// AllOff is the all-off request's work (in seconds when Seconds),
	// and AllOffSE its standard error; 0 when the requests are not
	// tallied (the unit is then the all-off request itself).
	AllOff, AllOffSE float64
	// Unconfigured is a feature the requests' tallies name that the
	// configuration does not have — an app whose flag keys are not the
	// features' names teaches the law nothing of their costs — and
	// UnconfiguredN how many such names the last tick that had one held;
	// empty unless one was seen within the estimates' memory (a minute).
	Unconfigured  string
	UnconfiguredN int
}

// The modes of ModelEstimate.
const (
	ModelCold     = "cold"
	ModelFeedback = "feedback-only"
	ModelNoGate   = "no-gate"
	ModelMeasured = "measured"
)

// Model returns what the law knows of the service now: its capacity, the
// load and a request's work, with their uncertainty. It does not
// allocate.
func (c *Controller) Model() ModelEstimate {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu.mdl
	e := &m.capacity
	out := ModelEstimate{Capacity: max(e.k, 0), Seconds: e.seconds, Saturated: max(e.c, 0)}
	if e.k > 0 {
		out.Source = sourceNames[e.src]
	}
	switch {
	case m.blind:
		out.Mode = ModelFeedback
	case e.k <= 0:
		out.Mode = ModelCold
	case !m.gated:
		out.Mode = ModelNoGate
	default:
		out.Mode = ModelMeasured
	}
	if m.load.ok && m.load.est > 0 {
		out.Load, out.LoadSE = m.load.est, math.Sqrt(max(m.load.p, 0))
	}
	if m.base.ok && m.base.est > 0 {
		out.AllOff, out.AllOffSE = m.base.est, math.Sqrt(max(m.base.p, 0))
	}
	if cs := c.mu.costs; cs != nil && cs.unknownN > 0 && c.mu.at.Sub(cs.unknownAt) < costMemory {
		out.Unconfigured, out.UnconfiguredN = cs.unknown, cs.unknownN
	}
	if e.k > 0 && e.step > 0 && out.Load > 0 && len(c.cfg.Features) > 0 {
		out.Step = e.step * out.Load * (c.work(1) - c.work(0))
	}
	return out
}

package sim

import (
	"time"

	"github.com/brownout/brownout/signals"
)

// MandatoryCapacity returns C, the server's capacity in mandatory work:
// the requests per second it completes with every optional part off —
// workers over the mean mandatory service time (the mix's share-weighted
// cost times ServiceMean). It reads Server.Workers, not WorkersAt, Capacity
// or Contention: the reference is for servers of constant capacity.
func MandatoryCapacity(cfg Config) float64 {
	cfg = cfg.withDefaults()
	return float64(cfg.Server.Workers) / (meanCost(cfg.Mix) * cfg.Server.ServiceMean.Seconds())
}

// meanCost returns the share-weighted mean mandatory cost of the mix.
func meanCost(mix []ClassMix) float64 {
	var sum, w float64
	for _, m := range mix {
		c := m.Cost
		if c <= 0 {
			c = 1
		}
		sum += m.Share * c
		w += m.Share
	}
	return sum / w
}

// rateSamples is how many points of the load a Reference averages over a
// tick: ten per tick follow a 30 s sine to a few parts per thousand.
const rateSamples = 10

// Reference is a Dimmer that is told the truth the dimmer has to guess:
// the arrival rate λ(t) (Load), the parts' true costs and the server's
// mandatory capacity C (see MandatoryCapacity). Each tick it predicts the
// utilisation u = λ·(1 + r·Σ ℓᵢ·cᵢ)/C over the coming tick (λ averaged
// over it; r the share of the mandatory work whose requests evaluate the
// parts) and sets the levels that hold u at the set point Rho, filling the
// parts' ladder ([Ladder]: Parts[0] dims first, as rank 0 does in package
// dimmer); when even every part off gives u > Rho it sheds the excess of
// mandatory work at the door (Dim.Shed): sheddable users first, then
// default ones, never critical. It reads no signal.
type Reference struct {
	Load     Profile
	Parts    []Part
	Capacity float64 // C, requests per second with every part off
	// Rho is the set point of the predicted utilisation, in (0, 1].
	Rho float64
	// Tick is the period it predicts for; default 1 s (Config.Tick).
	Tick time.Duration
	// Lag is how late it learns the load: 0, the mean rate of the coming
	// tick (what no controller can know); one Tick, that of the tick just
	// past — the most a controller that counts each period's arrivals
	// knows when it sets the levels for the next. Until Lag has passed it
	// reads the run's first tick; a negative Lag is 0.
	Lag time.Duration
	// Counted: it is told the load as a controller counts it — the last
	// interval's arrivals in the snapshot (Snapshot.Recent over
	// RecentSpan), with their noise — not the profile's rate; Lag is
	// then not read. Until an interval is counted it reads the run's
	// first tick. Told the profile's rate, even a tick late, it knows
	// the load without the noise every controller must keep a margin
	// for: this is the line for what a causal dimmer can serve.
	Counted bool
	// work[c] is class c's share of the mandatory work, for shedding.
	work [signals.NumClasses]float64
	// reach is the share of the mandatory work whose requests evaluate the
	// parts (1 unless the mix has NoParts kinds).
	reach  float64
	levels []float64
}

// NewReference returns the Reference for cfg (its Load, Parts, Mix, Server
// and Tick) at set point rho.
func NewReference(cfg Config, rho float64) *Reference {
	cfg = cfg.withDefaults()
	r := &Reference{Load: cfg.Load, Parts: cfg.Parts, Capacity: MandatoryCapacity(cfg), Rho: rho, Tick: cfg.Tick}
	var total float64
	for _, m := range cfg.Mix {
		c := m.Cost
		if c <= 0 {
			c = 1
		}
		r.work[m.Class] += m.Share * c
		total += m.Share * c
		if !m.NoParts {
			r.reach += m.Share * c
		}
	}
	r.reach /= total
	for c := range r.work {
		r.work[c] /= total
	}
	return r
}

// Step implements Dimmer.
func (r *Reference) Step(now time.Time, s signals.Snapshot) Dim {
	tick := r.Tick
	if tick <= 0 {
		tick = time.Second
	}
	var lambda float64
	switch {
	case r.Counted && s.RecentSpan > 0:
		lambda = float64(s.Recent.Arrived) / s.RecentSpan.Seconds()
	case r.Counted:
		lambda = meanRate(r.Load, 0, tick)
	default:
		lambda = meanRate(r.Load, max(now.Sub(epoch)-max(r.Lag, 0), 0), tick)
	}
	if r.levels == nil {
		r.levels = make([]float64, len(r.Parts))
	}
	if lambda <= 0 {
		copy(r.levels, Ladder(r.Parts, 1))
		return Dim{Level: 1, Levels: r.levels}
	}
	room := r.Rho * r.Capacity / lambda // 1 + Σ ℓᵢcᵢ that holds u at Rho
	if room >= 1 {
		share := 1.0
		if total := partsCost(r.Parts) * r.reach; total > 0 {
			share = min((room-1)/total, 1)
		}
		copy(r.levels, Ladder(r.Parts, share))
		return Dim{Level: share, Levels: r.levels}
	}
	clear(r.levels)
	return Dim{Level: 0, Levels: r.levels, Shed: r.shedFor(1 - room)}
}

// shedFor returns the shed level that refuses share f of the mandatory
// work: sheddable users first (levels 0 to 1), then default ones (1 to 2).
func (r *Reference) shedFor(f float64) float64 {
	ws, wd := r.work[signals.Sheddable], r.work[signals.Default]
	if f <= ws {
		return f / ws // ws > 0 here unless f ≤ 0
	}
	if wd == 0 {
		return 1
	}
	return 1 + min((f-ws)/wd, 1)
}

// meanRate averages p over [t, t+d) at rateSamples midpoints.
func meanRate(p Profile, t, d time.Duration) float64 {
	var sum float64
	for i := range rateSamples {
		sum += p.Rate(t + d*time.Duration(2*i+1)/(2*rateSamples))
	}
	return sum / rateSamples
}

// inTimeSlack is how many users in time, as a share, a sweep gives up for
// more optional content: half a point, about the spread of in-time between
// seeds of one 90 s run of the lab (so a setting within it is not worse for
// users in any way a run can tell).
const inTimeSlack = 0.005

// Outcome is what a sweep judges a run by: the share of users in time and
// the share of the optional work the good answers got (true-cost-weighted).
type Outcome struct {
	Setting       float64 // the swept value: Rho, or an optional share
	InTime        float64
	OptionalShare float64
}

// best returns the outcome with the most optional content among those
// within inTimeSlack of the best in-time; ties go to the first.
func best(os []Outcome) Outcome {
	top := 0.0
	for _, o := range os {
		top = max(top, o.InTime)
	}
	var b Outcome
	found := false
	for _, o := range os {
		if o.InTime >= top-inTimeSlack && (!found || o.OptionalShare > b.OptionalShare) {
			b, found = o, true
		}
	}
	return b
}

// SweepRho runs the Reference at every set point in rhos on the run
// build returns (a fresh Config each call, Dimmer left unset: the sweep
// sets it) and returns the best and every outcome. Best is the set point
// with the most optional content (Summary.OptionalShare) among those that
// keep users in time (Summary.InTime) within half a point of the best
// set point's — more optional content, but not at the users' expense.
func SweepRho(build func() Config, rhos []float64) (Outcome, []Outcome) {
	return SweepRhoLate(build, rhos, 0)
}

// SweepRhoLate is SweepRho for a Reference told the load lag late (see
// Reference.Lag).
func SweepRhoLate(build func() Config, rhos []float64, lag time.Duration) (Outcome, []Outcome) {
	return sweepRho(build, rhos, func(r *Reference) { r.Lag = lag })
}

// SweepRhoCounted is SweepRho for a Reference told the load as it is
// counted (see Reference.Counted).
func SweepRhoCounted(build func() Config, rhos []float64) (Outcome, []Outcome) {
	return sweepRho(build, rhos, func(r *Reference) { r.Counted = true })
}

func sweepRho(build func() Config, rhos []float64, set func(*Reference)) (Outcome, []Outcome) {
	out := make([]Outcome, len(rhos))
	for i, rho := range rhos {
		cfg := build()
		r := NewReference(cfg, rho)
		set(r)
		cfg.Dimmer = r
		s := Run(cfg).Summary
		out[i] = Outcome{Setting: rho, InTime: s.InTime, OptionalShare: s.OptionalShare}
	}
	return best(out), out
}

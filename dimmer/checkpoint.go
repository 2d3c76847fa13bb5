package dimmer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/brownout/brownout/signals"
)

// CheckpointVersion is the version of Checkpoint's fields ("v"): a
// controller refuses to adopt a checkpoint of another version.
const CheckpointVersion = 1

// Checkpoint is what another controller needs to carry on where this one
// is (Controller.AdoptAt): the state it published, what its last step
// read and said, the operators' pins, freeze and shadow, and the law's
// estimates — the brightness, the learned costs, the capacity K and the
// priors' scale. brownoutd's replicas store one each tick (package
// internal/cluster), so that the replica that takes over from a leader
// continues from its levels and its estimates, not from full brightness
// and a cold model.
//
// Not in it: the load's tracker, the corrections' steps and the hold
// timers. A controller that adopts a checkpoint starts them afresh at the
// adopted brightness and K: it measures the load again, it never jumps.
// (A checkpoint written by a release with the search law carries a load
// mark and a "dimmed" flag: they are ignored, and its K of 0 is a
// capacity not yet known.)
//
// Its zero value is no checkpoint (AdoptAt refuses it). It encodes as
// JSON without loss; a NaN or an infinity is never in it.
type Checkpoint struct {
	V          int       `json:"v"`
	Generation uint64    `json:"generation"`
	Time       time.Time `json:"time"`
	// Published is the state as published (what OFREP serves).
	Published CheckpointState `json:"published"`
	// Status is the last step's own account (what Controller.Status
	// says): its mode, readings, reason, action and cause.
	Status CheckpointState `json:"status"`
	// Brightness is the law's brightness (under 0: the shed level).
	Brightness float64 `json:"brightness"`
	// The operators' state.
	Pins         []CheckpointPin `json:"pins"`
	Frozen       bool            `json:"frozen"`
	FreezeReason string          `json:"freeze_reason,omitempty"`
	Shadow       bool            `json:"shadow"`
	// Costs is the cost estimator's memory (see Controller.Costs).
	Costs CheckpointCosts `json:"costs"`
	// Capacity is the model law's K and Ĉ (0: unknown), Seconds whether
	// they count seconds of service, Scale the priors' scale (0: 1) and
	// ScaleVar the variance of its logarithm (0: nothing taught yet).
	// CapacityWork is the all-off request's work K was found at (0:
	// unknown), and CapacityHeld what a slower service took from K, given
	// back when it is fast again. Guessed: K is the cold rule's guess,
	// which the latency's room may raise (a checkpoint without it: K is
	// no such guess).
	Capacity      float64 `json:"capacity"`
	Saturated     float64 `json:"saturated"`
	CapacityWork  float64 `json:"capacity_work,omitempty"`
	CapacityHeld  float64 `json:"capacity_held,omitempty"`
	CapacityGrown float64 `json:"capacity_grown,omitempty"`
	Scale         float64 `json:"scale"`
	ScaleVar      float64 `json:"scale_var,omitempty"`
	Seconds       bool    `json:"seconds"`
	Guessed       bool    `json:"guessed,omitempty"`
	// PerRequest: Capacity is the work a request may take, not a second's
	// (the law had no load to measure it in: feedback only).
	PerRequest bool `json:"per_request,omitempty"`
	// Gated: the last period's source reported an admission gate (the
	// model's mode, measured or no-gate: see ModelEstimate). Absent from
	// a checkpoint written before it; adopted, such a checkpoint is taken
	// as gated when a saturated gate measured its Saturated.
	Gated *bool `json:"gated,omitempty"`
	// Load is the offered load the law last measured, requests a second
	// (0: none), and LoadVar its variance: a Capacity of work a second is
	// divided by it if the load stops coming after the checkpoint is
	// adopted, and the law goes on feedback only — where it stands two
	// standard errors over nothing.
	Load    float64 `json:"load,omitempty"`
	LoadVar float64 `json:"load_var,omitempty"`
}

// CheckpointState is a state in a Checkpoint: its mode, shed level,
// reason, action and cause, each feature's levels, and the readings.
type CheckpointState struct {
	Mode       string              `json:"mode"`
	Shed       float64             `json:"shed"`
	Reason     string              `json:"reason"`
	Action     string              `json:"action"`
	Cause      string              `json:"cause,omitempty"`
	Pressure   *float64            `json:"pressure,omitempty"`
	Features   []CheckpointFeature `json:"features"`
	Readings   []CheckpointReading `json:"readings,omitempty"`
	Segments   []string            `json:"segments,omitempty"`
	Brightness float64             `json:"brightness"`
}

// CheckpointFeature is one feature's levels in a CheckpointState.
type CheckpointFeature struct {
	Name     string    `json:"name"`
	Level    float64   `json:"level"`
	Computed float64   `json:"computed"`
	Mode     string    `json:"mode"`
	Segments []float64 `json:"segments,omitempty"`
	// PinReason and CapReason are the reasons of the pin and of the
	// binding cap ("": none).
	PinReason string `json:"pin_reason,omitempty"`
	Pinned    bool   `json:"pinned,omitempty"`
	CapReason string `json:"cap_reason,omitempty"`
}

// CheckpointReading is one reading in a CheckpointState; Value is absent
// when the signal was missing.
type CheckpointReading struct {
	Signal     string   `json:"signal"`
	Value      *float64 `json:"value,omitempty"`
	Target     float64  `json:"target"`
	Discounted bool     `json:"discounted,omitempty"`
}

// CheckpointPin is an operator's pin in a Checkpoint.
type CheckpointPin struct {
	Feature string    `json:"feature"`
	Level   float64   `json:"level"`
	Until   time.Time `json:"until"`
	Reason  string    `json:"reason"`
}

// CheckpointCosts is the cost estimator's memory: per feature, by name,
// the weighted sums of its contrasts; the all-off request's; and when it
// last folded a tick in.
type CheckpointCosts struct {
	Features []CheckpointCost `json:"features,omitempty"`
	Base     [3]float64       `json:"base"`
	Last     time.Time        `json:"last"`
}

// CheckpointCost is one feature's contrasts: weight, weighted sum,
// weighted spread, and the ticks contrasted.
type CheckpointCost struct {
	Feature string     `json:"feature"`
	Sums    [3]float64 `json:"sums"`
	Ticks   int        `json:"ticks"`
}

// Checkpoint returns the controller's checkpoint as of its last step or
// operator change. It allocates: call it once a tick, not on a request
// path.
func (c *Controller) Checkpoint() Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu
	pub := c.state.Load()
	cp := Checkpoint{V: CheckpointVersion, Generation: m.gen, Time: m.at, Published: stateOf(pub),
		Brightness: m.brightness, Frozen: m.frozen, FreezeReason: m.freezeWhy, Shadow: m.shadow, Pins: []CheckpointPin{},
		Capacity: m.mdl.capacity.k, Saturated: m.mdl.capacity.c, Seconds: m.mdl.capacity.seconds, Scale: m.mdl.scale, ScaleVar: m.mdl.scaleVar,
		CapacityWork: m.mdl.capacity.at, CapacityHeld: m.mdl.capacity.held, CapacityGrown: m.mdl.capacity.grown, Guessed: m.mdl.capacity.guessed,
		PerRequest: m.mdl.blind, Load: m.mdl.lastLoad, LoadVar: m.mdl.lastLoadVar}
	gated := m.mdl.gated
	cp.Gated = &gated
	cp.Status = stateOf(c.compose(c.reason(), m.gen))
	for _, name := range slices.Sorted(mapKeys(m.pins)) {
		p := m.pins[name]
		cp.Pins = append(cp.Pins, CheckpointPin{Feature: name, Level: p.Level, Until: p.Until, Reason: p.Reason})
	}
	k := m.costs
	cp.Costs = CheckpointCosts{Base: [3]float64{k.base.w, k.base.s, k.base.q}, Last: k.last}
	for i, f := range c.cfg.Features {
		if d := k.delta[i]; d.w > 0 || k.ticks[i] > 0 {
			cp.Costs.Features = append(cp.Costs.Features, CheckpointCost{Feature: f.Name, Sums: [3]float64{d.w, d.s, d.q}, Ticks: k.ticks[i]})
		}
	}
	return cp
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// finite is v, or 0 for a NaN or an infinity (JSON has neither).
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// stateOf is st as a CheckpointState.
func stateOf(st *State) CheckpointState {
	out := CheckpointState{Mode: st.core.mode.String(), Shed: st.core.shed, Reason: st.core.reason, Action: st.core.action.String(),
		Segments: slices.Clone(st.segNames), Brightness: finite(st.Brightness), Features: make([]CheckpointFeature, st.NumFeatures())}
	if st.core.causeOK {
		out.Cause = st.core.cause.String()
	}
	if st.PressureOK && !math.IsNaN(st.Pressure) && !math.IsInf(st.Pressure, 0) {
		p := st.Pressure
		out.Pressure = &p
	}
	for i := range out.Features {
		f := CheckpointFeature{Name: st.core.names[i], Level: st.core.levels[i], Computed: finite(st.core.computed[i]),
			Mode: st.core.modes[i].String(), Pinned: st.core.pinned[i], PinReason: st.core.pinReason[i], CapReason: st.core.capReason[i]}
		for j := range st.segNames {
			f.Segments = append(f.Segments, st.LevelAt(i, j))
		}
		out.Features[i] = f
	}
	for _, r := range st.Signals {
		cr := CheckpointReading{Signal: r.Signal.String(), Target: r.Target, Discounted: r.Discounted}
		if !r.Missing && !math.IsNaN(r.Value) && !math.IsInf(r.Value, 0) {
			v := r.Value
			cr.Value = &v
		}
		out.Readings = append(out.Readings, cr)
	}
	return out
}

// ErrCheckpoint: a checkpoint that cannot be adopted (another version,
// a mode or an action this controller does not know).
var ErrCheckpoint = errors.New("bad checkpoint")

// AdoptAt makes the controller carry on from cp at now, as if it had
// published cp's state itself: it publishes cp's generation with cp's
// levels (subscribers are told when the generation changed), and takes
// over its pins, freeze and shadow, its brightness, its learned costs and
// the law's capacity. Its next Step continues from there: the load's
// tracker and the hold timers start afresh (see Checkpoint).
//
// Features are matched by name. Where cp and the controller's
// configuration differ (a replica with another configuration), a feature
// cp lacks gets the level the adopted brightness gives it on this
// controller's ladder, and cp's features this configuration lacks are
// dropped, with their pins; segments likewise.
//
// It adopts cp whatever its generation: a caller that must never go back
// (a follower) compares generations first.
func (c *Controller) AdoptAt(now time.Time, cp Checkpoint) (*State, error) {
	if cp.V != CheckpointVersion {
		return nil, fmt.Errorf("dimmer: adopt: %w: version %d, want %d", ErrCheckpoint, cp.V, CheckpointVersion)
	}
	pubMode, ok1 := ParseMode(cp.Published.Mode)
	statMode, ok2 := ParseMode(cp.Status.Mode)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("dimmer: adopt: %w: mode %q or %q", ErrCheckpoint, cp.Published.Mode, cp.Status.Mode)
	}
	c.mu.Lock()
	m := &c.mu
	old := c.state.Load()
	m.brightness = max(min(finite(cp.Brightness), 1), -c.cfg.MaxShed)
	m.frozen, m.freezeWhy, m.shadow = cp.Frozen, cp.FreezeReason, cp.Shadow
	clear(m.pins)
	for _, p := range cp.Pins {
		if c.hasFeature(p.Feature) && now.Before(p.Until) {
			m.pins[p.Feature] = Pin{Level: min(max(finite(p.Level), 0), 1), Until: p.Until, Reason: p.Reason}
		}
	}
	c.adoptCosts(cp.Costs)
	m.mdl.capacity.k, m.mdl.capacity.c, m.mdl.capacity.seconds = finite(cp.Capacity), finite(cp.Saturated), cp.Seconds
	m.mdl.blind = cp.PerRequest
	// Whether a gate reports is the leader's (a replica that serves what
	// it adopts never steps to see for itself); a checkpoint from before
	// it was kept had one if a saturated gate measured its Ĉ.
	if cp.Gated != nil {
		m.mdl.gated = *cp.Gated
	} else {
		m.mdl.gated = m.mdl.capacity.c > 0
	}
	m.mdl.lastLoad, m.mdl.lastLoadVar = max(finite(cp.Load), 0), max(finite(cp.LoadVar), 0)
	if !m.mdl.blind {
		// K counts work a second: a period without the load right
		// after adopting it is no window without it.
		m.mdl.loadAt = now
	}
	m.mdl.capacity.at, m.mdl.capacity.held = max(finite(cp.CapacityWork), 0), max(finite(cp.CapacityHeld), 0)
	m.mdl.capacity.grown = max(finite(cp.CapacityGrown), 0)
	m.mdl.capacity.guessed = cp.Guessed && m.mdl.capacity.k > 0
	// (What was carried before K was known is a minute's evidence, not
	// in the checkpoint: this controller gathers its own.)
	m.mdl.capacity.beforeW, m.mdl.capacity.beforeSum, m.mdl.capacity.beforeVar = 0, 0, 0
	m.mdl.capacity.beforeAt = time.Time{}
	if cp.Scale > 0 && !math.IsInf(cp.Scale, 0) {
		m.mdl.scale = min(max(cp.Scale, 1/maxScale), maxScale)           // (the bounds a move teaches within)
		m.mdl.scaleVar = min(max(finite(cp.ScaleVar), 0), scalePriorVar) // (no surer than nothing taught)
	}
	m.mdl.capacity.reset(now, c.cfg.Hold)
	// The step's own account: its readings by signal, its mode, and its
	// words (the last step's why is the other controller's).
	for i := range m.readings {
		m.readings[i].Missing, m.readings[i].Discounted = true, false
		for _, r := range cp.Status.Readings {
			if r.Signal == m.readings[i].Signal.String() && r.Value != nil {
				m.readings[i].Value, m.readings[i].Missing, m.readings[i].Discounted = *r.Value, false, r.Discounted
				m.readings[i].Pressure = *r.Value / m.readings[i].Target
			}
		}
	}
	m.pressure, m.presOK = 0, cp.Status.Pressure != nil
	if m.presOK {
		m.pressure = *cp.Status.Pressure
	}
	m.mode, m.at = statMode, cp.Time
	act, cause, causeOK := parseAction(cp.Status)
	m.why = why{kind: whyAdopted}
	m.adopted = adopted{reason: cp.Status.Reason, action: act, cause: cause, causeOK: causeOK}
	// The hold timers start afresh. A stale state stays stale until a
	// signal comes.
	m.started, m.lastFresh = true, now
	if statMode == Stale {
		m.lastFresh = now.Add(-time.Duration(c.cfg.StaleAfter) * c.cfg.Tick)
	}
	m.overSince = time.Time{}
	c.schedule(now)
	st := c.adoptState(cp, pubMode)
	m.gen = cp.Generation
	c.store(st)
	var subs []chan *State
	if old == nil || old.core.gen != st.core.gen {
		for _, ch := range m.subs {
			subs = append(subs, ch)
		}
	}
	c.mu.Unlock()
	notify(subs, st)
	return st, nil
}

// adopted is what an adopted checkpoint's last step said (whyAdopted).
type adopted struct {
	reason  string
	action  Action
	cause   signals.Key
	causeOK bool
}

func parseAction(s CheckpointState) (Action, signals.Key, bool) {
	var a Action
	for i, n := range actionNames {
		if n == s.Action {
			a = Action(i)
		}
	}
	if s.Cause == "" {
		return a, 0, false
	}
	k, err := signals.ParseKey(s.Cause)
	return a, k, err == nil
}

// adoptCosts takes over the cost estimator's memory, by feature name.
// Callers hold the lock.
func (c *Controller) adoptCosts(k CheckpointCosts) {
	n := newCosts(c.cfg.Features)
	ok := func(s [3]float64) bool {
		return s[0] >= 0 && finite(s[0]) == s[0] && finite(s[1]) == s[1] && finite(s[2]) == s[2]
	}
	if ok(k.Base) {
		n.base = weighted{k.Base[0], k.Base[1], k.Base[2]}
	}
	n.last = k.Last
	for _, f := range k.Features {
		if i, found := n.index[f.Feature]; found && ok(f.Sums) && f.Ticks >= 0 {
			n.delta[i], n.ticks[i] = weighted{f.Sums[0], f.Sums[1], f.Sums[2]}, f.Ticks
		}
	}
	c.mu.costs = n
}

// adoptState builds the published state of cp in this controller's
// layout (its features and segments, matched by name). Callers hold the
// lock; schedule has run.
func (c *Controller) adoptState(cp Checkpoint, mode Mode) *State {
	m := &c.mu
	p := cp.Published
	nf, ns := len(c.cfg.Features), len(c.cfg.Segments)
	act, cause, causeOK := parseAction(p)
	st := &State{Generation: cp.Generation, Time: cp.Time, Mode: mode, Brightness: c.quantize(finite(p.Brightness)),
		Shed: min(max(finite(p.Shed), 0), 2), Reason: p.Reason, Action: act, Cause: cause, CauseOK: causeOK,
		Pressure: m.pressure, PressureOK: m.presOK, Signals: slices.Clone(m.readings),
		Features: make([]FeatureState, nf), index: make(map[string]int, nf), segIndex: make(map[string]int, ns), segNames: make([]string, ns)}
	st.core = stateCore{gen: cp.Generation, mode: mode, shed: st.Shed, reason: p.Reason, action: act, cause: cause, causeOK: causeOK,
		levels: make([]float64, nf+nf*ns), computed: make([]float64, nf), modes: make([]Mode, nf), pinned: make([]bool, nf),
		pinReason: make([]string, nf), names: make([]string, nf), capReason: make([]string, nf), active: slices.Clone(m.active)}
	for j, sg := range c.cfg.Segments {
		st.segIndex[sg.Name], st.segNames[j] = j, sg.Name
	}
	byName := make(map[string]*CheckpointFeature, len(p.Features))
	for i := range p.Features {
		byName[p.Features[i].Name] = &p.Features[i]
	}
	clamp := func(v float64) float64 { return min(max(finite(v), 0), 1) }
	for i, f := range c.cfg.Features {
		fs := FeatureState{Name: f.Name, Floor: f.Floor, Mode: mode, Segments: make([]float64, ns)}
		if cf, ok := byName[f.Name]; ok {
			fs.Level, fs.Computed = clamp(cf.Level), clamp(cf.Computed)
			if md, ok := ParseMode(cf.Mode); ok {
				fs.Mode = md
			}
			for j, sg := range c.cfg.Segments {
				fs.Segments[j] = fs.Level
				if k := slices.Index(p.Segments, sg.Name); k >= 0 && k < len(cf.Segments) {
					fs.Segments[j] = clamp(cf.Segments[k])
				}
			}
			st.core.pinReason[i], st.core.capReason[i] = cf.PinReason, cf.CapReason
			st.core.pinned[i] = cf.Pinned
		} else {
			fs.Level = c.quantize(c.ladder(i, m.brightness))
			fs.Computed = fs.Level
			for j := range c.cfg.Segments {
				fs.Segments[j] = c.quantize(c.ladder(i, m.brightness+c.cfg.Segments[j].Offset))
			}
		}
		if pin, ok := m.pins[f.Name]; ok && st.core.pinned[i] {
			fs.Pin = &pin
		} else {
			st.core.pinned[i], st.core.pinReason[i] = false, ""
		}
		if r := st.core.capReason[i]; r != "" {
			fs.Cap = &Cap{Feature: f.Name, Max: fs.Level, Reason: r}
			if k := m.capBy[i]; k >= 0 {
				cp := c.cfg.Schedule[k]
				fs.Cap = &cp
			}
		}
		st.core.levels[i], st.core.computed[i], st.core.modes[i], st.core.names[i] = fs.Level, fs.Computed, fs.Mode, f.Name
		copy(st.core.levels[nf+i*ns:nf+(i+1)*ns], fs.Segments)
		st.Features[i], st.index[f.Name] = fs, i
	}
	return st
}

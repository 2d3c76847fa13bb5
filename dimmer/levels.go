package dimmer

import (
	"log/slog"
	"math"
	"slices"
	"time"
)

func notify(subs []chan *State, st *State) {
	for _, ch := range subs {
		for {
			select {
			case ch <- st:
			default:
				select { // full: drop the older state and retry
				case <-ch:
				default:
				}
				continue
			}
			break
		}
	}
}

// span returns feature i's stretch [lo, hi] of the brightness scale: the
// first feature of the ladder occupies the top.
func (c *Controller) span(i int) (lo, hi float64) {
	s := c.spans[i]
	return s[0], s[1]
}

// spans computes every feature's stretch once per configuration (span
// reads it on every step for every feature): feature i spans its share of
// the total cost, below the features before it.
func spans(fs []Feature) [][2]float64 {
	var total float64
	for _, f := range fs {
		total += f.Cost
	}
	out := make([][2]float64, len(fs))
	var before float64
	for i, f := range fs {
		hi := 1 - before/total
		out[i] = [2]float64{hi - f.Cost/total, hi}
		before += f.Cost
	}
	return out
}

// ladder maps a brightness to feature i's level.
func (c *Controller) ladder(i int, b float64) float64 {
	lo, hi := c.span(i)
	l := (b - lo) / (hi - lo)
	return max(min(l, 1), c.cfg.Features[i].Floor, 0) // below 0 is the cascade
}

// dimming returns the feature whose stretch holds brightness b.
func (c *Controller) dimming(b float64) int {
	for i := range c.cfg.Features {
		if lo, _ := c.span(i); b > lo {
			return i
		}
	}
	return len(c.cfg.Features) - 1
}

// quantize rounds v to the quantum. A quantum of 1/n (the default 0.01,
// 0.05, 0.1) divides by n, so that a level reads as the decimal it is
// (0.57, where 57 × 0.01 is 0.5700000000000001 in JSON and OFREP).
func (c *Controller) quantize(v float64) float64 {
	q := c.cfg.Quantum
	k := math.Round(v / q)
	if n := math.Round(1 / q); n*q == 1 {
		return k/n + 0 // + 0: never −0
	}
	return k*q + 0
}

// levels fills m.levels with what the current mode publishes: per feature,
// then per feature and segment; and m.binds with whether a scheduled cap
// holds each feature down. Precedence: a pin, then shadow mode (nothing
// applied), then a freeze (levels held as published), then the scheduled
// caps over the law (or over the levels held while stale). Callers hold
// the lock.
func (c *Controller) levels() []float64 {
	m := &c.mu
	old := c.state.Load()
	nf, ns := len(c.cfg.Features), len(c.cfg.Segments)
	out := m.levels
	// Each segment's probe is the one at its own brightness: none for a
	// segment its offset holds at its floors, and its probe up budgeted
	// by the optional work its levels give, not the main ones' — and none
	// at all while the main levels are at their floors (shedding next).
	probe := c.probeAt(m.brightness)
	for j, sg := range c.cfg.Segments {
		m.segProbe[j] = probeLevels{}
		if probe != (probeLevels{}) {
			m.segProbe[j] = c.probeAt(m.brightness + sg.Offset)
		}
	}
	for i, f := range c.cfg.Features {
		seg := out[nf+i*ns : nf+(i+1)*ns]
		pin, pinned := m.pins[f.Name]
		m.binds[i] = false
		switch {
		case pinned:
			out[i] = pin.Level
			for j := range seg {
				seg[j] = pin.Level
			}
			continue
		case m.mode == Shadow:
			out[i] = 1
			for j := range seg {
				seg[j] = 1
			}
			continue
		case (m.mode == Stale || m.mode == Frozen) && !c.wasPinned(old, i) && c.held(old, i, &out[i], seg):
			// Hold what was published; while stale a cap still applies
			// (it only lowers levels).
			if m.mode == Frozen {
				continue
			}
		default:
			out[i] = c.quantize(c.lit(i, m.brightness, probe))
			for j := range seg {
				seg[j] = c.quantize(c.lit(i, m.brightness+c.cfg.Segments[j].Offset, m.segProbe[j]))
			}
		}
		if m.capBy[i] < 0 {
			continue
		}
		cp := m.caps[i]
		m.binds[i] = out[i] >= cp
		out[i] = min(out[i], cp)
		for j := range seg {
			seg[j] = min(seg[j], cp)
		}
	}
	return out
}

// held copies feature i's published levels from old into lv and seg and
// reports whether old had the feature. After a Reconfigure changed the
// features or segments it matches them by name; a new segment holds what
// its users got before, the feature's level for everyone.
// wasPinned reports whether feature i was pinned in old: its published
// level was the operator's, not the law's, so once the pin is gone the
// law takes the feature back even while stale or frozen (holding the pin's
// level would keep an incident's override with no end).
func (c *Controller) wasPinned(old *State, i int) bool {
	if old == nil {
		return false
	}
	k, ok := i, !c.mu.relayout
	if !ok {
		k, ok = old.index[c.cfg.Features[i].Name]
	}
	return ok && k < len(old.core.pinned) && old.core.pinned[k]
}

func (c *Controller) held(old *State, i int, lv *float64, seg []float64) bool {
	if old == nil {
		return false
	}
	if !c.mu.relayout {
		nf, ns := len(c.cfg.Features), len(c.cfg.Segments)
		*lv = old.core.levels[i]
		copy(seg, old.core.levels[nf+i*ns:nf+(i+1)*ns])
		return true
	}
	k, ok := old.index[c.cfg.Features[i].Name]
	if !ok {
		return false
	}
	*lv = old.LevelAt(k, -1)
	for j, sg := range c.cfg.Segments {
		seg[j] = *lv
		if kj, ok := old.segIndex[sg.Name]; ok {
			seg[j] = old.LevelAt(k, kj)
		}
	}
	return true
}

// computed is feature i's level by the law under the scheduled caps
// (FeatureState.Computed).
func (c *Controller) computed(i int) float64 {
	b := c.mu.brightness
	return min(c.quantize(c.lit(i, b, c.probeAt(b))), c.mu.caps[i])
}

// featureMode is feature i's mode; levels must have run. Callers hold the
// lock.
func (c *Controller) featureMode(i int, pinned bool) Mode {
	switch {
	case pinned:
		return Override
	case c.mu.binds[i]:
		return Scheduled
	}
	return c.mu.mode
}

// shedLevel is the shed level the current mode publishes.
func (c *Controller) shedLevel() float64 {
	m := &c.mu
	switch m.mode {
	case Shadow:
		return 0
	case Stale, Frozen:
		if old := c.state.Load(); old != nil {
			return old.core.shed
		}
	}
	return c.quantize(max(-m.brightness, 0))
}

// same reports whether publishing now would change nothing a reader acts
// on. It does not allocate.
func (c *Controller) same(old *State) bool {
	m := &c.mu
	if old == nil {
		return false
	}
	o := &old.core // never the exported fields: a caller may have changed them
	if o.mode != m.mode || o.shed != c.shedLevel() || len(o.names) != len(c.cfg.Features) || !slices.Equal(o.active, m.active) {
		return false
	}
	if a, k, ok := c.action(); a != o.action || ok != o.causeOK || (ok && k != o.cause) {
		return false
	}
	lv := c.levels()
	for i, f := range c.cfg.Features {
		_, pinned := m.pins[f.Name]
		// Computed counts too: in shadow mode it is what observers watch.
		if o.computed[i] != c.computed(i) || o.pinned[i] != pinned || o.modes[i] != c.featureMode(i, pinned) {
			return false
		}
	}
	return slices.Equal(o.levels, lv)
}

// compose builds a state with generation gen. Callers hold the lock (or
// own c).
func (c *Controller) compose(reason string, gen uint64) *State {
	m := &c.mu
	lv := c.levels()
	nf, ns := len(c.cfg.Features), len(c.cfg.Segments)
	st := &State{
		Generation: gen, Time: m.at, Mode: m.mode, Brightness: c.quantize(m.brightness),
		Pressure: m.pressure, PressureOK: m.presOK, Shed: c.shedLevel(),
		Signals: slices.Clone(m.readings), Reason: reason,
		Features: make([]FeatureState, nf),
		index:    make(map[string]int, nf),
		segIndex: make(map[string]int, ns),
		segNames: make([]string, ns),
	}
	st.Action, st.Cause, st.CauseOK = c.action()
	st.core = stateCore{
		gen: gen, mode: m.mode, shed: st.Shed, reason: reason,
		action: st.Action, cause: st.Cause, causeOK: st.CauseOK,
		levels: slices.Clone(lv), computed: make([]float64, nf),
		modes: make([]Mode, nf), pinned: make([]bool, nf), pinReason: make([]string, nf), names: make([]string, nf),
		capReason: make([]string, nf), active: slices.Clone(m.active),
	}
	for j, sg := range c.cfg.Segments {
		st.segIndex[sg.Name] = j
		st.segNames[j] = sg.Name
	}
	for i, f := range c.cfg.Features {
		pin, pinned := m.pins[f.Name]
		fs := FeatureState{
			Name: f.Name, Level: lv[i], Computed: c.computed(i), Floor: f.Floor, Mode: c.featureMode(i, pinned),
			Segments: slices.Clone(lv[nf+i*ns : nf+(i+1)*ns]),
		}
		if pinned {
			fs.Pin = &pin
			st.core.pinned[i], st.core.pinReason[i] = true, pin.Reason
		}
		if fs.Mode == Scheduled {
			p := c.cfg.Schedule[m.capBy[i]]
			fs.Cap = &p
			st.core.capReason[i] = p.Reason
		}
		st.core.computed[i], st.core.modes[i], st.core.names[i] = fs.Computed, fs.Mode, f.Name
		st.Features[i] = fs
		st.index[f.Name] = i
	}
	return st
}

// Status returns the state as of the last step, with that step's readings
// and reason even when nothing changed (the published State keeps those of
// the last change). It allocates: for operators, not request paths.
func (c *Controller) Status() *State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compose(c.reason(), c.mu.gen)
}

// republish publishes the state after an operator action and tells
// subscribers.
func (c *Controller) republish(now time.Time, reason string) *State {
	c.mu.Lock()
	st, subs, log := c.publish(now, reason)
	c.mu.Unlock()
	log.Info("dimmer: operator", "generation", st.Generation, "reason", reason)
	notify(subs, st)
	return st
}

// publish publishes a new state at now with reason, and returns it with
// the subscribers to tell and the logger to log to once the lock is
// released. Callers hold the lock.
func (c *Controller) publish(now time.Time, reason string) (*State, []chan *State, *slog.Logger) {
	m := &c.mu
	switch {
	case m.frozen:
		m.mode = Frozen
	case m.shadow:
		m.mode = Shadow
	case m.mode == Frozen || m.mode == Shadow:
		m.mode = Auto
	}
	c.expirePins(now)
	c.schedule(now)
	m.at = later(m.at, now)
	m.gen++
	st := c.compose(reason, m.gen)
	c.store(st)
	subs := make([]chan *State, 0, len(m.subs))
	for _, ch := range m.subs {
		subs = append(subs, ch)
	}
	return st, subs, c.cfg.Logger
}

// later returns the later of a state's time and now: a state's Time never
// goes back. A daemon's tick takes its now before it steps, and an
// operator's change at a later now may be published in between: the
// tick's state, of a higher generation, then carried an older time.
func later(at, now time.Time) time.Time {
	if now.After(at) {
		return now
	}
	return at
}

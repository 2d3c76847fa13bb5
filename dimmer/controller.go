package dimmer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/signals"
)

// Source gives the controller its signals; signals.ScrapeSource and
// signals.PromQLSource are Sources, and Local wraps a signals.Recorder.
type Source interface {
	Snapshot(ctx context.Context, now time.Time) (signals.Snapshot, error)
}

// Local adapts a process's own Recorder to a Source.
func Local(r *signals.Recorder) Source { return local{r} }

type local struct{ r *signals.Recorder }

func (l local) Snapshot(_ context.Context, now time.Time) (signals.Snapshot, error) {
	return l.r.Snapshot(now), nil
}

// Controller is the brownout controller. See the package documentation for
// the model and the control law.
//
// Request paths read the published State with State, a single atomic load.
// Step, Run and the operator methods serialize on a mutex; subscribers are
// told of changes after it is released.
//
// A Controller must be made with New. It is safe for concurrent use.
type Controller struct {
	cfg   Config
	state atomic.Pointer[State]

	mu controllerState
}

// controllerState is the controller's mutable part, guarded by its mutex.
type controllerState struct {
	sync.Mutex
	brightness float64
	prevErr    float64
	roomSince  time.Time // headroom at the gate since; zero when not
	underSince time.Time // pressure under Low since; zero when not
	loadMark   float64   // offered load at the last dimming step; 0 if none
	lastDim    time.Time // when the last dimming step was
	lastRise   time.Time // when the last brightening step was
	overSince  time.Time // cascade pressure held since; zero when not
	lastFresh  time.Time
	started    bool
	frozen     bool
	freezeWhy  string
	shadow     bool
	pins       map[string]Pin
	gen        uint64
	subs       map[int]chan *State
	nextSub    int

	// The last step's observations, reused every period.
	readings []Reading
	pressure float64
	presOK   bool
	busy     float64 // the room signal, when busyOK
	busyOK   bool
	mode     Mode
	why      why
	at       time.Time
	levels   []float64 // scratch: per feature, then per feature × segment
}

// why is the reason for a step, kept as data so that a step that changes
// nothing formats nothing.
type why struct {
	kind    whyKind
	top     int // index of the dominating reading
	feature int // feature being dimmed or brightened
	held    time.Duration
	load    float64 // the offered load now, and the mark
	mark    float64
}

type whyKind uint8

const (
	whyStart whyKind = iota
	whyNoSignal
	whyStale
	whyFrozen
	whyCascade
	whyDim
	whyFloor
	whyFloorRoom
	whyHoldUnder
	whyUnshed
	whyUnshedRoom
	whyUnshedLoad
	whyFull
	whyBrighten
	whyProbe
	whyLoadHeld
	whyBand
	whySettle
	whyNearAtLowerLoad
)

// New checks cfg and returns a controller at full brightness.
func New(cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg}
	c.mu.brightness = 1
	c.mu.pins = map[string]Pin{}
	c.mu.subs = map[int]chan *State{}
	c.mu.readings = make([]Reading, len(cfg.Targets))
	for i, t := range cfg.Targets {
		c.mu.readings[i] = Reading{Signal: t.Signal, Target: t.Target, Missing: true}
	}
	c.mu.levels = make([]float64, len(cfg.Features)*(1+len(cfg.Segments)))
	c.mu.gen = 1
	c.state.Store(c.compose("starting at full brightness", 1))
	return c, nil
}

// Config returns a copy of the configuration with defaults filled in and
// the features in ladder order; changing it does not change the controller.
func (c *Controller) Config() Config { return c.cfg.clone() }

// ShedLevel returns the published cascade level (State.Shed) from the
// state's own copy: one atomic load, for shed.Config.ShedLevel.
func (c *Controller) ShedLevel() float64 { return c.state.Load().core.shed }

// State returns the published state. It is one atomic load and does not
// allocate: call it on the request path.
func (c *Controller) State() *State { return c.state.Load() }

// Subscribe returns a channel that receives the newest state after each
// published change, and a function that ends the subscription. The channel
// holds one state: a slow reader misses intermediate states but always gets
// the latest, and never blocks the controller.
func (c *Controller) Subscribe() (<-chan *State, func()) {
	ch := make(chan *State, 1)
	c.mu.Lock()
	id := c.mu.nextSub
	c.mu.nextSub++
	c.mu.subs[id] = ch
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.mu.subs, id)
		c.mu.Unlock()
	}
}

// Run steps the controller every Tick with a snapshot from src, until ctx is
// done. A source error is logged; its snapshot (with the failed signals
// missing) is still used, so that the controller goes stale only when no
// signal arrives. Run returns only when ctx ends, and then returns ctx's
// error.
func (c *Controller) Run(ctx context.Context, src Source) error {
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			sctx, cancel := context.WithTimeout(ctx, c.cfg.Tick)
			snap, err := src.Snapshot(sctx, now)
			cancel()
			if err != nil {
				c.cfg.Logger.Warn("dimmer: signals", "err", err)
			}
			c.Step(now, snap)
		}
	}
}

// Step runs one control period at now on snapshot s and returns the
// published state. It reads no clock and does no I/O.
func (c *Controller) Step(now time.Time, s signals.Snapshot) *State {
	c.mu.Lock()
	st, changed := c.step(now, s)
	var subs []chan *State
	if changed {
		for _, ch := range c.mu.subs {
			subs = append(subs, ch)
		}
	}
	c.mu.Unlock()
	if changed { // never log under the lock: a slow handler would stall every reader of Status
		c.cfg.Logger.Info("dimmer: levels changed", "generation", st.Generation, "brightness", st.Brightness,
			"shed", st.Shed, "mode", st.Mode.String(), "action", st.Action.String(), "reason", st.Reason)
	}
	notify(subs, st)
	return st
}

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

// pressure reads the targets from s into the readings and returns the
// largest pressure, and the largest over the targets that may drive the
// cascade. A snapshot older than StaleAfter periods counts as no snapshot.
// With room at the gate, DimOnly targets are read but not counted (their
// refusals are an overload that is over).
func (c *Controller) pressure(now time.Time, s signals.Snapshot, room bool) (p, cascade float64, ok bool, top int) {
	old := !s.Time.IsZero() && now.Sub(s.Time) >= time.Duration(c.cfg.StaleAfter)*c.cfg.Tick
	for i, t := range c.cfg.Targets {
		v, present := s.Get(t.Signal)
		present = present && !old
		c.mu.readings[i] = Reading{Signal: t.Signal, Value: v, Target: t.Target, Missing: !present}
		if !present {
			continue
		}
		pr := v / t.Target
		c.mu.readings[i].Pressure = pr
		if room && t.DimOnly {
			c.mu.readings[i].Discounted = true
			continue
		}
		if !ok || pr > p {
			p, ok, top = pr, true, i
		}
		if !t.DimOnly {
			cascade = max(cascade, pr)
		}
	}
	return p, cascade, ok, top
}

// step is Step under the lock. It reports whether the published state
// changed; it allocates only then.
func (c *Controller) step(now time.Time, s signals.Snapshot) (*State, bool) {
	m := &c.mu
	cfg := &c.cfg
	if !m.started {
		m.started, m.lastFresh = true, now
	}
	c.expirePins(now)
	busy, busyOK := s.Get(cfg.RoomSignal)
	if busy < 0 || busy > 1 {
		busyOK = false // not a share: ignore it
	}
	room := busyOK && busy < cfg.RoomBelow
	saturated := !busyOK || busy >= cfg.SaturatedAt
	// Headroom: room at the gate and at most half its limit in use —
	// twice the work per request would still fit.
	util, utilOK := s.Get(signals.GateUtilization)
	// It counts once it has held for Hold: a lull of a second in an
	// overload (the queue drained, nothing in flight) is not headroom.
	if room && utilOK && util >= 0 && util < cfg.Headroom {
		if m.roomSince.IsZero() {
			m.roomSince = now
		}
	} else {
		m.roomSince = time.Time{}
	}
	headroom := !m.roomSince.IsZero() && now.Sub(m.roomSince) >= cfg.Hold
	m.busy, m.busyOK = busy, busyOK
	p, pc, ok, top := c.pressure(now, s, room)
	m.pressure, m.presOK, m.at = p, ok, now
	m.mode = Auto
	switch {
	case m.frozen:
		// The operator's freeze holds, signal or not.
		if ok {
			m.lastFresh = now
		}
		m.mode, m.why = Frozen, why{kind: whyFrozen}
	case !ok:
		// Nothing measured: hold; after StaleAfter periods, say so.
		m.underSince, m.overSince = time.Time{}, time.Time{}
		m.why = why{kind: whyNoSignal, held: now.Sub(m.lastFresh)}
		if now.Sub(m.lastFresh) >= time.Duration(cfg.StaleAfter)*cfg.Tick {
			m.mode, m.why.kind = Stale, whyStale
		}
	default:
		m.lastFresh = now
		load, loadOK := s.Get(cfg.LoadSignal)
		if !loadOK || load < 0 {
			load = -1
		}
		m.why = c.control(now, p, pc, top, load, room, saturated, headroom)
	}
	if m.shadow && m.mode == Auto {
		m.mode = Shadow
	}
	old := c.state.Load()
	if c.same(old) {
		return old, false
	}
	m.gen++
	st := c.compose(c.reason(), m.gen)
	c.state.Store(st)
	return st, true
}

// control applies the law for one period: p is the pressure, pc the
// pressure of the targets that may drive the cascade, load the offered
// load (negative when unknown); room and saturated say whether the
// admission gate has room and whether it is full, headroom whether it
// would take twice the work in flight.
func (c *Controller) control(now time.Time, p, pc float64, top int, load float64, room, saturated, headroom bool) why {
	m := &c.mu
	cfg := &c.cfg
	dt := cfg.Tick.Seconds()
	e := p - cfg.Setpoint
	rise := e - m.prevErr
	m.prevErr = e
	b := m.brightness
	if b < 1 && load >= 0 && load >= m.loadMark*(1-cfg.LoadMargin) {
		// Dimmed, and the load has not dropped: follow it with an EWMA
		// (weight markWeight). An average, not a maximum: a windowed rate
		// is noisy, and a mark inflated by noise would make ordinary load
		// look like a drop. Once the load drops below the margin the mark
		// stays, so that the drop is seen.
		if m.loadMark == 0 {
			m.loadMark = load
		}
		if m.loadMark > 0 && load > m.loadMark*(1+cfg.LoadMargin) {
			// The load rose while dimmed: the overload is heavier than
			// the one that forced dimming. Probing waits ProbeAfter from
			// now, not from the last dimming step.
			m.lastDim = now
		}
		m.loadMark += markWeight * (load - m.loadMark)
	}
	w := why{top: top, load: load, mark: m.loadMark}

	if b < 0 {
		// Shedding. It stops as soon as it no longer helps: at once when
		// the load that forced it has gone, quickly when latency is back
		// under target or the gate has room (then latency over target is
		// the app's own service time, which refusing does not lower).
		up, unwind := cfg.UnshedRate*dt, true
		switch {
		case load >= 0 && m.loadMark > 0 && load < m.loadMark*(1-cfg.LoadMargin):
			m.brightness, w.kind = 0, whyUnshedLoad
		case room:
			m.brightness, w.kind = min(b+up, 0), whyUnshedRoom
		case pc < 1:
			m.brightness, w.kind = min(b+up, 0), whyUnshed
		default:
			unwind = false
		}
		if unwind {
			m.overSince, m.underSince = time.Time{}, time.Time{}
			return w
		}
	}

	switch {
	case p >= cfg.High:
		m.underSince = time.Time{}
		step := cfg.DownGain*e*dt + cfg.Proportional*max(rise, 0)
		settling := !m.lastRise.IsZero() && now.Sub(m.lastRise) < cfg.Settle
		fallen := m.loadMark > 0 && load >= 0 && load < m.loadMark*(1-cfg.LoadMargin)
		if b > 0 && p < 1 && (settling || fallen) {
			// Near target, not over it, within a latency window of our
			// own brightening (its effect, and the window's noise, are
			// still settling in), or at a load well below the one that
			// forced dimming (this is that load's own operating point,
			// not a new overload): hold. Over target it dims at once.
			m.overSince = time.Time{}
			w.kind = whySettle
			if fallen && !settling {
				w.kind = whyNearAtLowerLoad
			}
			return w
		}
		if b > 0 {
			w.kind, w.feature = whyDim, c.dimming(b)
			m.brightness = max(b-step, 0) // the floor stops the features
			m.overSince = time.Time{}
			m.markDim(now, load)
			return w
		}
		// Every feature at its floor: the cascade, only when pressure
		// stays over CascadeAt and the gate is full.
		if pc < cfg.CascadeAt || b <= -cfg.MaxShed {
			m.overSince = time.Time{}
			w.kind = whyFloor
			return w
		}
		if !saturated {
			m.overSince = time.Time{}
			w.kind = whyFloorRoom
			return w
		}
		if m.overSince.IsZero() {
			m.overSince = now
		}
		if now.Sub(m.overSince) < cfg.CascadeHold {
			w.kind, w.held = whyFloor, now.Sub(m.overSince)
			return w
		}
		m.brightness = max(b-cfg.CascadeGain*(pc-cfg.Setpoint)*dt, -cfg.MaxShed)
		m.markDim(now, load)
		w.kind = whyCascade
	case p < cfg.Low:
		m.overSince = time.Time{}
		if m.underSince.IsZero() {
			m.underSince = now
		}
		w.held = now.Sub(m.underSince)
		if w.held < cfg.Hold {
			w.kind = whyHoldUnder
			return w
		}
		if b >= 1 {
			m.loadMark = 0 // the episode is over
			w.kind = whyFull
			return w
		}
		up := min(cfg.UpGain*(-e)*dt, cfg.MaxRise*dt)
		if m.loadMark > 0 && load >= 0 && load > m.loadMark*(1-cfg.LoadMargin) && !headroom {
			// The load that forced dimming is still here (and the gate
			// does not show room for twice the work in flight).
			if now.Sub(m.lastDim) < cfg.ProbeAfter {
				w.kind = whyLoadHeld
				return w
			}
			up = min(up, cfg.ProbeRise*dt)
			w.kind = whyProbe
		}
		m.brightness = min(b+up, 1)
		m.lastRise = now
		w.feature = c.dimming(m.brightness)
		if w.kind != whyProbe {
			w.kind = whyBrighten
		}
	default:
		m.underSince, m.overSince = time.Time{}, time.Time{}
		w.kind = whyBand
	}
	return w
}

// markDim remembers when the last dimming step was.
func (m *controllerState) markDim(now time.Time, _ float64) { m.lastDim = now }

// markWeight is the weight of the newest load in the load mark's EWMA.
const markWeight = 0.3

// action maps the last step's why to what the law did, and its cause.
// Callers hold the lock.
func (c *Controller) action() (Action, signals.Key, bool) {
	w := c.mu.why
	var a Action
	switch w.kind {
	case whyDim:
		a = Dim
	case whyCascade:
		a = Shed
	case whyBrighten, whyProbe, whyUnshed, whyUnshedRoom, whyUnshedLoad:
		a = Brighten
	}
	if w.kind < whyCascade || w.kind == whyUnshedLoad || w.top >= len(c.mu.readings) {
		return a, 0, false
	}
	return a, c.mu.readings[w.top].Signal, true
}

// reason formats the last step's why. Callers hold the lock.
func (c *Controller) reason() string {
	m := &c.mu
	w := m.why
	cfg := &c.cfg
	sig := ""
	if w.kind >= whyCascade {
		sig = describe(m.readings[w.top])
	}
	var r string
	switch w.kind {
	case whyStart:
		r = "starting at full brightness"
	case whyNoSignal:
		r = "no signal this period: holding levels"
	case whyStale:
		r = fmt.Sprintf("no signal for %s: stale, holding levels", w.held.Round(time.Millisecond))
	case whyFrozen:
		r = "frozen by operator: " + m.freezeWhy
	case whyCascade:
		r = fmt.Sprintf("%s with every feature at its floor: shedding %s", sig, shedName(-m.brightness))
	case whyDim:
		r = fmt.Sprintf("%s: dimming %s", sig, cfg.Features[w.feature].Name)
	case whyFloor:
		r = fmt.Sprintf("%s: every feature at its floor, shedding %s", sig, shedName(-m.brightness))
	case whyHoldUnder:
		r = fmt.Sprintf("%s: under %.0f%% of target for %s of %s, holding", sig, 100*cfg.Low, w.held.Round(time.Millisecond), cfg.Hold)
	case whyUnshed:
		r = fmt.Sprintf("%s: back under target, unwinding the cascade: shedding %s", sig, shedName(-m.brightness))
	case whyUnshedRoom:
		r = fmt.Sprintf("%s, but the gate has room (%.0f%% of arrivals waited): shedding does not lower this latency, unwinding: shedding %s",
			sig, 100*m.busy, shedName(-m.brightness))
	case whyUnshedLoad:
		r = fmt.Sprintf("load %.4g/s fell below the %.4g/s that forced shedding: shedding nothing", w.load, w.mark)
	case whyFloorRoom:
		r = fmt.Sprintf("%s: every feature at its floor, but the gate has room (%.0f%% of arrivals waited): not shedding", sig, 100*m.busy)
	case whyFull:
		r = sig + ": full brightness"
	case whyBrighten:
		r = fmt.Sprintf("%s: brightening %s", sig, cfg.Features[w.feature].Name)
	case whyProbe:
		r = fmt.Sprintf("%s, load %.4g/s still near the %.4g/s that forced dimming: probing with %s", sig, w.load, w.mark, cfg.Features[w.feature].Name)
	case whyLoadHeld:
		r = fmt.Sprintf("%s, but load %.4g/s is still near the %.4g/s that forced dimming: holding", sig, w.load, w.mark)
	case whyBand:
		r = fmt.Sprintf("%s: within %.0f–%.0f%% of target, holding", sig, 100*cfg.Low, 100*cfg.High)
	case whySettle:
		r = fmt.Sprintf("%s: near target after brightening, holding while it settles", sig)
	case whyNearAtLowerLoad:
		r = fmt.Sprintf("%s, near target at load %.4g/s, well under the %.4g/s that forced dimming: holding", sig, w.load, w.mark)
	}
	if m.mode == Shadow {
		r = "shadow (nothing applied): " + r
	}
	return r
}

func shedName(level float64) string {
	switch {
	case level <= 0:
		return "nothing"
	case level <= 1:
		return fmt.Sprintf("%.0f%% of sheddable requests", 100*level)
	}
	return fmt.Sprintf("every sheddable and %.0f%% of default requests", 100*(level-1))
}

// describe renders a reading, e.g. "latency.p99 1.3s > 1s target".
func describe(r Reading) string {
	val, tgt := fmtValue(r.Signal, r.Value), fmtValue(r.Signal, r.Target)
	rel := "<"
	switch {
	case r.Value > r.Target:
		rel = ">"
	case r.Value == r.Target:
		rel = "="
	}
	return fmt.Sprintf("%s %s %s %s target", r.Signal, val, rel, tgt)
}

func fmtValue(k signals.Key, v float64) string {
	if k.IsDuration() {
		d := time.Duration(v * float64(time.Second))
		switch {
		case d >= time.Second:
			return d.Round(10 * time.Millisecond).String()
		case d >= time.Millisecond:
			return d.Round(time.Millisecond).String()
		}
		return d.Round(time.Microsecond).String()
	}
	return fmt.Sprintf("%.3g", v)
}

// span returns feature i's stretch [lo, hi] of the brightness scale: the
// first feature of the ladder occupies the top.
func (c *Controller) span(i int) (lo, hi float64) {
	var total, before float64
	for j, f := range c.cfg.Features {
		total += f.Cost
		if j < i {
			before += f.Cost
		}
	}
	hi = 1 - before/total
	return hi - c.cfg.Features[i].Cost/total, hi
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

func (c *Controller) quantize(v float64) float64 {
	q := c.cfg.Quantum
	return math.Round(v/q) * q
}

// levels fills m.levels with what the current mode publishes: per feature,
// then per feature and segment. Callers hold the lock.
func (c *Controller) levels() []float64 {
	m := &c.mu
	old := c.state.Load()
	nf, ns := len(c.cfg.Features), len(c.cfg.Segments)
	out := m.levels
	for i, f := range c.cfg.Features {
		seg := out[nf+i*ns : nf+(i+1)*ns]
		pin, pinned := m.pins[f.Name]
		switch {
		case pinned:
			out[i] = pin.Level
			for j := range seg {
				seg[j] = pin.Level
			}
		case m.mode == Shadow:
			out[i] = 1
			for j := range seg {
				seg[j] = 1
			}
		case (m.mode == Stale || m.mode == Frozen) && old != nil:
			// Hold what was published.
			out[i] = old.core.levels[i]
			copy(seg, old.core.levels[nf+i*ns:nf+(i+1)*ns])
		default:
			out[i] = c.quantize(c.ladder(i, m.brightness))
			for j := range seg {
				seg[j] = c.quantize(c.ladder(i, m.brightness+c.cfg.Segments[j].Offset))
			}
		}
	}
	return out
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
	if o.mode != m.mode || o.shed != c.shedLevel() {
		return false
	}
	if a, k, ok := c.action(); a != o.action || ok != o.causeOK || (ok && k != o.cause) {
		return false
	}
	lv := c.levels()
	for i, f := range c.cfg.Features {
		_, pinned := m.pins[f.Name]
		// Computed counts too: in shadow mode it is what observers watch.
		if o.computed[i] != c.quantize(c.ladder(i, m.brightness)) || o.pinned[i] != pinned {
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
	}
	for j, sg := range c.cfg.Segments {
		st.segIndex[sg.Name] = j
		st.segNames[j] = sg.Name
	}
	for i, f := range c.cfg.Features {
		fs := FeatureState{
			Name: f.Name, Level: lv[i], Computed: c.quantize(c.ladder(i, m.brightness)), Floor: f.Floor, Mode: m.mode,
			Segments: slices.Clone(lv[nf+i*ns : nf+(i+1)*ns]),
		}
		if pin, ok := m.pins[f.Name]; ok {
			fs.Mode, fs.Pin = Override, &pin
			st.core.pinned[i], st.core.pinReason[i] = true, pin.Reason
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

func (c *Controller) expirePins(now time.Time) {
	for name, p := range c.mu.pins {
		if !now.Before(p.Until) {
			delete(c.mu.pins, name)
		}
	}
}

// republish publishes the state after an operator action and tells
// subscribers.
func (c *Controller) republish(now time.Time, reason string) *State {
	c.mu.Lock()
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
	m.at = now
	m.gen++
	st := c.compose(reason, m.gen)
	c.state.Store(st)
	subs := make([]chan *State, 0, len(m.subs))
	for _, ch := range m.subs {
		subs = append(subs, ch)
	}
	c.mu.Unlock()
	c.cfg.Logger.Info("dimmer: operator", "generation", st.Generation, "reason", reason)
	notify(subs, st)
	return st
}

// PinAt pins feature's level until now+ttl, with a reason shown in the
// state and in flag metadata.
func (c *Controller) PinAt(now time.Time, feature string, level float64, ttl time.Duration, reason string) (*State, error) {
	if _, ok := c.State().Feature(feature); !ok {
		return nil, fmt.Errorf("dimmer: pin: unknown feature %q", feature)
	}
	if !(level >= 0 && level <= 1) {
		return nil, fmt.Errorf("dimmer: pin %s: level %v: want 0 ≤ level ≤ 1", feature, level)
	}
	if ttl <= 0 || ttl > 7*24*time.Hour {
		return nil, fmt.Errorf("dimmer: pin %s: ttl %s: want more than 0 and at most a week", feature, ttl)
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, fmt.Errorf("dimmer: pin %s: a reason is required", feature)
	}
	c.mu.Lock()
	c.mu.pins[feature] = Pin{Level: c.quantize(level), Until: now.Add(ttl), Reason: reason}
	c.mu.Unlock()
	return c.republish(now, fmt.Sprintf("%s pinned at %.0f%% for %s: %s", feature, 100*level, ttl, reason)), nil
}

// UnpinAt removes a pin; the law takes the feature back.
func (c *Controller) UnpinAt(now time.Time, feature string) (*State, error) {
	c.mu.Lock()
	_, ok := c.mu.pins[feature]
	delete(c.mu.pins, feature)
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dimmer: unpin: %q is not pinned", feature)
	}
	return c.republish(now, feature+" unpinned"), nil
}

// FreezeAt holds every level as published until Unfreeze. The law does not
// integrate meanwhile (no windup).
func (c *Controller) FreezeAt(now time.Time, reason string) *State {
	c.mu.Lock()
	c.mu.frozen, c.mu.freezeWhy = true, reason
	c.mu.why = why{kind: whyFrozen}
	c.mu.Unlock()
	return c.republish(now, "frozen by operator: "+reason)
}

// UnfreezeAt hands the levels back to the law.
func (c *Controller) UnfreezeAt(now time.Time) *State {
	c.mu.Lock()
	c.mu.frozen, c.mu.freezeWhy = false, ""
	c.mu.underSince, c.mu.overSince = time.Time{}, time.Time{}
	if c.mu.mode == Frozen {
		c.mu.mode = Auto
	}
	c.mu.Unlock()
	return c.republish(now, "unfrozen by operator")
}

// SetShadowAt turns shadow mode on or off: in shadow mode the controller
// computes and reports levels (FeatureState.Computed) but publishes full
// brightness and no shedding.
func (c *Controller) SetShadowAt(now time.Time, on bool) *State {
	c.mu.Lock()
	c.mu.shadow = on
	c.mu.Unlock()
	if on {
		return c.republish(now, "shadow mode on: computing, applying nothing")
	}
	return c.republish(now, "shadow mode off")
}

// Pin is PinAt(time.Now(), …).
func (c *Controller) Pin(feature string, level float64, ttl time.Duration, reason string) (*State, error) {
	return c.PinAt(time.Now(), feature, level, ttl, reason)
}

// Unpin is UnpinAt(time.Now(), …).
func (c *Controller) Unpin(feature string) (*State, error) { return c.UnpinAt(time.Now(), feature) }

// Freeze is FreezeAt(time.Now(), …).
func (c *Controller) Freeze(reason string) *State { return c.FreezeAt(time.Now(), reason) }

// Unfreeze is UnfreezeAt(time.Now()).
func (c *Controller) Unfreeze() *State { return c.UnfreezeAt(time.Now()) }

// SetShadow is SetShadowAt(time.Now(), …).
func (c *Controller) SetShadow(on bool) *State { return c.SetShadowAt(time.Now(), on) }

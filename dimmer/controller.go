package dimmer

import (
	"context"
	"fmt"
	"log/slog"
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
	belowSince time.Time // the load fallen and pressure under High since; zero when not
	loadMark   float64   // offered load at the last dimming step; 0 if none
	overSince  time.Time // cascade pressure held since; zero when not
	lastFresh  time.Time
	dimmed     bool          // the law dimmed since it was last at full brightness
	acc        float64       // the trim's evidence: + over High, − under Low
	upStep     float64       // the trim's last step up
	downStep   float64       // the trim's last step down
	lastDir    int           // the trim's last move: +1 up, −1 down, 0 none yet
	good, bad  float64       // the trim's last good and last over level; −1 when none
	fails      int           // probes that failed in a row (the backoff)
	span       float64       // the trim's step: halved by each reversal
	q, maxStep float64       // Quantum and MaxStep, for turn and forget
	movedAt    time.Time     // the trim's last move
	calmRun    int           // settled periods in a row far under
	hotRun     int           // settled periods in a row far over
	sigWindow  time.Duration // how far back the last snapshot looked
	badAt      time.Time
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

	// The scheduled caps as of the last evaluation (see schedule).
	caps     []float64 // per feature: the lowest active cap, quantized; 1 when none
	capBy    []int     // per feature: the schedule entry of caps; −1 when none
	binds    []bool    // per feature: the cap holds the published level down (set by levels)
	active   []bool    // per schedule entry: its window is open
	relayout bool      // Reconfigure changed the features: match held levels by name
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
	whyReconfigured
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
	whyBand
	whyCapped
	whyConfirm    // over High for one period from full brightness
	whyTrimHold   // settled: gathering evidence
	whyTrimDown   // over for long enough: a step down
	whyTrimBack   // a probe that failed: back to the last good level
	whyTrimUp     // under for long enough: a probe up
	whyRegimeUp   // far under for long: conditions changed, half way up
	whyRegimeDown // far over for long: conditions changed, a fast fall
)

// New checks cfg and returns a controller at full brightness.
func New(cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg}
	c.mu.brightness = 1
	c.mu.good, c.mu.bad = -1, -1
	c.mu.q, c.mu.maxStep, c.mu.span = cfg.Quantum, cfg.MaxStep, cfg.MaxStep
	c.mu.pins = map[string]Pin{}
	c.mu.subs = map[int]chan *State{}
	c.mu.readings = make([]Reading, len(cfg.Targets))
	for i, t := range cfg.Targets {
		c.mu.readings[i] = Reading{Signal: t.Signal, Target: t.Target, Missing: true}
	}
	c.sizeScratch()
	c.mu.gen = 1
	c.state.Store(c.compose("starting at full brightness", 1))
	return c, nil
}

// sizeScratch makes the per-step scratch slices for c.cfg. Callers hold
// the lock (or own c).
func (c *Controller) sizeScratch() {
	m := &c.mu
	nf := len(c.cfg.Features)
	m.levels = make([]float64, nf*(1+len(c.cfg.Segments)))
	m.caps, m.capBy, m.binds = make([]float64, nf), make([]int, nf), make([]bool, nf)
	m.active = make([]bool, len(c.cfg.Schedule))
	for i := range m.caps {
		m.caps[i], m.capBy[i] = 1, -1
	}
}

// Config returns a copy of the configuration with defaults filled in and
// the features in ladder order; changing it does not change the controller.
func (c *Controller) Config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.clone()
}

// runConfig returns what Run reads of the configuration, which
// Reconfigure may change.
func (c *Controller) runConfig() (time.Duration, *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Tick, c.cfg.Logger
}

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
// signal arrives. A Tick changed by Reconfigure takes effect after the
// next step. Run returns only when ctx ends, and then returns ctx's error.
func (c *Controller) Run(ctx context.Context, src Source) error {
	tick, log := c.runConfig()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			sctx, cancel := context.WithTimeout(ctx, tick)
			snap, err := src.Snapshot(sctx, now)
			cancel()
			if err != nil {
				log.Warn("dimmer: signals", "err", err)
			}
			c.Step(now, snap)
			var next time.Duration
			if next, log = c.runConfig(); next != tick {
				tick = next
				t.Reset(tick)
			}
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
	log := c.cfg.Logger
	c.mu.Unlock()
	if changed { // never log under the lock: a slow handler would stall every reader of Status
		log.Info("dimmer: levels changed", "generation", st.Generation, "brightness", st.Brightness,
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

// step is Step under the lock. It reports whether the published state
// changed; it allocates only then.
func (c *Controller) step(now time.Time, s signals.Snapshot) (*State, bool) {
	m := &c.mu
	cfg := &c.cfg
	if !m.started {
		m.started, m.lastFresh = true, now
	}
	c.expirePins(now)
	c.schedule(now)
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
	m.sigWindow = s.Window
	load, loadOK := s.Get(cfg.LoadSignal)
	if !loadOK || load < 0 {
		load = -1
	}
	// Dimmed, and the load that forced it has fallen below the mark: the
	// refusals DimOnly targets count are of that overload (or of the
	// admission gate's warm-up after it), as with room at the gate.
	gone := m.dimmed && m.loadMark > 0 && load >= 0 && load < m.loadMark*(1-cfg.LoadMargin)
	p, pc, ok, top := c.pressure(now, s, room || gone)
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
	case whyTrimDown, whyTrimBack, whyRegimeDown:
		a = Dim
	case whyBrighten, whyTrimUp, whyRegimeUp, whyUnshed, whyUnshedRoom, whyUnshedLoad:
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
	case whyReconfigured:
		r = "configuration reloaded"
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
	case whyBand:
		r = fmt.Sprintf("%s: within %.0f–%.0f%% of target, holding", sig, 100*cfg.Low, 100*cfg.High)
	case whyConfirm:
		r = fmt.Sprintf("%s: over %.0f%% of target at full brightness: weighing whether it is an overload", sig, 100*cfg.High)
	case whyTrimHold:
		r = fmt.Sprintf("%s: settled, holding", sig)
	case whyTrimDown:
		r = fmt.Sprintf("%s: over %.0f%% of target for %.0f periods: dimming %s by %.2f", sig, 100*cfg.High, cfg.Evidence, cfg.Features[w.feature].Name, m.downStep)
	case whyTrimBack:
		r = fmt.Sprintf("%s: the probe was too bright: back to the last good level; the next step waits for %.0f periods of evidence", sig, cfg.Evidence*float64(int(1)<<m.fails))
	case whyTrimUp:
		r = fmt.Sprintf("%s: under %.0f%% of target long enough: probing %s", sig, 100*cfg.Low, cfg.Features[w.feature].Name)
	case whyRegimeUp:
		r = fmt.Sprintf("%s: far under %.0f%% of target for %.0f periods: conditions changed, brightening %s half way up", sig, 50*cfg.Low, 2*cfg.Evidence, cfg.Features[w.feature].Name)
	case whyRegimeDown:
		r = fmt.Sprintf("%s: far over target for %.0f periods: conditions changed, dimming %s", sig, 2*cfg.Evidence, cfg.Features[w.feature].Name)
	case whyCapped:
		r = sig + ": at the scheduled cap, holding"
	}
	if sr := c.scheduleReason(); sr != "" {
		r = sr + "; " + r
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
			out[i] = c.quantize(c.ladder(i, m.brightness))
			for j := range seg {
				seg[j] = c.quantize(c.ladder(i, m.brightness+c.cfg.Segments[j].Offset))
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
	return min(c.quantize(c.ladder(i, c.mu.brightness)), c.mu.caps[i])
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

// schedule evaluates the scheduled caps at now into m.caps, m.capBy and
// m.active. It does not allocate. Callers hold the lock (or own c).
func (c *Controller) schedule(now time.Time) {
	m := &c.mu
	for i := range m.caps {
		m.caps[i], m.capBy[i] = 1, -1
	}
	for k, p := range c.cfg.Schedule {
		m.active[k] = p.ActiveAt(now)
		if !m.active[k] {
			continue
		}
		mx := c.quantize(p.Max)
		for i, f := range c.cfg.Features {
			if (p.Feature == "" || p.Feature == f.Name) && (m.capBy[i] < 0 || mx < m.caps[i]) {
				m.caps[i], m.capBy[i] = mx, k
			}
		}
	}
}

// ceiling is the highest brightness the scheduled caps let act: above it
// no published level moves. Going down the ladder, a capped feature's
// stretch is dead above its cap; a feature capped at or under its floor
// is dead throughout, and the next one decides. The law's brightness is
// kept at or under the ceiling (anti-windup). Callers hold the lock.
func (c *Controller) ceiling() float64 {
	m := &c.mu
	top := 1.0
	for i, f := range c.cfg.Features {
		if m.capBy[i] < 0 || m.caps[i] >= 1 {
			break
		}
		lo, hi := c.span(i)
		if cp := m.caps[i]; cp > f.Floor {
			return lo + cp*(hi-lo)
		}
		top = lo
	}
	return top
}

// scheduleReason describes the schedule for the state's reason: the caps
// that bind, those active but not binding, and those that started or
// ended since the last published state. Callers hold the lock.
func (c *Controller) scheduleReason() string {
	m := &c.mu
	if len(c.cfg.Schedule) == 0 {
		return ""
	}
	c.levels() // m.binds
	old := c.state.Load()
	var parts []string
	for k, p := range c.cfg.Schedule {
		was := old != nil && len(old.core.active) == len(m.active) && old.core.active[k]
		if !m.active[k] {
			if was {
				parts = append(parts, fmt.Sprintf("scheduled cap ended (%s)", p.Reason))
			}
			continue
		}
		var bound []string
		for i, f := range c.cfg.Features {
			if m.capBy[i] == k && m.binds[i] {
				bound = append(bound, f.Name)
			}
		}
		until := p.Until().Format("Jan 2 15:04:05 MST")
		if len(bound) > 0 {
			parts = append(parts, fmt.Sprintf("%s capped at %.0f%% until %s by schedule: %s",
				strings.Join(bound, ", "), 100*c.quantize(p.Max), until, p.Reason))
			continue
		}
		parts = append(parts, fmt.Sprintf("scheduled cap of %s at %.0f%% until %s not binding (%s)",
			p.target(), 100*c.quantize(p.Max), until, p.Reason))
	}
	return strings.Join(parts, "; ")
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
	m.at = now
	m.gen++
	st := c.compose(reason, m.gen)
	c.state.Store(st)
	subs := make([]chan *State, 0, len(m.subs))
	for _, ch := range m.subs {
		subs = append(subs, ch)
	}
	return st, subs, c.cfg.Logger
}

// hasFeature reports whether the configuration has the named feature.
// Callers hold the lock.
func (c *Controller) hasFeature(name string) bool {
	return slices.ContainsFunc(c.cfg.Features, func(f Feature) bool { return f.Name == name })
}

// PinAt pins feature's level until now+ttl, with a reason shown in the
// state and in flag metadata. A pin beats a scheduled cap.
func (c *Controller) PinAt(now time.Time, feature string, level float64, ttl time.Duration, reason string) (*State, error) {
	c.mu.Lock()
	known := c.hasFeature(feature)
	c.mu.Unlock()
	if !known {
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
	if !c.hasFeature(feature) { // a Reconfigure removed it meanwhile
		c.mu.Unlock()
		return nil, fmt.Errorf("dimmer: pin: unknown feature %q", feature)
	}
	c.mu.pins[feature] = Pin{Level: c.quantize(level), Until: now.Add(ttl), Reason: reason}
	st, subs, log := c.publish(now, fmt.Sprintf("%s pinned at %.0f%% for %s: %s", feature, 100*level, ttl, reason))
	c.mu.Unlock()
	log.Info("dimmer: operator", "generation", st.Generation, "reason", st.Reason)
	notify(subs, st)
	return st, nil
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

// Reconfigure is ReconfigureAt(time.Now(), cfg).
func (c *Controller) Reconfigure(cfg Config) error { return c.ReconfigureAt(time.Now(), cfg) }

// ReconfigureAt replaces the configuration at now, for a reload (brownoutd
// calls it on SIGHUP). It checks cfg exactly as New does; on error it
// returns the error and changes nothing.
//
// What the controller has learnt stays: the brightness (the integrator,
// and with it the shed level, clamped to the new MaxShed), the load mark
// and the hold timers, the freeze and shadow mode, and the operators'
// pins on features that still exist. A pin on a removed feature is
// dropped, with a warning on the new cfg.Logger. Levels come from the new
// ladder at the kept brightness: at full brightness a new feature starts
// at full level (1); while dimmed it gets the level its place in the
// ladder says — the brightness is the law's estimate of how much optional
// work the service can afford, and a reload does not change the load.
// While frozen or stale, features and segments that existed keep their
// published levels. The new Schedule is evaluated at now, and its caps
// steer the law from the next Step. A new state is published
// (Generation grows) and subscribers are told.
func (c *Controller) ReconfigureAt(now time.Time, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	c.mu.Lock()
	m := &c.mu
	c.cfg = cfg
	m.q, m.maxStep = cfg.Quantum, cfg.MaxStep
	m.span = min(max(m.span, m.q), m.maxStep)
	var dropped []string
	for name := range m.pins {
		if !c.hasFeature(name) {
			dropped = append(dropped, name)
		}
	}
	slices.Sort(dropped)
	droppedPins := make([]Pin, len(dropped))
	for i, name := range dropped {
		droppedPins[i] = m.pins[name]
		delete(m.pins, name)
	}
	// Readings of signals still targeted carry over, against their new
	// targets, until the next step reads them afresh.
	readings := make([]Reading, len(cfg.Targets))
	for i, t := range cfg.Targets {
		readings[i] = Reading{Signal: t.Signal, Target: t.Target, Missing: true}
		for _, o := range m.readings {
			if o.Signal == t.Signal && !o.Missing {
				readings[i].Value, readings[i].Missing, readings[i].Pressure = o.Value, false, o.Value/t.Target
				break
			}
		}
	}
	m.readings = readings
	m.brightness = max(m.brightness, -cfg.MaxShed)
	c.sizeScratch()
	if !m.frozen {
		m.why = why{kind: whyReconfigured} // the last step's indices may not fit the new config
	}
	reason := fmt.Sprintf("configuration reloaded: %d features, %d targets, %d scheduled caps",
		len(cfg.Features), len(cfg.Targets), len(cfg.Schedule))
	if len(dropped) > 0 {
		reason += "; pins dropped on removed features: " + strings.Join(dropped, ", ")
	}
	m.relayout = true // held levels (frozen, stale) are matched by name
	st, subs, log := c.publish(now, reason)
	m.relayout = false
	c.mu.Unlock()
	for i, name := range dropped {
		log.Warn("dimmer: reconfigure: pin dropped, the feature was removed", "feature", name,
			"level", droppedPins[i].Level, "until", droppedPins[i].Until, "reason", droppedPins[i].Reason)
	}
	log.Info("dimmer: reconfigured", "generation", st.Generation, "reason", reason)
	notify(subs, st)
	return nil
}

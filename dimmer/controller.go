package dimmer

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/signals"
)

// Source gives the controller its signals; fleet.ScrapeSource,
// fleet.PromQLSource and fleet.PushSource (package signals/fleet) are
// Sources, and Local wraps a signals.Recorder.
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
	cfg    Config
	spans  [][2]float64 // per feature of cfg: its stretch of the brightness scale (see span)
	capped []int        // per schedule entry of cfg: the feature it caps, −1 for all
	state  atomic.Pointer[State]
	// reqCost holds RequestCost's float64 bits.
	reqCost atomic.Uint64

	mu controllerState
}

// controllerState is the controller's mutable part, guarded by its mutex.
type controllerState struct {
	sync.Mutex
	costs      *costs // what each feature costs, learned from the tallies
	brightness float64
	overSince  time.Time // cascade pressure held since; zero when not
	lastFresh  time.Time
	sigWindow  time.Duration // how far back the last snapshot looked
	started    bool
	frozen     bool
	freezeWhy  string
	shadow     bool
	pins       map[string]Pin
	gen        uint64
	subs       map[int]chan *State
	nextSub    int

	mdl modelState // the law's state (see model.go)

	// The last step's observations, reused every period.
	readings []Reading
	pressure float64
	presOK   bool
	busy     float64 // the room signal, when busyOK
	busyOK   bool
	mode     Mode
	why      why
	adopted  adopted // what an adopted checkpoint's step said (whyAdopted)
	at       time.Time
	levels   []float64     // scratch: per feature, then per feature × segment
	segProbe []probeLevels // scratch: per segment, the probe at its brightness (see levels)

	// The scheduled caps as of the last evaluation (see schedule).
	caps     []float64 // per feature: the lowest active cap, quantized; 1 when none
	capBy    []int     // per feature: the schedule entry of caps; −1 when none
	binds    []bool    // per feature: the cap holds the published level down (set by levels)
	active   []bool    // per schedule entry: its window is open
	relayout bool      // Reconfigure changed the features: match held levels by name
}

// New checks cfg and returns a controller at full brightness.
func New(cfg Config) (*Controller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, spans: spans(cfg.Features), capped: capped(&cfg)}
	c.mu.brightness = 1
	c.mu.pins = map[string]Pin{}
	c.mu.subs = map[int]chan *State{}
	c.mu.costs = newCosts(cfg.Features)
	c.mu.readings = make([]Reading, len(cfg.Targets))
	for i, t := range cfg.Targets {
		c.mu.readings[i] = Reading{Signal: t.Signal, Target: t.Target, Missing: true}
	}
	c.sizeScratch()
	c.mu.gen = 1
	c.store(c.compose("starting at full brightness", 1))
	return c, nil
}

// sizeScratch makes the per-step scratch slices for c.cfg. Callers hold
// the lock (or own c).
func (c *Controller) sizeScratch() {
	m := &c.mu
	nf := len(c.cfg.Features)
	m.levels = make([]float64, nf*(1+len(c.cfg.Segments)))
	m.caps, m.capBy, m.binds = make([]float64, nf), make([]int, nf), make([]bool, nf)
	m.segProbe = make([]probeLevels, len(c.cfg.Segments))
	m.active = make([]bool, len(c.cfg.Schedule))
	m.mdl.size(nf)
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

// idle reports whether s is of a service that no request reached: the
// arrival rate measured and zero, nothing in flight. Not a service whose
// requests hang (in flight, never completing): that is no signal.
func idle(s signals.Snapshot) bool {
	rate, ok := s.Get(signals.ArrivalRate)
	if !ok || rate != 0 {
		return false
	}
	n, ok := s.Get(signals.InFlight)
	return !ok || n == 0
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
	to, span := now, cfg.Tick // the interval the tallies are of: the period's, or the source's own
	if s.RecentSpan > 0 {
		span = s.RecentSpan
		if !s.RecentAt.IsZero() {
			to = s.RecentAt
		}
	}
	m.costs.observe(now, to.Add(-span), to, cfg.Tick, s.Tallies, 1/c.repeats(s.RecentSpan))
	busy, busyOK := s.Get(cfg.RoomSignal)
	if busy < 0 || busy > 1 {
		busyOK = false // not a share: ignore it
	}
	m.busy, m.busyOK = busy, busyOK
	m.sigWindow = s.Window
	o, ok := c.observe(now, s, busy, busyOK)
	m.pressure, m.presOK = o.p, ok
	m.at = later(m.at, now)
	m.mode = Auto
	switch {
	case m.frozen:
		// The operator's freeze holds, signal or not.
		if ok {
			m.lastFresh = now
		}
		m.mode, m.why = Frozen, why{kind: whyFrozen}
	case !ok && idle(s):
		// Nothing to measure: the source answered, and no request came
		// (none in flight either). An idle service is fresh, not stale:
		// hold the levels — nobody is served them — and say so.
		m.overSince = time.Time{}
		m.lastFresh = now
		m.why = c.idleModel(now)
	case !ok:
		// Nothing measured: hold; after StaleAfter periods, say so.
		m.overSince = time.Time{}
		m.why = why{kind: whyNoSignal, held: now.Sub(m.lastFresh)}
		if now.Sub(m.lastFresh) >= time.Duration(cfg.StaleAfter)*cfg.Tick {
			m.mode, m.why.kind = Stale, whyStale
		}
	default:
		m.lastFresh = now
		m.why = c.controlModel(now, o)
	}
	if m.shadow && m.mode == Auto {
		m.mode = Shadow
	}
	old := c.state.Load()
	if c.same(old) {
		c.noteCost(old) // (the levels held; the costs' estimates may have moved)
		return old, false
	}
	m.gen++
	st := c.compose(c.reason(), m.gen)
	c.store(st)
	return st, true
}

package dimmer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The operators' errors, for callers to branch on (errors.Is): an API
// answers each with its own status.
var (
	// ErrUnknownFeature: no feature of that name is configured.
	ErrUnknownFeature = errors.New("unknown feature")
	// ErrBadPin: a pin's level, TTL or reason is out of bounds.
	ErrBadPin = errors.New("bad pin")
	// ErrNotPinned: the feature has no pin to remove.
	ErrNotPinned = errors.New("not pinned")
)

func (c *Controller) expirePins(now time.Time) {
	for name, p := range c.mu.pins {
		if !now.Before(p.Until) {
			delete(c.mu.pins, name)
		}
	}
}

// hasFeature reports whether the configuration has the named feature.
// Callers hold the lock.
func (c *Controller) hasFeature(name string) bool {
	return slices.ContainsFunc(c.cfg.Features, func(f Feature) bool { return f.Name == name })
}

// PinAt pins feature's level until now+ttl, with a reason (at most
// MaxReason bytes) shown in the state and in flag metadata. A pin beats a
// scheduled cap.
func (c *Controller) PinAt(now time.Time, feature string, level float64, ttl time.Duration, reason string) (*State, error) {
	c.mu.Lock()
	known := c.hasFeature(feature)
	c.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("dimmer: pin: %w %q", ErrUnknownFeature, feature)
	}
	if !(level >= 0 && level <= 1) {
		return nil, fmt.Errorf("dimmer: pin %s: %w: level %v: want 0 ≤ level ≤ 1", feature, ErrBadPin, level)
	}
	if ttl <= 0 || ttl > 7*24*time.Hour {
		return nil, fmt.Errorf("dimmer: pin %s: %w: ttl %s: want more than 0 and at most a week", feature, ErrBadPin, ttl)
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, fmt.Errorf("dimmer: pin %s: %w: a reason is required", feature, ErrBadPin)
	}
	if len(reason) > MaxReason {
		return nil, fmt.Errorf("dimmer: pin %s: %w: the reason is %d bytes long: at most %d", feature, ErrBadPin, len(reason), MaxReason)
	}
	c.mu.Lock()
	if !c.hasFeature(feature) { // a Reconfigure removed it meanwhile
		c.mu.Unlock()
		return nil, fmt.Errorf("dimmer: pin: %w %q", ErrUnknownFeature, feature)
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
	known := c.hasFeature(feature)
	_, ok := c.mu.pins[feature]
	delete(c.mu.pins, feature)
	c.mu.Unlock()
	if !known && !ok {
		return nil, fmt.Errorf("dimmer: unpin: %w %q", ErrUnknownFeature, feature)
	}
	if !ok {
		return nil, fmt.Errorf("dimmer: unpin: %q is %w", feature, ErrNotPinned)
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
	c.mu.overSince = time.Time{}
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
// What the controller has learnt stays: the brightness (and with it the
// shed level, clamped to the new MaxShed), K, the learned costs of the
// features that stay, the load's tracker and the hold timers, the freeze and shadow mode, and the operators'
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
	if cfg.Tick != c.cfg.Tick {
		// The runs over High and of a standing queue count periods: of
		// the old Tick, they say nothing about the new one's.
		m.mdl.overRun, m.mdl.standRun = 0, 0
		// (And the change detector's sums, one period's worth each.)
		m.mdl.overSum, m.mdl.underSum = 0, 0
	}
	oldCfg, oldCost, oldLearned, oldReach := c.cfg, m.mdl.cost, m.mdl.learned, m.mdl.reachN
	c.cfg, c.spans, c.capped = cfg, spans(cfg.Features), capped(&cfg)
	m.costs = m.costs.remap(cfg.Features)
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
	c.remapModel(&oldCfg, oldCost, oldLearned, oldReach)
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

// remapModel carries the model law's per-feature costs and reaches over
// a Reconfigure, by name (a new feature's cost is its prior, as demand
// would set it, and its reach unmeasured), and the probe's share into the new configuration: the reload's own
// state publishes the probe as the next step will — budgeted by the costs
// (zeroed, its features off were given the whole share), within the new
// Probe and in the new quantum (a share of the old one's, or one wider
// than the probe, gave a feature off more than Config.Probe). Callers
// hold the lock; sizeScratch has run.
func (c *Controller) remapModel(old *Config, cost []float64, learned []bool, reachN []float64) {
	m := &c.mu.mdl
	// A move pending, and the last period's priors' share, were of the
	// features and costs before: they teach nothing of the new ones.
	m.moveAt, m.lastOK = time.Time{}, false
	if !slices.EqualFunc(old.Features, c.cfg.Features, func(a, b Feature) bool { return a.Name == b.Name }) {
		// Another set of features: the all-off request is another's, and
		// its tracker starts afresh (a jump of it would rebase K for a
		// service no slower).
		m.base, m.baseAt, m.capacity.at = tracker{}, time.Time{}, 0
	}
	scale, w0 := m.scale, m.w0
	if scale == 0 {
		scale = 1
	}
	if w0 == 0 {
		w0 = 1
	}
	was := make(map[string]int, len(old.Features))
	for j, g := range old.Features {
		if j < len(cost) {
			was[g.Name] = j
		}
	}
	for i, f := range c.cfg.Features {
		m.cost[i] = f.Cost * scale * w0
		if j, ok := was[f.Name]; ok {
			m.cost[i], m.learned[i] = cost[j], learned[j]
			if j < len(reachN) && reachN[j] >= 0 && m.reachAll > 0 {
				m.reachN[i], m.reach[i] = reachN[j], min(reachN[j]/m.reachAll, 1)
			}
		}
	}
	switch {
	case c.cfg.Probe <= 0:
		m.probe, m.probeShare = false, 0
	case m.probe && (c.cfg.Probe != old.Probe || c.cfg.Quantum != old.Quantum):
		m.probeShare = c.probeShare(m.load.est)
	}
}

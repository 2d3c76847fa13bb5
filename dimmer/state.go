package dimmer

import (
	"time"

	"github.com/brownout/brownout/signals"
)

// Mode says who decides a level.
type Mode uint8

const (
	// Auto: the control law.
	Auto Mode = iota
	// Override: an operator pinned the feature's level.
	Override
	// Shadow: the law computes levels but nothing is applied.
	Shadow
	// Stale: the signals are stale; levels hold.
	Stale
	// Frozen: an operator froze every level.
	Frozen
	// Scheduled: a scheduled cap (Config.Schedule) decides a feature's
	// level — it binds: the law, or the level held while stale, would
	// publish the cap or more. Only a feature's mode is Scheduled, never
	// a state's.
	Scheduled
)

var modeNames = [...]string{"auto", "override", "shadow", "stale", "frozen", "scheduled"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode?"
}

// Pin is an operator's override of one feature's level.
type Pin struct {
	Level  float64
	Until  time.Time
	Reason string
}

// FeatureState is one feature in a State.
type FeatureState struct {
	Name string
	// Level is the published level: the share of users who get the
	// feature, quantized.
	Level float64
	// Computed is the level the law computed, under the scheduled caps
	// (differs from Level in shadow mode, under a pin, while frozen or
	// stale).
	Computed float64
	Floor    float64
	Mode     Mode
	Pin      *Pin // nil unless pinned
	// Cap is the scheduled cap that decides the level (Mode Scheduled);
	// nil otherwise — also for a cap that is active but not binding.
	Cap *Cap
	// Segments holds the published level for each of the controller's
	// segments, in Config order.
	Segments []float64
}

// Reading is one pressure signal in a State.
type Reading struct {
	Signal   signals.Key
	Value    float64
	Target   float64
	Pressure float64
	Missing  bool
	// Discounted: read but not counted in the pressure — a DimOnly
	// target while the admission gate has room (see Config.RoomSignal).
	Discounted bool
}

// Action is what the law did in a step.
type Action uint8

const (
	// Hold: levels stay (in the band, waiting, at the floor, stale,
	// frozen, full).
	Hold Action = iota
	// Dim: features dim.
	Dim
	// Brighten: features brighten, or the cascade unwinds.
	Brighten
	// Shed: the cascade refuses more at the door.
	Shed
)

var actionNames = [...]string{"hold", "dim", "brighten", "shed"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action?"
}

// State is what the controller decided at one step; share it freely.
//
// Its exported fields are a copy made for reading and display. What
// decides anything — the levels, modes and pins behind Level, LevelAt,
// FeatureMode and PinReason, the shed level behind Controller.ShedLevel,
// what the controller compares the next step with, what the provider
// evaluates — is a private copy taken when the state was composed. A
// caller that changes an exported field therefore changes only what it
// reads itself; Tampered reports whether anyone did.
type State struct {
	// Generation grows by one with every published change.
	Generation uint64
	Time       time.Time
	Mode       Mode
	// Brightness is the law's output: 1 everything on, 0 every feature at
	// its floor, below 0 the cascade (Shed = −Brightness).
	Brightness float64
	// Pressure is the largest value/target over the present signals;
	// PressureOK is false when none was present.
	Pressure   float64
	PressureOK bool
	// Shed is the cascade's level in [0, 2]: up to 1 it is the share of
	// sheddable requests to refuse at the door; from 1 to 2 every
	// sheddable request and Shed−1 of the default ones. Critical requests
	// are never shed.
	Shed     float64
	Features []FeatureState
	Signals  []Reading
	// Reason says in words why the state is what it is, e.g.
	// "latency.p99 1.3s > 1s target: dimming recommendations".
	Reason string
	// Action is what the law did, and Cause the signal that drove it
	// (CauseOK false when none did: no signal, frozen, an operator). A
	// state is published when a level, the shed level or the mode
	// changes, or the action or its cause does — never for the numbers
	// in Reason alone; Controller.Status has the current readings.
	Action  Action
	Cause   signals.Key
	CauseOK bool

	index    map[string]int
	segIndex map[string]int
	segNames []string
	core     stateCore
}

// stateCore is State's private copy of what decides anything.
type stateCore struct {
	gen       uint64
	mode      Mode
	shed      float64
	reason    string
	action    Action
	cause     signals.Key
	causeOK   bool
	names     []string
	levels    []float64 // each feature's level, then each feature's segment levels
	computed  []float64
	modes     []Mode
	pinned    []bool
	pinReason []string
	capReason []string // the binding cap's reason; "" when none binds
	active    []bool   // per schedule entry: its window is open
}

// Feature returns the named feature's state.
func (s *State) Feature(name string) (*FeatureState, bool) {
	i, ok := s.index[name]
	if !ok {
		return nil, false
	}
	return &s.Features[i], true
}

// Level returns the published level of a feature for a segment ("" for
// everyone), and false for an unknown feature. An unknown segment gets the
// level for everyone.
func (s *State) Level(feature, segment string) (float64, bool) {
	i, ok := s.index[feature]
	if !ok {
		return 0, false
	}
	j := -1
	if segment != "" {
		if k, ok := s.segIndex[segment]; ok {
			j = k
		}
	}
	return s.LevelAt(i, j), true
}

// LevelAt returns the published level of feature i (an index in Features)
// for segment j (an index in the controller's segments; −1 for everyone).
func (s *State) LevelAt(i, j int) float64 {
	if j < 0 {
		return s.core.levels[i]
	}
	nf, ns := len(s.core.names), len(s.segNames)
	return s.core.levels[nf+i*ns+j]
}

// NumFeatures returns the number of features; NumSegments the number of
// segments each feature has levels for.
func (s *State) NumFeatures() int { return len(s.core.names) }

// NumSegments: see NumFeatures.
func (s *State) NumSegments() int { return len(s.segNames) }

// FeatureName returns the name of feature i.
func (s *State) FeatureName(i int) string { return s.core.names[i] }

// FeatureMode returns the mode of feature i: Override while pinned,
// Scheduled while a scheduled cap holds it down, else the state's mode.
func (s *State) FeatureMode(i int) Mode { return s.core.modes[i] }

// PinReason returns the operator's reason for feature i's pin, and false
// when it is not pinned.
func (s *State) PinReason(i int) (string, bool) { return s.core.pinReason[i], s.core.pinned[i] }

// CapReason returns the reason of the scheduled cap that holds feature i
// down (its mode is Scheduled), and false when none does.
func (s *State) CapReason(i int) (string, bool) {
	r := s.core.capReason[i]
	return r, r != ""
}

// Seq returns the state's generation (the Generation field as published).
func (s *State) Seq() uint64 { return s.core.gen }

// StateMode returns the state's mode (the Mode field as published).
func (s *State) StateMode() Mode { return s.core.mode }

// Why returns the state's reason (the Reason field as published).
func (s *State) Why() string { return s.core.reason }

// Tampered reports whether an exported field no longer holds what was
// published: a caller changed this shared state. It allocates nothing and
// is meant for tests and debug endpoints.
func (s *State) Tampered() bool {
	c := &s.core
	if s.Generation != c.gen || s.Mode != c.mode || s.Shed != c.shed || s.Reason != c.reason ||
		s.Action != c.action || s.Cause != c.cause || s.CauseOK != c.causeOK || len(s.Features) != len(c.names) {
		return true
	}
	ns := len(s.segNames)
	for i := range s.Features {
		f := &s.Features[i]
		if f.Name != c.names[i] || f.Level != s.LevelAt(i, -1) || f.Computed != c.computed[i] || f.Mode != c.modes[i] ||
			(f.Pin != nil) != c.pinned[i] || (f.Pin != nil && f.Pin.Reason != c.pinReason[i]) ||
			(f.Cap != nil) != (c.capReason[i] != "") || (f.Cap != nil && f.Cap.Reason != c.capReason[i]) || len(f.Segments) != ns {
			return true
		}
		for j, v := range f.Segments {
			if v != s.LevelAt(i, j) {
				return true
			}
		}
	}
	return false
}

// ShedShare returns the share of class c's requests to refuse at the door
// under shed level s.
func ShedShare(s float64, c signals.Class) float64 {
	switch c {
	case signals.Sheddable:
		return min(max(s, 0), 1)
	case signals.Default:
		return min(max(s-1, 0), 1)
	}
	return 0
}

// FeatureIndex returns the index of the named feature in Features.
func (s *State) FeatureIndex(name string) (int, bool) {
	i, ok := s.index[name]
	return i, ok
}

// SegmentIndex returns the index of the named segment in each feature's
// Segments.
func (s *State) SegmentIndex(name string) (int, bool) {
	j, ok := s.segIndex[name]
	return j, ok
}

// SegmentName returns the name of segment j ("" when there is none).
func (s *State) SegmentName(j int) string {
	if j < 0 || j >= len(s.segNames) {
		return ""
	}
	return s.segNames[j]
}

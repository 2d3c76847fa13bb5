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
)

var modeNames = [...]string{"auto", "override", "shadow", "stale", "frozen"}

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
	// Computed is the level the law computed (differs from Level in
	// shadow mode, under a pin, while frozen).
	Computed float64
	Floor    float64
	Mode     Mode
	Pin      *Pin // nil unless pinned
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

// State is what the controller decided at one step. States are immutable
// once published; share them freely.
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
	f := &s.Features[i]
	if segment != "" {
		if j, ok := s.segIndex[segment]; ok {
			return f.Segments[j], true
		}
	}
	return f.Level, true
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

// SegmentName returns the name of segment j.
func (s *State) SegmentName(j int) string {
	for name, k := range s.segIndex {
		if k == j {
			return name
		}
	}
	return ""
}

package dimmer

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ShedSeed keys the hash by which the cascade picks the clients it sheds
// (package shed): a client cannot work out offline which user ids are shed
// last, yet every instance that has the same seed sheds the same clients.
// A daemon publishes its seed to its followers in the state events of its
// stream (GET /v1/stream, which needs an evaluation token wherever any is
// configured), never in GET /v1/state or OFREP, which any client of the
// daemon may read; the remote provider hands it to the instances'
// shedders (provider.Remote.ShedSeed). A daemon draws its seed at start,
// so a restart draws the shed clients anew, once. An app that runs its
// own controller (embedded mode) needs none: its shedder draws one at
// random.
//
// On the wire it is 32 lowercase hexadecimal digits (MarshalText); String
// does not show it, so that printing it (to a log) does not give it away.
type ShedSeed [16]byte

// String hides the seed.
func (ShedSeed) String() string { return "ShedSeed(…)" }

// MarshalText writes the seed as 32 hexadecimal digits.
func (s ShedSeed) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, s[:]), nil }

// UnmarshalText reads 32 hexadecimal digits.
func (s *ShedSeed) UnmarshalText(b []byte) error {
	if len(b) != hex.EncodedLen(len(s)) {
		return fmt.Errorf("dimmer: shed seed: %d characters, want %d hexadecimal digits", len(b), hex.EncodedLen(len(s)))
	}
	if _, err := hex.Decode(s[:], b); err != nil {
		return errors.New("dimmer: shed seed: not hexadecimal")
	}
	return nil
}

// PublishedFeature is one feature of a state that another process
// published (brownoutd's /v1/state or its stream).
type PublishedFeature struct {
	Name                   string
	Level, Computed, Floor float64
	Mode                   Mode
	// Segments are the feature's levels for each segment, in the order of
	// Published's segment names; nil: the feature's level for every one.
	Segments []float64
	// Pin is the operator's override, nil without one; CapReason the
	// binding scheduled cap's reason, "" without one.
	Pin       *Pin
	CapReason string
}

// Published rebuilds a State from what another process's controller
// published, so that a follower (the provider's remote mode) evaluates
// with the same code as in-process: same buckets, segments, modes and
// reasons. Levels are clamped to [0, 1].
func Published(gen uint64, at time.Time, mode Mode, shed float64, reason string, segments []string, features []PublishedFeature) *State {
	nf, ns := len(features), len(segments)
	st := &State{Generation: gen, Time: at, Mode: mode, Shed: shed, Reason: reason,
		Features: make([]FeatureState, nf), index: make(map[string]int, nf),
		segIndex: make(map[string]int, ns), segNames: slices.Clone(segments)}
	st.core = stateCore{gen: gen, mode: mode, shed: shed, reason: reason,
		levels: make([]float64, nf+nf*ns), computed: make([]float64, nf), modes: make([]Mode, nf),
		pinned: make([]bool, nf), pinReason: make([]string, nf), names: make([]string, nf), capReason: make([]string, nf)}
	for j, s := range segments {
		st.segIndex[s] = j
	}
	clamp := func(v float64) float64 { return min(max(v, 0), 1) }
	for i, f := range features {
		lvl := clamp(f.Level)
		fs := FeatureState{Name: f.Name, Level: lvl, Computed: f.Computed, Floor: f.Floor, Mode: f.Mode, Segments: make([]float64, ns)}
		for j := range ns {
			v := lvl
			if j < len(f.Segments) {
				v = clamp(f.Segments[j])
			}
			fs.Segments[j] = v
			st.core.levels[nf+i*ns+j] = v
		}
		if f.Pin != nil {
			p := *f.Pin
			fs.Pin = &p
			st.core.pinned[i], st.core.pinReason[i] = true, p.Reason
		}
		if f.CapReason != "" {
			fs.Cap = &Cap{Feature: f.Name, Max: lvl, Reason: f.CapReason}
			st.core.capReason[i] = f.CapReason
		}
		st.core.levels[i] = lvl
		st.core.computed[i], st.core.modes[i], st.core.names[i] = f.Computed, f.Mode, f.Name
		st.Features[i] = fs
		st.index[f.Name] = i
	}
	return st
}

// ParseMode reads a Mode's String form.
func ParseMode(s string) (Mode, bool) {
	for i, n := range modeNames {
		if n == s {
			return Mode(i), true
		}
	}
	return Auto, false
}

package dimmer

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/brownout/brownout/signals"
)

// The bounds of a configuration. Every published state carries every
// feature's level and, per segment, its segment levels, names and
// reasons; a follower of brownoutd (provider.Remote) holds and decodes
// that state. The bounds keep the largest state a valid configuration
// can publish small enough for a follower to accept whole (see
// MaxStateBytes), far above what a real service declares: a ladder of
// tens of optional sections and a handful of user groups.
const (
	// MaxFeatures bounds Config.Features.
	MaxFeatures = 1000
	// MaxSegments bounds Config.Segments: a state holds MaxFeatures ×
	// MaxSegments segment levels.
	MaxSegments = 32
	// MaxName bounds a feature's or a segment's name, in bytes: a name is
	// a flag key or an attribute's value, one or two words.
	MaxName = 64
	// MaxReason bounds a scheduled cap's and a pin's reason, in bytes: a
	// sentence or two (the operator API's own bound).
	MaxReason = 500
	// MaxSchedule bounds Config.Schedule: a year of daily windows for two
	// features fits; the state's reason names every active entry.
	MaxSchedule = 1000
)

// MaxStateBytes bounds the JSON of a state that a valid configuration
// publishes (brownoutd's /v1/stream state event), for the followers' read
// limit. Per feature: its name and every segment's, each at most MaxName
// bytes and escaped at most six-fold (json.Marshal writes "<" as
// "\u003c"), two reasons (pin and cap) of MaxReason bytes likewise, and
// 200 bytes of numbers, mode and punctuation per feature and 16 per
// segment level: about 19.5 MB at the bounds; the state's reason names
// every active scheduled cap (MaxSchedule × MaxReason, six-fold: 3 MB).
// The rest of 32 MiB is for what a daemon adds beside the features (its
// signals and its sources' health).
const MaxStateBytes = 32 << 20

// checkName says what is wrong with a feature's or segment's name.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("no name")
	case len(s) > MaxName:
		return fmt.Errorf("name %.20q… is %d bytes long: at most %d", s, len(s), MaxName)
	case !utf8.ValidString(s):
		return fmt.Errorf("name %q is not valid UTF-8", s)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("name %q contains a control character", s)
	}
	return nil
}

// Target is one pressure signal: the signal's value divided by Target is its
// pressure (1 means "at target").
type Target struct {
	Signal signals.Key
	// Target in the signal's base unit: seconds for durations.
	Target float64
	// DimOnly makes the signal dim features without ever driving the
	// cascade. Use it for the admission layer's refusal ratio
	// (reject.ratio): a working admission layer refuses the excess by
	// design, and the cascade would only trade those refusals for its own
	// while losing goodput. For reject.ratio a target of 0.01 serves the
	// most optional content at 99 % in time (in the lab, the best fixed
	// level refuses 0.6–0.8 %; a target of 0.05 settles near 4 % refused).
	DimOnly bool
}

// Feature is an optional part of the service that the dimmer may switch off
// for a share of requests.
type Feature struct {
	// Name is the flag key apps evaluate, e.g. "recommendations".
	Name string
	// Rank orders the ladder: features of lower rank dim first. Ties go to
	// the lower Value/Cost first, then to the declaration order.
	Rank int
	// Floor is the lowest level the controller sets, in [0, 1). Default 0.
	Floor float64
	// Cost is what the feature adds to a request, as a share of a request
	// with every feature off (0.5: half as much again): the prior of the
	// cost the law learns from the requests' tallies (see the package
	// documentation), and how much of the brightness scale the feature
	// spans. Default 1.
	Cost float64
	// Value is what the feature is worth to users (any unit); with Cost it
	// breaks rank ties. Default 1.
	Value float64
}

// Segment is a group of users whose brightness is offset: with Offset 0.3 a
// VIP or a user already in checkout keeps features until the brightness
// falls 0.3 lower than for everyone else.
type Segment struct {
	Name   string
	Offset float64
}

// Cap is a scheduled ceiling on a feature's level: feed-forward dimming
// for a load that is known in advance (the 11.11 midnight sale). During
// the window [From, From+For) the feature's published level is at most
// Max; under that the law still works (pressure dims it further). From is
// a time.Time, so the caller chooses the zone: 23:59:30 on 11 November in
// Asia/Dhaka is time.Date(2026, 11, 11, 23, 59, 30, 0, dhaka).
//
// The zero value is not a valid entry: From, a positive For and a Reason
// are required.
type Cap struct {
	// Feature is the feature capped; empty caps every feature.
	Feature string
	// Max is the highest level published during the window, in [0, 1]
	// (quantized like every level). A Max under the feature's Floor wins
	// over the Floor.
	Max float64
	// From opens the window.
	From time.Time
	// For is the window's length; positive.
	For time.Duration
	// Reason says why, e.g. "11.11 midnight: pre-dim recommendations"; it
	// is shown in the state's reason and in flag metadata while the cap
	// binds. Required, at most MaxReason bytes.
	Reason string
}

// Until returns the end of the window (From+For), the first instant the
// cap no longer applies.
func (p Cap) Until() time.Time { return p.From.Add(p.For) }

// ActiveAt reports whether now falls in the window [From, From+For).
func (p Cap) ActiveAt(now time.Time) bool {
	return !now.Before(p.From) && now.Before(p.Until())
}

// Config configures a Controller. Features and Targets are required; every
// other zero field takes the default given in its comment.
type Config struct {
	// Tick is the control period. Default 1 s; at least 100 ms.
	Tick time.Duration
	// Targets are the pressure signals. Pressure is the largest
	// value/target over the signals present in a snapshot.
	Targets []Target
	// High is the pressure at or above which a period reads as over
	// target: it counts against K (the corrections, and a run of such
	// periods as long as two signal windows is an overload the levels
	// must answer, not a burst), a dim within the estimates' noise is
	// still made, and with every feature at its floor it may start the
	// cascade (see CascadeAt). Default 0.85.
	High float64
	// Low is the pressure under which a period was carried well within
	// target: K is at least the work it carried (less its noise). The
	// band High − Low is the unit of the corrections' error. Default
	// 0.70.
	Low float64
	// Hold is the shortest wait between two corrections of K (each
	// reversal doubles it, up to two minutes: Kesten's rule). Default 5 s.
	Hold time.Duration
	// Setpoint is the pressure the corrections of K aim at on average.
	// Default the middle of the band, (High+Low)/2.
	Setpoint float64
	// LoadSignal is the offered load (default rate.arrival): the λ of
	// the model, measured each period. Without it the law is feedback
	// only — K is then the work a request may take, corrected from the
	// pressure alone — and the reason says so.
	LoadSignal signals.Key
	// Features is the ladder. At least one, at most MaxFeatures, each
	// named (at most MaxName bytes of text).
	Features []Feature
	// Segments are user groups with offset brightness: at most
	// MaxSegments, each named like a feature.
	Segments []Segment
	// Quantum rounds published levels. Default 0.01 (1 %).
	Quantum float64
	// StaleAfter is how many periods without a fresh snapshot make the
	// signals stale. Default 3.
	StaleAfter int
	// CascadeAt is the pressure that, held for CascadeHold while every
	// feature sits at its floor, starts shedding. It sits above target on
	// purpose: an admission layer that bounds its queues holds latency
	// near target by refusing the excess itself, and shedding whole
	// classes on top of it only loses goodput. Default 1.5.
	CascadeAt float64
	// CascadeGain is the integral gain of the cascade: shed level gained
	// per second per unit of pressure error. It is low because refusing
	// whole requests is coarse and its effect shows in a windowed p99
	// only slowly. Default 0.2.
	CascadeGain float64
	// CascadeHold: see CascadeAt. Default 3 s.
	CascadeHold time.Duration
	// MaxShed is the highest shed level: up to 1 sheds that share of the
	// sheddable class, from 1 to 2 all of it and that share (minus 1) of
	// the default class. Critical is never shed. Default 2; a negative
	// value turns the cascade off.
	MaxShed float64
	// RoomSignal is the share of arrivals that found no room at the
	// admission gate since the last period (default signals.GateBusy,
	// which package shed provides). Under RoomBelow the gate has room:
	// refusals counted by DimOnly targets (reject.ratio, over a window)
	// describe an overload that is over and are not counted, what the
	// period completed is what it was offered, and the cascade unwinds — refusing at the door only helps a gate that is
	// full, and latency over target with room at the gate is the app's own
	// service time, which shedding does not lower. The cascade starts only
	// at or above SaturatedAt, and a period at or above it (arrivals
	// beyond completions) measures the capacity Ĉ. Without the signal the
	// gate counts as full (as when there is no gate to ask).
	RoomSignal signals.Key
	// RoomBelow: see RoomSignal. Default 0.05.
	RoomBelow float64
	// SaturatedAt: see RoomSignal. Default 0.25.
	SaturatedAt float64
	// UnshedRate is how fast the cascade unwinds once it no longer helps
	// (latency under target, room at the gate), in shed level per
	// second; once the floors' work fits the measured load it ends at
	// once. Default 1: a full cascade (2) ends within 2 s.
	UnshedRate float64
	// Schedule holds scheduled caps (feed-forward dimming; at most
	// MaxSchedule), evaluated at each Step's now. Where several apply to
	// a feature at once, the lowest Max wins (the first declared on a
	// tie). An operator's pin beats a cap, and a freeze holds levels as
	// published; see the package documentation ("Scheduled caps").
	Schedule []Cap
	// Logger receives level changes. Default: discard.
	Logger *slog.Logger
	// Probe is the share of the users the model law withholds a feature
	// from while it is all on, and gives it to while it is all off, so
	// that its cost stays measured (see the package documentation,
	// "Control law", and probe.go). Default (0) DefaultProbe, 5 %; at most
	// MaxProbe, 0.2; a negative value turns the probe off. A Probe under
	// the Quantum probes nothing (a level moves by quanta).
	Probe float64
}

func (c Config) withDefaults() (Config, error) {
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.High, 0.85)
	def(&c.Low, 0.70)
	def(&c.Setpoint, (c.High+c.Low)/2)
	if c.LoadSignal == 0 {
		c.LoadSignal = signals.ArrivalRate
	}
	if c.RoomSignal == 0 {
		c.RoomSignal = signals.GateBusy
	}
	def(&c.RoomBelow, 0.05)
	def(&c.SaturatedAt, 0.25)
	def(&c.UnshedRate, 1)
	def(&c.Quantum, 0.01)
	def(&c.CascadeAt, 1.5)
	def(&c.CascadeGain, 0.2)
	if c.Hold == 0 {
		c.Hold = 5 * time.Second
	}
	if c.CascadeHold == 0 {
		c.CascadeHold = 3 * time.Second
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = 3
	}
	switch {
	case c.MaxShed == 0:
		c.MaxShed = 2
	case c.MaxShed < 0:
		c.MaxShed = 0
	}
	switch {
	case c.Probe == 0:
		c.Probe = DefaultProbe
	case c.Probe < 0:
		c.Probe = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("dimmer: "+format, a...)) }
	if c.Tick < 100*time.Millisecond {
		bad("tick %s is under 100ms", c.Tick)
	}
	if c.CascadeAt < c.High {
		bad("cascade at %v: want at least high (%v)", c.CascadeAt, c.High)
	}
	if !(0 < c.Low && c.Low < c.High) {
		bad("watermarks: want 0 < low (%v) < high (%v)", c.Low, c.High)
	}
	if c.LoadSignal >= signals.NumKeys {
		bad("load signal %d unknown", c.LoadSignal)
	}
	if c.RoomSignal >= signals.NumKeys {
		bad("room signal %d unknown", c.RoomSignal)
	}
	if !(0 < c.RoomBelow && c.RoomBelow <= c.SaturatedAt && c.SaturatedAt <= 1) {
		bad("gate room: want 0 < room below (%v) ≤ saturated at (%v) ≤ 1", c.RoomBelow, c.SaturatedAt)
	}
	if c.Hold < 0 || c.CascadeHold < 0 {
		bad("hold times must not be negative")
	}
	for name, v := range map[string]float64{"quantum": c.Quantum, "cascade gain": c.CascadeGain, "unshed rate": c.UnshedRate} {
		if !(v > 0) || math.IsInf(v, 0) {
			bad("%s %v: want a positive number", name, v)
		}
	}
	if c.Quantum > 0.5 {
		bad("quantum %v: want at most 0.5", c.Quantum)
	}
	if !(c.Low <= c.Setpoint && c.Setpoint <= c.High) {
		bad("setpoint %v: want low (%v) ≤ setpoint ≤ high (%v)", c.Setpoint, c.Low, c.High)
	}
	if c.StaleAfter < 1 {
		bad("stale after %d periods: want at least 1", c.StaleAfter)
	}
	if !(c.Probe >= 0 && c.Probe <= MaxProbe) {
		bad("probe %v: want at most %v (a share of the users), or negative for none", c.Probe, MaxProbe)
	}
	if !(c.MaxShed >= 0 && c.MaxShed <= 2) {
		bad("max shed %v: want 0 to 2", c.MaxShed)
	}
	if len(c.Targets) == 0 {
		bad("no targets: name at least one signal, e.g. latency.p99")
	}
	for _, t := range c.Targets {
		if t.Signal >= signals.NumKeys {
			bad("target: unknown signal %d", t.Signal)
		}
		if !(t.Target > 0) || math.IsInf(t.Target, 0) {
			bad("target for %s is %v: want a positive number", t.Signal, t.Target)
		}
	}
	if len(c.Features) == 0 {
		bad("no features")
	}
	if len(c.Features) > MaxFeatures {
		bad("%d features: at most %d", len(c.Features), MaxFeatures)
	}
	if len(c.Segments) > MaxSegments {
		bad("%d segments: at most %d", len(c.Segments), MaxSegments)
	}
	if len(c.Schedule) > MaxSchedule {
		bad("%d scheduled caps: at most %d", len(c.Schedule), MaxSchedule)
	}
	seen := map[string]bool{}
	c = c.clone() // the controller never shares the caller's slices
	for i := range c.Features {
		f := &c.Features[i]
		def(&f.Cost, 1)
		def(&f.Value, 1)
		switch {
		case f.Name == "":
			bad("feature %d has no name", i)
		case checkName(f.Name) != nil:
			bad("feature %d: %v", i, checkName(f.Name))
		case seen[f.Name]:
			bad("feature %q declared twice", f.Name)
		case !(f.Floor >= 0 && f.Floor < 1):
			bad("feature %q: floor %v: want 0 ≤ floor < 1", f.Name, f.Floor)
		case !(f.Cost > 0) || !(f.Value > 0) || math.IsInf(f.Cost, 0) || math.IsInf(f.Value, 0):
			bad("feature %q: cost and value must be positive", f.Name)
		}
		seen[f.Name] = true
	}
	segSeen := map[string]bool{}
	for i, s := range c.Segments {
		switch {
		case s.Name != "" && checkName(s.Name) != nil:
			bad("segment %d: %v", i, checkName(s.Name))
		case s.Name == "" || segSeen[s.Name] || math.IsNaN(s.Offset) || math.Abs(s.Offset) > 1:
			bad("segment %q: want a unique name and an offset in [-1, 1]", s.Name)
		}
		segSeen[s.Name] = true
	}
	for i := range c.Schedule {
		p := &c.Schedule[i]
		p.Reason = strings.TrimSpace(p.Reason)
		switch {
		case p.Feature != "" && !seen[p.Feature]:
			bad("schedule[%d]: unknown feature %q", i, p.Feature)
		case !(p.Max >= 0 && p.Max <= 1):
			bad("schedule[%d] (%s): max %v: want 0 ≤ max ≤ 1", i, p.target(), p.Max)
		case p.From.IsZero():
			bad("schedule[%d] (%s): no start (From)", i, p.target())
		case p.For <= 0:
			bad("schedule[%d] (%s): for %s: want a positive duration", i, p.target(), p.For)
		case p.Reason == "":
			bad("schedule[%d] (%s): a reason is required", i, p.target())
		case len(p.Reason) > MaxReason:
			bad("schedule[%d] (%s): the reason is %d bytes long: at most %d", i, p.target(), len(p.Reason), MaxReason)
		}
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	// The ladder: shed order.
	sort.SliceStable(c.Features, func(i, j int) bool {
		a, b := c.Features[i], c.Features[j]
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		return a.Value/a.Cost < b.Value/b.Cost
	})
	return c, nil
}

// clone returns c with slices of its own.
func (c Config) clone() Config {
	c.Targets = slices.Clone(c.Targets)
	c.Features = slices.Clone(c.Features)
	c.Segments = slices.Clone(c.Segments)
	c.Schedule = slices.Clone(c.Schedule)
	return c
}

// target names what a cap applies to, for messages.
func (p Cap) target() string {
	if p.Feature == "" {
		return "every feature"
	}
	return p.Feature
}

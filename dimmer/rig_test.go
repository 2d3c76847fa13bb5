package dimmer

import (
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/require"
)

// The rig the package's tests build their scenarios with: a controller, a
// clock, and synthetic snapshots whose load and signal window a test sets
// once and whose latency and refusals it gives at each step. (The model
// law's tests drive a plant of their own, modelRig, in model_test.go.)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// testConfig reads latency against 1 s and sojourn.min against 50 ms;
// recommendations (rank 0, brightness 0.5–1) dim before reviews (0–0.5),
// and VIPs get 0.3 more.
func testConfig() Config {
	return Config{
		Targets: []Target{{Signal: signals.LatencyP99, Target: 1}, {Signal: signals.SojournMin, Target: 0.05}},
		Features: []Feature{
			{Name: "reviews", Rank: 1, Cost: 1},
			{Name: "recommendations", Rank: 0, Cost: 1},
		},
		Segments: []Segment{{Name: "vip", Offset: 0.3}},
	}
}

// refusalsConfig is testConfig reading latency against 1 s and the refusal
// ratio against 1 %, DimOnly: refusals dim without driving the cascade or
// a fast fall, as in the lab.
func refusalsConfig() Config {
	cfg := testConfig()
	cfg.Targets = []Target{{Signal: signals.LatencyP99, Target: 1}, {Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}}
	return cfg
}

// snap makes a snapshot with a p99 (seconds) and an arrival rate
// (negative: none).
func snap(now time.Time, p99, rate float64) signals.Snapshot {
	var s signals.Snapshot
	s.Time = now
	s.Set(signals.LatencyP99, p99)
	if rate >= 0 {
		s.Set(signals.ArrivalRate, rate)
	}
	return s
}

// rig steps a controller one Tick at a time with synthetic snapshots.
type rig struct {
	t testing.TB
	c *Controller
	// now is the instant of the last step (t0 before the first); a test
	// may move it to start elsewhere or to let time pass.
	now time.Time
	// load is the arrival rate every snapshot reports (default 100 req/s;
	// negative: none).
	load float64
	// window is every snapshot's signal window (default none).
	window time.Duration
}

// newRig builds a controller on cfg.
func newRig(t testing.TB, cfg Config) *rig {
	t.Helper()
	c, err := New(cfg)
	require.NoError(t, err)
	return &rig{t: t, c: c, now: t0, load: 100}
}

// reading is one more signal of a snapshot.
type reading struct {
	key signals.Key
	v   float64
}

// busy is the admission gate's GateBusy reading.
func busy(v float64) reading { return reading{signals.GateBusy, v} }

// step moves the clock a Tick on and steps the controller with p99
// latency (seconds) and the refusal ratio rr (each negative: none), the
// rig's load and window, and more.
func (r *rig) step(p99, rr float64, more ...reading) *State {
	tick, _ := r.c.runConfig()
	r.now = r.now.Add(tick)
	s := signals.Snapshot{Time: r.now, Window: r.window}
	if p99 >= 0 {
		s.Set(signals.LatencyP99, p99)
	}
	if r.load >= 0 {
		s.Set(signals.ArrivalRate, r.load)
	}
	if rr >= 0 {
		s.Set(signals.RejectRatio, rr)
	}
	for _, m := range more {
		s.Set(m.key, m.v)
	}
	return r.c.Step(r.now, s)
}

// dim steps at p99 (seconds, no refusal ratio) until the brightness falls
// — as many periods as the law takes to confirm an overload, at most ten
// — and returns that state. For the tests whose subject is not the law:
// how fast it dims is not theirs to say.
func (r *rig) dim(p99 float64) *State {
	r.t.Helper()
	st, _ := r.dimN(p99)
	return st
}

// dimN is dim, with the number of periods it took.
func (r *rig) dimN(p99 float64) (*State, int) {
	r.t.Helper()
	from := r.c.State().Brightness
	for i := range 10 {
		if st := r.step(p99, -1); st.Brightness < from {
			return st, i + 1
		}
	}
	r.t.Fatalf("no dim in ten periods at a p99 of %vs", p99)
	return nil, 0
}

// steps steps n times alike and returns the last state.
func (r *rig) steps(n int, p99, rr float64, more ...reading) *State {
	var st *State
	for range n {
		st = r.step(p99, rr, more...)
	}
	return st
}

// script steps once a Tick with each p99 in turn (no refusal ratio) and
// returns the states.
func (r *rig) script(p99s ...float64) []*State {
	var out []*State
	for _, p := range p99s {
		out = append(out, r.step(p, -1))
	}
	return out
}

// silent moves the clock a Tick on and steps with a snapshot that
// measured nothing.
func (r *rig) silent() *State {
	tick, _ := r.c.runConfig()
	r.now = r.now.Add(tick)
	return r.c.Step(r.now, signals.Snapshot{Time: r.now})
}

// newLabRig is a rig on cfg as in the lab: 150 req/s and a 5 s signal
// window.
func newLabRig(t testing.TB, cfg Config) *rig {
	t.Helper()
	r := newRig(t, cfg)
	r.load, r.window = 150, 5*time.Second
	return r
}

// level is a feature's level in st.
func level(t testing.TB, st *State, feature string) float64 {
	t.Helper()
	f, ok := st.Feature(feature)
	require.True(t, ok, feature)
	return f.Level
}

// mode is a feature's mode in st.
func mode(t testing.TB, st *State, feature string) Mode {
	t.Helper()
	i, ok := st.FeatureIndex(feature)
	require.True(t, ok, feature)
	return st.FeatureMode(i)
}

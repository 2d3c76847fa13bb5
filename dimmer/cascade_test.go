package dimmer

import (
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCascadeShedsOnlyAtTheFloorAndUnshedsFirst(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = -1
	r.steps(5, 1.6, -1)   // over CascadeAt: 0.2 a period down to the floor
	st := r.step(1.2, -1) // over target but under CascadeAt: no shedding
	assert.Equal(t, 0.0, st.Brightness)
	assert.Equal(t, 0.0, st.Shed, "under CascadeAt: no shedding")
	st = r.steps(3, 3, -1) // runaway latency, held for CascadeHold
	assert.Equal(t, 0.0, st.Shed, "not before CascadeHold")
	st = r.steps(5, 3, -1)
	assert.Greater(t, st.Shed, 0.0, "held over CascadeAt at the floor: shedding")
	assert.Equal(t, 0.0, ShedShare(st.Shed, signals.Critical))
	shed := st.Shed
	st = r.steps(6, 0.2, -1)
	assert.Less(t, st.Shed, shed, "recovering: shedding goes first")
	assert.LessOrEqual(t, st.Brightness, 0.0, "features wait until shedding is over")
	f, _ := st.Feature("recommendations")
	assert.Equal(t, 0.0, f.Level)
}

// The cascade refuses only while refusing helps: when the gate is full,
// never while it has room; it unwinds when latency is back under target,
// when the gate has room (and says why), and at once when the load that
// forced it has gone.
func TestCascadeOnlyWhileItHelps(t *testing.T) {
	r := newRig(t, testConfig())
	st := r.steps(10, 3, -1, busy(0.01)) // runaway latency, but the gate has room: slow pages
	assert.Equal(t, 0.0, st.Brightness, "features dim: cheaper pages do lower latency")
	assert.Equal(t, 0.0, st.Shed, "refusing at the door would not")
	assert.Contains(t, r.c.Status().Reason, "the gate has room")

	st = r.steps(8, 3, -1, busy(0.6)) // the gate is full
	require.Greater(t, st.Shed, 0.0, "a full gate and runaway latency: shedding")
	shedding := st.Shed

	st = r.step(3, -1, busy(0.02)) // room again, latency still high
	assert.InDelta(t, max(shedding-1, 0), st.Shed, 1e-9, "unwinds at UnshedRate")
	assert.Contains(t, st.Reason, "shedding does not lower this latency")
	assert.Equal(t, Brighten, st.Action)
	st = r.step(3, -1, busy(0.02))
	assert.Equal(t, 0.0, st.Shed, "gone within two periods")

	// Shedding again; then the load that forced it goes: at once.
	st = r.steps(8, 3, -1, busy(0.6))
	require.Greater(t, st.Shed, 0.0)
	r.load = 50
	st = r.step(3, -1, busy(0.6))
	assert.Equal(t, 0.0, st.Shed, "the load fell below the mark: shedding stops in one period")
	assert.Contains(t, st.Reason, "fell below")

	// And back under target with the gate still busy: unwinds too.
	r.load = 100
	st = r.steps(8, 3, -1, busy(0.6))
	require.Greater(t, st.Shed, 0.0)
	st = r.steps(2, 0.9, -1, busy(0.6))
	assert.Equal(t, 0.0, st.Shed, "latency under target: no reason to refuse")

	// Without the gate's signal (no gate to ask), the cascade works on
	// latency alone, as before.
	st = newRig(t, testConfig()).steps(10, 3, -1)
	assert.Greater(t, st.Shed, 0.0)
}

// The trim never runs while shedding: with High over target, a cascade
// that does not unwind yet is held, not ended by a trim step.
func TestTrimDoesNotEndShedding(t *testing.T) {
	cfg := refusalsConfig()
	cfg.High, cfg.Low, cfg.CascadeAt = 1.2, 0.9, 1.5
	r := newRig(t, cfg)
	r.window = 5 * time.Second
	r.steps(15, 3, -1) // down to the floor, then held over CascadeAt: shedding
	shed := r.c.State().Shed
	require.Greater(t, shed, 0.0)
	st := r.steps(10, 1.1, -1) // over target, under High: no unwind, no trim
	assert.Equal(t, shed, st.Shed)
}

// TestCascadeNotForAServiceThatKeepsUp: without a gate, a latency far
// over target at the floors sheds only while the service falls behind —
// its admitted requests beyond its completions, or refusals of another
// limiter. One that completes what it admits (a slow dependency: every
// answer slow, none queued) is not shed for: refusing would not lower its
// latency, and the reason says so. Where it was shedding, it unwinds.
// Both laws; the window's rates, or the period's counts (Recent).
func TestCascadeNotForAServiceThatKeepsUp(t *testing.T) {
	rate := func(k signals.Key, v float64) reading { return reading{k, v} }
	for _, model := range []bool{false, true} {
		cfg := testConfig()
		cfg.Model = model
		r := newRig(t, cfg)
		r.load = 100
		st := r.steps(20, 3, -1, rate(signals.Throughput, 100))
		assert.Equal(t, 0.0, st.Shed, "model %v: a service that keeps up: %s", model, st.Reason)
		assert.Contains(t, st.Reason, "keeps up with its arrivals")

		st = r.steps(10, 3, -1, rate(signals.Throughput, 80)) // a backlog grows
		require.Greater(t, st.Shed, 0.0, "model %v: falling behind: %s", model, st.Reason)
		st = r.steps(2, 3, -1, rate(signals.Throughput, 100), rate(signals.RejectRate, 0))
		assert.Less(t, st.Shed, 1.0, "model %v: keeping up again: unwinding: %s", model, st.Reason)
		assert.Contains(t, st.Reason, "shedding does not lower this latency")

		r2 := newRig(t, cfg)
		r2.load = 100
		st = r2.steps(20, 3, 0.05, rate(signals.Throughput, 95)) // another limiter refuses 5 %
		assert.Greater(t, st.Shed, 0.0, "model %v: refusals of another limiter: full: %s", model, st.Reason)
	}

	// The period's counts, where the source gives them: a period that
	// kept up, with the window's rates still holding a backlog.
	c, err := New(testConfig())
	require.NoError(t, err)
	now := time.Unix(0, 0)
	var st *State
	for range 20 {
		now = now.Add(time.Second)
		s := signals.Snapshot{Time: now, Window: 10 * time.Second, RecentSpan: time.Second, RecentAt: now}
		s.Recent.Arrived, s.Recent.Completed = 100, 99
		s.Set(signals.LatencyP99, 3)
		s.Set(signals.ArrivalRate, 100)
		s.Set(signals.Throughput, 60)
		st = c.Step(now, s)
	}
	assert.Equal(t, 0.0, st.Shed, "the latest period kept up: %s", st.Reason)
}

// TestCascadeKeepsShedsWhenTheGateSkipsAPeriod: a gated service whose room
// signal is missing for a period (its limit still reported) is not read as
// one that keeps up: its shedding holds.
func TestCascadeKeepsShedsWhenTheGateSkipsAPeriod(t *testing.T) {
	r := newRig(t, testConfig())
	r.load = 100
	st := r.steps(10, 3, -1, busy(0.9), reading{signals.GateLimit, 8}, reading{signals.Throughput, 100})
	require.Greater(t, st.Shed, 0.0, st.Reason)
	shed := st.Shed
	st = r.step(3, -1, reading{signals.GateLimit, 8}, reading{signals.Throughput, 100})
	assert.GreaterOrEqual(t, st.Shed, shed, "the gate's room unknown for a period: %s", st.Reason)
}

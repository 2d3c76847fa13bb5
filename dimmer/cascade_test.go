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

// shedRun steps r for n periods of a gateless service at lam arrivals a
// second, 30 % of them sheddable and 70 % default, as the cascade's shed
// level refuses them: a pool that completes mu a second at most, with a
// backlog behind it (p99 base + backlog/mu), or, with mu < 0, a service
// that completes all it admits at a p99 of base (a slow dependency). It
// returns every period's state.
func shedRun(r *rig, n int, lam, mu, base float64) []*State {
	var out []*State
	shed, q := 0.0, 0.0
	for range n {
		refused := lam * (0.3*ShedShare(shed, signals.Sheddable) + 0.7*ShedShare(shed, signals.Default))
		admitted := lam - refused
		done, p99 := admitted, base
		if mu >= 0 {
			done = min(mu, q+admitted)
			q += admitted - done
			p99 = base + q/mu
		}
		r.load = lam
		st := r.step(p99, -1, reading{signals.RejectRate, refused}, reading{signals.Throughput, done})
		shed = st.Shed
		out = append(out, st)
	}
	return out
}

// TestCascadeTrialStopsShedsThatDoNotHelp: without a gate, the cascade
// sheds on the latency alone and checks, a window later, what shedding did.
// A service whose every answer is slow (a slow dependency: it completes all
// it admits) had its completions fall with the refusals and its latency
// stay: the cascade unwinds, says why, and does not shed again while the
// latency stays over CascadeAt. A saturated pool's completions hold while
// the refusals drain its backlog: it sheds on. Both laws.
func TestCascadeTrialStopsShedsThatDoNotHelp(t *testing.T) {
	for _, model := range []bool{false, true} {
		cfg := testConfig()
		cfg.Model = model
		sts := shedRun(newRig(t, cfg), 60, 100, -1, 3)
		most, last := 0.0, sts[len(sts)-1]
		for _, st := range sts {
			most = max(most, st.Shed)
		}
		require.Greater(t, most, 0.0, "model %v: the cascade tried", model)
		assert.Zero(t, last.Shed, "model %v: a slow dependency: shedding stopped: %s", model, last.Reason)
		assert.Contains(t, last.Reason, "shedding did not lower it")
		shedding := 0
		for _, st := range sts[30:] {
			if st.Shed > 0 {
				shedding++
			}
		}
		assert.Zero(t, shedding, "model %v: and did not start again", model)

		sts = shedRun(newRig(t, cfg), 120, 150, 100, 0.3)
		last = sts[len(sts)-1]
		assert.Greater(t, last.Shed, 0.0, "model %v: a saturated pool: shedding on: %s", model, last.Reason)
		for i, st := range sts {
			assert.NotContains(t, st.Reason, "did not lower", "model %v, period %d", model, i)
		}
	}
}

// TestCascadeTrialRearms: after a verdict that shedding did not help, a
// latency back under CascadeAt, or arrivals up by LoadMargin, let the
// cascade try again.
func TestCascadeTrialRearms(t *testing.T) {
	r := newRig(t, testConfig())
	shedRun(r, 60, 100, -1, 3)
	require.True(t, r.c.mu.trial.futile)
	tried := func(sts []*State) bool {
		for _, st := range sts {
			if st.Shed > 0 {
				return true
			}
		}
		return false
	}
	require.False(t, tried(shedRun(r, 10, 100, -1, 3)), "barred while the latency stays")
	shedRun(r, 3, 100, -1, 0.5) // under CascadeAt
	assert.True(t, tried(shedRun(r, 20, 100, -1, 3)), "the latency fell under CascadeAt and rose again: the cascade tries again")

	r = newRig(t, testConfig())
	shedRun(r, 60, 100, -1, 3)
	require.True(t, r.c.mu.trial.futile)
	assert.True(t, tried(shedRun(r, 20, 200, -1, 3)), "the arrivals doubled: a new overload, perhaps: the cascade tries again")
}

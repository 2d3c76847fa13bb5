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
	// Recovering: shedding goes first, and the features wait until it
	// is over — in every period, however fast the law unwinds.
	shed := st.Shed
	for i := range 30 {
		st = r.step(0.2, -1)
		require.LessOrEqual(t, st.Shed, shed, "period %d: shedding only unwinds", i)
		was := shed
		shed = st.Shed
		if was > 0 { // the period began shedding: it ends at the floors at best
			require.LessOrEqual(t, st.Brightness, 0.0, "period %d: features wait until shedding is over", i)
			f, _ := st.Feature("recommendations")
			require.Equal(t, 0.0, f.Level, "period %d", i)
		}
	}
	assert.Equal(t, 0.0, st.Shed, "unwound within 30 periods")
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
	r.load = 10 // (under what the floors carry on either law: the search law's mark, the model law's K read jumpZ standard errors heavy)
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

// A cascade that does not unwind yet (High over target, the pressure
// between them) is held, not ended by a move of the levels.
func TestHeldCascadeIsNotEndedByALevelMove(t *testing.T) {
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

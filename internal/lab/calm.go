package lab

import (
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/sim"
)

// DirectionChanges counts the reversals of the brightness of at least two
// quanta (0.02), as issue 16 counts them: a move of one quantum back and
// forth is not a change of direction.
func DirectionChanges(secs []sim.Second) int {
	if len(secs) == 0 {
		return 0
	}
	const q = 0.02 - 1e-9
	n, dir := 0, 0
	ext := secs[0].Level // the extreme of the current run
	for _, s := range secs[1:] {
		switch {
		case dir >= 0 && s.Level > ext, dir <= 0 && s.Level < ext:
			ext = s.Level
		}
		switch {
		case dir == 0 && s.Level-secs[0].Level >= q:
			dir = 1
		case dir == 0 && secs[0].Level-s.Level >= q:
			dir = -1
		case dir == 1 && ext-s.Level >= q:
			n, dir, ext = n+1, -1, s.Level
		case dir == -1 && s.Level-ext >= q:
			n, dir, ext = n+1, 1, s.Level
		}
	}
	return n
}

// Swing is the widest range (highest minus lowest level) of any feature
// over levels, one row of every feature's level a tick.
func Swing(levels [][]float64) float64 {
	var swing float64
	if len(levels) == 0 {
		return 0
	}
	for f := range levels[0] {
		lo, hi := 2.0, -1.0
		for _, lv := range levels {
			lo, hi = min(lo, lv[f]), max(hi, lv[f])
		}
		swing = max(swing, hi-lo)
	}
	return swing
}

// Recorder runs a dimmer.Controller in the lab (as sim.Controller does)
// and keeps every feature's level each tick; with Trace, also each tick's
// snapshot and the controller's Status after the step. A Recorder runs
// one lab run at a time.
type Recorder struct {
	C *dimmer.Controller
	// Trace keeps Snapshots and Status.
	Trace bool
	// Levels are every feature's level, per tick, in ladder order.
	Levels    [][]float64
	Snapshots []signals.Snapshot
	Status    []*dimmer.State
}

// Step implements sim.Dimmer.
func (r *Recorder) Step(now time.Time, s signals.Snapshot) sim.Dim {
	d := sim.Controller{C: r.C}.Step(now, s)
	st := r.C.State()
	lv := make([]float64, len(st.Features))
	for i, f := range st.Features {
		lv[i] = f.Level
	}
	r.Levels = append(r.Levels, lv)
	if r.Trace {
		r.Snapshots = append(r.Snapshots, s)
		r.Status = append(r.Status, r.C.Status())
	}
	return d
}

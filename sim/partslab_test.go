package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/brownout/brownout/internal/race"
	"github.com/stretchr/testify/assert"
)

// The per-part lab: a sine of load around the capacity at level 0.5.
const (
	// partsLabAmplitude and partsLabPeriod: the load swings ±50 % every
	// 30 s — three swings in the lab's 90 s, slow enough for a 5 s window to
	// follow and fast enough that a controller lagging by a swing's quarter
	// (7.5 s) pays for it.
	partsLabAmplitude = 0.5
	partsLabPeriod    = 30 * time.Second
	// partsLabLevel is the level (every part) at which the mean load is the
	// server's capacity: the crest then needs every part off, the trough
	// can serve every part.
	partsLabLevel = 0.5
	// referenceInTime is what the reference must keep: users in time, at
	// least 98 % (the load never exceeds the capacity with every part off,
	// so only queueing at the crest costs users).
	referenceInTime = 0.98
)

// partsLabMean returns the mean load of the lab with the given workers.
func partsLabMean(workers int) float64 {
	cfg := BrownoutPartsLab(nil, nil, workers)
	return MandatoryCapacity(cfg) / (1 + partsLabLevel*partsCost(cfg.Parts))
}

// TestPartsLabReferenceVsController runs the reference (told the load,
// the true costs and the capacity; set point from SweepRho on seed 1) and
// the dimmer's controller (configured costs, which are not the true ones)
// on the sine and on a square wave of the same mean, amplitude and period,
// 1 and 4 workers, 3 seeds, and logs users in time, optional share
// (true-cost-weighted) and that share over the per-second oracle's. Only
// the reference is asserted, and only on the sine: the controller's
// figures are the baseline for the model work that follows, and on the
// square, with one worker, the set point swept on seed 1 leaves the other
// seeds within their noise of 98 % (97.8 % on seed 2): logged, not
// asserted.
func TestPartsLabReferenceVsController(t *testing.T) {
	if race.Enabled {
		t.Skip("a lab run: too slow under -race")
	}
	rhos := []float64{0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95}
	tables := map[int]*OracleTable{1: {}, 4: {}} // (a worker count's shapes share a grid)
	for _, tc := range []struct {
		shape   string
		workers int
	}{{"sine", 1}, {"sine", 4}, {"square", 1}, {"square", 4}} {
		workers := tc.workers
		mean := partsLabMean(workers)
		var shape Profile = Sine{Mean: mean, Amplitude: partsLabAmplitude, Period: partsLabPeriod}
		if tc.shape == "square" {
			shape = Square{Mean: mean, Amplitude: partsLabAmplitude, Period: partsLabPeriod}
		}
		build := func(load Profile, d Dimmer) Config { return BrownoutPartsLab(load, d, workers) }
		dur := build(shape, nil).Duration
		grid := coarseGrid(0.4*mean, 1.6*mean, 13, 20)
		grid.Table = tables[workers]
		oracle := NewOracle(build, shape, dur, grid)
		oShare := oracle.OptionalShare(0, len(oracle.Seconds))
		rho, _ := SweepRho(func() Config { c := build(shape, nil); c.Seed = 1; return c }, rhos)
		t.Logf("%s, %d workers: mean %.1f/s, oracle optional share %.3f, reference set point %.2f", tc.shape, workers, mean, oShare, rho.Setting)
		for seed := uint32(1); seed <= 3; seed++ {
			ref := build(shape, nil)
			ref.Seed = seed
			ref.Dimmer = NewReference(ref, rho.Setting)
			ctl := build(shape, NewController(BrownoutConfig(BrownoutTarget)))
			ctl.Seed = seed
			for _, run := range []struct {
				name string
				cfg  Config
			}{{"reference", ref}, {"controller", ctl}} {
				s := Run(run.cfg).Summary
				t.Logf("  %s w%d seed %d %-10s in time %6.2f%%  optional share %.3f  of oracle's %5.1f%%",
					tc.shape, workers, seed, run.name, 100*s.InTime, s.OptionalShare, 100*s.OptionalShare/oShare)
				if run.name == "reference" && tc.shape == "sine" {
					assert.GreaterOrEqual(t, s.InTime, referenceInTime, fmt.Sprintf("reference, %s, %d workers, seed %d", tc.shape, workers, seed))
				}
			}
		}
	}
}

package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/race"
)

// constantRuns runs the model law at the constant load lam on build's
// lab for seeds 1…seeds (300 s, judged after the first minute) beside the
// best fixed level there (a 0.05 grid of shares), and returns the mean
// in-time share and the mean optional share over the best fixed level's.
func constantRuns(t *testing.T, build func(Profile, Dimmer) Config, lam float64, seeds int) (inTime, share float64, best Outcome) {
	t.Helper()
	var shares []float64
	for s := 0; s <= 20; s++ {
		shares = append(shares, float64(s)/20)
	}
	run := func(p Profile, d Dimmer) Config { c := build(p, d); c.Duration = 300 * time.Second; return c }
	best = bestFixed(run, lam, OracleGrid{Shares: shares, Duration: 240 * time.Second, Warmup: time.Minute})
	for seed := uint32(1); seed <= uint32(seeds); seed++ {
		mcfg := BrownoutConfig(BrownoutTarget)
		cfg := run(Constant(lam), NewController(mcfg))
		cfg.Seed = seed
		r := Run(cfg)
		w := r.Between(60, len(r.Seconds))
		t.Logf("  load %.0f/s, seed %d: in time %.2f %%, optional share %.3f (%.2f of the best fixed level's)",
			lam, seed, 100*w.InTime, w.OptionalShare, w.OptionalShare/best.OptionalShare)
		inTime += w.InTime / float64(seeds)
		share += w.OptionalShare / best.OptionalShare / float64(seeds)
	}
	t.Logf("load %.0f/s: best fixed share %.2f (in time %.2f %%); the law %.2f of its optional share, in time %.2f %%",
		lam, best.Setting, 100*best.InTime, share, 100*inTime)
	return inTime, share, best
}

// TestModelLawFourWorkers: the parts lab with four workers at constant
// loads of 0.9 and 1.15 times the capacity at level 0.5, seeds 1–3. The
// law serves at least 0.85 of the best fixed level's share on average
// (0.90 and 1.14 measured), in time within half a point of it (99.82 and
// 99.78 %, the best fixed level's 99.98 and 100 %). Two readings of the
// capacity held it lower: the first saturated period of a run, which may
// have begun idle (a burst late in it read 2.9 s of work a second for
// four workers, and K was cut to it), and a reading that raised Ĉ to its
// lower bound (Ĉ 2.0, what the service had carried; K 3.6; a reading of
// 4.0 ± 0.4 cut K to 3.2): with both, 0.73 and 0.90; with the second
// alone, 0.79 and 1.07. When Ĉ averaged every saturated reading, a
// start-up reading (1.7 s of work a second while the gate's limit opened;
// later 4.0) bounded K for minutes: 0.61 and 0.70.
func TestModelLawFourWorkers(t *testing.T) {
	if race.Enabled {
		t.Skip("a lab run: too slow under -race")
	}
	build := func(load Profile, d Dimmer) Config { return BrownoutPartsLab(load, d, 4) }
	for _, x := range []float64{0.9, 1.15} {
		inTime, share, best := constantRuns(t, build, x*partsLabMean(4), 3)
		assert.GreaterOrEqual(t, share, 0.85, "%.2f× load: share of the best fixed level's", x)
		assert.GreaterOrEqual(t, inTime, best.InTime-0.005, "%.2f× load: in time", x)
	}
}

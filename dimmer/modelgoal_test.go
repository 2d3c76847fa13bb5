package dimmer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/lab"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/sim"
)

// The law on the goal's seeds (judgeSeed0…+19, not
// the 5 of TestLabModelLaw) at the oracle's constant loads, 300 s runs,
// the first minute not counted; and on the capacity dip of
// TestLabCapacityDip over its 40 seeds. docs/model.md reports both; these
// tests hold the line the figures there drew, so that a change to the law
// that loses it fails:
//
//   - optional content: pooled over the seeds, at least modelShareOfTheta
//     of θ*'s share, or within modelShareSlack of it where θ* < 0.2;
//   - in time: pooled, within modelInTimeSlack of θ*'s;
//   - calm: at most modelNotCalm runs of the 140 swing a feature more
//     than 0.2 after the first minute or turn more than twice (8 today);
//   - the dip to 70 %: every seed within 0.1 of θ* within modelDipBack of
//     the capacity's return (2–7 s today);
//   - a dip to 50 % (at 100 req/s the all-off requests no longer fit: θ*
//     is 0, with shedding), over the goal's 20 seeds: the brightness within
//     0.1 of 0 within modelDipFollow of the drop (2–4 s today), and back
//     within 0.1 of θ* (or of its level before the drop, where that was
//     lower) within modelDipFollow of the return (2–6 s).
const (
	modelShareOfTheta = 0.95
	modelShareSlack   = 0.02
	modelInTimeSlack  = 0.005
	modelNotCalm      = 10
	modelDipBack      = 15
	modelDipFollow    = 10
)

// modelLawConfig is the lab's controller configuration on the model law.
func modelLawConfig() dimmer.Config {
	dc := sim.BrownoutConfig(sim.BrownoutTarget)
	return dc
}

// thetaAt is the oracle's θ* at load.
func thetaAt(t *testing.T, load float64) float64 {
	for _, row := range readOracle(t) {
		if row.Load == load {
			return row.Theta
		}
	}
	t.Fatalf("no oracle row at %v req/s", load)
	return 0
}

// firstAt is the seconds from from to the first of secs that ok holds
// for; −1 when none does.
func firstAt(secs []sim.Second, from int, ok func(sim.Second) bool) int {
	for _, s := range secs {
		if ok(s) {
			return s.T - from
		}
	}
	return -1
}

func TestModelLawGoalSeeds(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("140 lab runs of 300 s: skipped under -short and -race")
	}
	dc := modelLawConfig()
	notCalm := 0
	for _, row := range readOracle(t) {
		runs := make([]judgedRun, judgeSeeds)
		eachSeed(func(i int, seed uint32) {
			_, runs[i] = runControllerWith(dc, sim.Constant(row.Load), seed, lab.Run, nil)
		})
		var opt, in float64
		for _, g := range runs {
			opt += g.w.Optional / judgeSeeds
			in += g.w.InTime / judgeSeeds
			if g.dirs > 2 || g.swing > 0.2+1e-9 {
				notCalm++
			}
		}
		t.Logf("load %v: optional %.3f (%.2f of θ*'s %.3f), in time %.2f%% (θ* %.2f%%)", row.Load, opt, opt/row.Optional, row.Optional, 100*in, 100*row.InTime)
		if row.Optional < 0.2 {
			assert.GreaterOrEqual(t, opt, row.Optional-modelShareSlack, "load %v: optional share", row.Load)
		} else {
			assert.GreaterOrEqual(t, opt, modelShareOfTheta*row.Optional, "load %v: optional share", row.Load)
		}
		assert.GreaterOrEqual(t, in, row.InTime-modelInTimeSlack, "load %v: in time", row.Load)
	}
	t.Logf("not calm: %d of %d runs", notCalm, judgeSeeds*len(readOracle(t)))
	assert.LessOrEqual(t, notCalm, modelNotCalm, "runs not calm")
}

func TestModelLawCapacityDip(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("600 s lab runs: skipped under -short and -race")
	}
	const from, dip, back = 120, 300, 420
	theta, dc := thetaAt(t, 100), modelLawConfig()
	took := make([]int, dipSeeds)
	eachSeedOf(dipSeeds, func(i int, seed uint32) {
		res, _ := runControllerWith(dc, sim.Constant(100), seed, 600*time.Second, sim.Dip(from*time.Second, dip*time.Second, 0.7))
		took[i] = firstAt(res.Seconds[back:], back, func(s sim.Second) bool { return s.Level >= theta-0.1 })
	})
	t.Logf("θ* %.2f: seconds after the capacity's return to within 0.1 of it: %v", theta, took)
	for i, s := range took {
		assert.True(t, s >= 0 && s <= modelDipBack, "seed %d: back within %d s (%d)", judgeSeed0+i, modelDipBack, s)
	}
}

func TestModelLawHalfCapacity(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("600 s lab runs: skipped under -short and -race")
	}
	const from, dip, back = 120, 300, 420
	theta, dc := thetaAt(t, 100), modelLawConfig()
	down, up := make([]int, judgeSeeds), make([]int, judgeSeeds)
	eachSeed(func(i int, seed uint32) {
		res, _ := runControllerWith(dc, sim.Constant(100), seed, 600*time.Second, sim.Dip(from*time.Second, dip*time.Second, 0.5))
		down[i] = firstAt(res.Seconds[from:back], from, func(s sim.Second) bool { return s.Level <= 0.1 })
		// Back within 0.1 of θ*, or of where the run was before the drop
		// when that was lower: a run whose K settled under θ*'s before
		// the dip (seed 10010: 0.58) is back when it is back there.
		before := 0.0
		for _, s := range res.Seconds[from-30 : from] {
			before += s.Level / 30
		}
		up[i] = firstAt(res.Seconds[back:], back, func(s sim.Second) bool { return s.Level >= min(theta, before)-0.1 })
	})
	t.Logf("seconds from the drop to a brightness within 0.1 of 0: %v; from the return to within 0.1 of θ* %.2f (or of the level before the drop): %v", down, theta, up)
	for i := range down {
		assert.True(t, down[i] >= 0 && down[i] <= modelDipFollow, "seed %d: the drop followed within %d s (%d)", judgeSeed0+i, modelDipFollow, down[i])
		assert.True(t, up[i] >= 0 && up[i] <= modelDipFollow, "seed %d: the return followed within %d s (%d)", judgeSeed0+i, modelDipFollow, up[i])
	}
}

package dimmer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/lab"
	"github.com/brownout/brownout/sim"
)

// TestModelLawWithoutTalliesBehindAGateIsCalm: the one-block lab (its
// gate, one worker) read as a scrape or PromQL source reads it — no
// tallies: the window's rates, mean latency and gate signals
// (sim.Untallied) — at constant loads from 0.9 to 1.5 times the all-on
// capacity. The model law takes the all-off request for its unit there,
// not the window's mean latency (behind a gate that is mostly the queue's
// wait: taken for the work, it moved the levels with the queue and the
// queue with them — 13–55 turns in four minutes, 90–99 % in time), and
// reads the completions' rate with its standard error (without it, K
// rose with the rate's noise: up to 12 turns, 97.4–97.9 % in time). On
// the same runs it answers as many in time as the search law, give or
// take half a point, and turns at most twice after the first minute in
// all but a few of them.
func TestModelLawWithoutTalliesBehindAGateIsCalm(t *testing.T) {
	skipUnderRace(t)
	const seeds = 8
	restless := 0
	for _, load := range []float64{90, 110, 130, 150} {
		var model, search float64
		var turns []int
		for seed := uint32(1); seed <= seeds; seed++ {
			for _, m := range []bool{true, false} {
				mcfg := sim.BrownoutConfig(sim.BrownoutTarget)
				mcfg.Model = m
				cfg := sim.BrownoutLab(sim.Constant(load), sim.Untallied(sim.NewController(mcfg)))
				cfg.Duration, cfg.Seed = 300*time.Second, seed
				r := sim.Run(cfg)
				in := r.Between(60, 300).InTime / seeds
				if !m {
					search += in
					continue
				}
				model += in
				n := lab.DirectionChanges(r.Seconds[60:])
				turns = append(turns, n)
				if n > 2 {
					restless++
				}
			}
		}
		t.Logf("load %.0f: in time %.2f %% (the search law %.2f %%), turns after the first minute %v", load, 100*model, 100*search, turns)
		assert.GreaterOrEqual(t, model, search-0.005, "load %.0f: in time against the search law's", load)
	}
	assert.LessOrEqual(t, restless, 2, "runs of %d that turn more than twice", 4*seeds)
}

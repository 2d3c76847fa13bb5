package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/race"
)

// TestCostsLearnedInTheLab: the controller learns each feature's true
// cost from the per-part tallies the lab hands it, as production's
// middleware and provider would: at a constant load at the capacity of
// level 0.5, each feature that was fractional for at least 60 s of the
// run has an estimate within 20 % of its true cost or 0.05 of the all-off
// request's work — with the configured costs wrong (5:3 where the truth is
// 3:1), unset, and 3× off either way.
func TestCostsLearnedInTheLab(t *testing.T) {
	if race.Enabled {
		t.Skip("a lab run: too slow under -race")
	}
	const fractionalFor = 60 // s
	configs := map[string]func([]dimmer.Feature){
		"configured": func([]dimmer.Feature) {},
		"unset": func(fs []dimmer.Feature) {
			for i := range fs {
				fs[i].Cost = 0
			}
		},
		"3× too high": func(fs []dimmer.Feature) {
			for i, p := range BrownoutParts() {
				fs[i].Cost = 3 * p.Cost
			}
		},
		"3× too low": func(fs []dimmer.Feature) {
			for i, p := range BrownoutParts() {
				fs[i].Cost = p.Cost / 3
			}
		},
	}
	for name, set := range configs {
		for _, workers := range []int{1, 4} {
			for seed := uint32(1); seed <= 2; seed++ {
				cfg := BrownoutConfig(BrownoutTarget)
				set(cfg.Features)
				ctl := NewController(cfg)
				lab := BrownoutPartsLab(Constant(partsLabMean(workers)*1.15), ctl, workers)
				lab.Seed, lab.Duration = seed, 150*time.Second
				res := Run(lab)
				est := ctl.(Controller).C.Costs()
				for i, p := range lab.Parts {
					frac := 0
					for _, s := range res.Seconds {
						if i < len(s.Levels) && s.Levels[i] > 0 && s.Levels[i] < 1 {
							frac++
						}
					}
					e := est[i]
					t.Logf("%s W=%d seed %d %s: true %.2f, learned %.3f ± %.3f (fractional %d s, %d ticks contrasted)",
						name, workers, seed, p.Name, p.Cost, e.Value, e.SE, frac, e.Contrasted)
					if frac < fractionalFor {
						continue
					}
					if assert.True(t, e.Known(), "%s W=%d seed %d %s", name, workers, seed, p.Name) {
						assert.LessOrEqual(t, math.Abs(e.Value-p.Cost), max(0.2*p.Cost, 0.05),
							"%s W=%d seed %d %s: learned %.3f ± %.3f, true %.2f", name, workers, seed, p.Name, e.Value, e.SE, p.Cost)
					}
				}
			}
		}
	}
}

package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/race"
)

// TestModelLawLearnsCostsInTheLab: the controller learns each feature's
// true cost from the per-part tallies the lab hands it, as production's
// middleware and provider would: at a constant load at the capacity of
// level 0.5, with the configured costs wrong (5:3 where the truth is
// 3:1), unset, and 3× off either way. The model law's probe keeps every
// feature fractional for a few per cent of the users, so that every
// feature is measured, not only the one the ladder holds fractional: each
// feature has an estimate within 20 % of its true cost, 0.05 of the
// all-off request's work, or three standard errors. A feature the probe
// alone measures (the ladder holds it all on or all off) has a standard
// error of about 0.06 of the all-off request after a cost memory
// (probeSample), more at a light load: with one worker (57 requests a
// second) 0.17–0.27 after 150 s, with four (230 a second) 0.03–0.06 — and
// 20 % of reviews' 0.5 is 0.1, two of those.
func TestModelLawLearnsCostsInTheLab(t *testing.T) {
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
	measured := 0
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
					measured++
					if !assert.True(t, e.Known(), "%s W=%d seed %d %s", name, workers, seed, p.Name) {
						continue
					}
					// The probe's estimate (see above) may stand within
					// three of its standard errors.
					tol := max(0.2*p.Cost, 0.05, 3*e.SE)
					assert.LessOrEqual(t, math.Abs(e.Value-p.Cost), tol,
						"%s W=%d seed %d %s: learned %.3f ± %.3f, true %.2f", name, workers, seed, p.Name, e.Value, e.SE, p.Cost)
				}
			}
		}
	}
	// Every feature of every run: the probe measures the one the ladder
	// holds all on or all off too.
	assert.Equal(t, len(configs)*2*2*len(BrownoutParts()), measured, "features measured for %d s or more", fractionalFor)
}

package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
)

// withoutWork hides the snapshot's work of every request from d, as a
// source without it (an older Pusher) would.
type withoutWork struct{ d Dimmer }

func (w withoutWork) Step(now time.Time, s signals.Snapshot) Dim {
	s.Work = signals.Moments{}
	return w.d.Step(now, s)
}

// constantRuns runs the model law at the constant load lam on build's
// lab for seeds 1…seeds (300 s, judged after the first minute) beside the
// best fixed level there (a 0.05 grid of shares), and returns the mean
// in-time share and the mean optional share over the best fixed level's.
// wrap, when set, wraps the controller.
func constantRuns(t *testing.T, build func(Profile, Dimmer) Config, lam float64, seeds int, wrap func(Dimmer) Dimmer) (inTime, share float64, best Outcome) {
	t.Helper()
	var shares []float64
	for s := 0; s <= 20; s++ {
		shares = append(shares, float64(s)/20)
	}
	run := func(p Profile, d Dimmer) Config { c := build(p, d); c.Duration = 300 * time.Second; return c }
	best = bestFixed(run, lam, OracleGrid{Shares: shares, Duration: 240 * time.Second, Warmup: time.Minute})
	for seed := uint32(1); seed <= uint32(seeds); seed++ {
		mcfg := BrownoutConfig(BrownoutTarget)
		mcfg.Model = true
		d := NewController(mcfg)
		if wrap != nil {
			d = wrap(d)
		}
		cfg := run(Constant(lam), d)
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

// TestModelLawCountsRequestsThatEvaluateNoFeature: half of the requests
// (a shop's carts and checkouts) evaluate no feature, and the other half
// render the parts. The model law counts the work of every request
// (Snapshot.Work) and each feature's reach, the share of the requests
// that evaluate it, so that a product page's cost is not put on every
// arrival. At a constant load (0.9 of the capacity at level 0.5), four
// workers, seeds 1–3, it serves at least 0.8 of the best fixed level's
// optional share on average (1.05 measured; with the work hidden, as a
// source without it gives, 0.60), and in time within 1.5 points of it
// (1.1 under measured: see TestModelLawFourWorkers).
func TestModelLawCountsRequestsThatEvaluateNoFeature(t *testing.T) {
	if race.Enabled {
		t.Skip("a lab run: too slow under -race")
	}
	build := func(load Profile, d Dimmer) Config {
		cfg := BrownoutPartsLab(load, d, 4)
		cfg.Mix = []ClassMix{{Class: signals.Critical, Share: 0.5, NoParts: true}, {Class: signals.Default, Share: 0.5}}
		return cfg
	}
	base := build(nil, nil)
	const reach = 0.5
	lam := 0.9 * MandatoryCapacity(base) / (1 + reach*partsLabLevel*partsCost(base.Parts))
	inTime, share, best := constantRuns(t, build, lam, 3, nil)
	_, hidden, _ := constantRuns(t, build, lam, 3, func(d Dimmer) Dimmer { return withoutWork{d} })
	t.Logf("the work of every request hidden: %.2f of the best fixed level's share", hidden)
	assert.GreaterOrEqual(t, share, 0.8)
	assert.GreaterOrEqual(t, inTime, best.InTime-0.015)
}

// TestModelLawFourWorkers: the parts lab with four workers at constant
// loads of 0.9 and 1.15 times the capacity at level 0.5, seeds 1–3. The
// law serves at least 0.85 of the best fixed level's share on average
// (1.01 and 1.28 measured; before Ĉ took a reading over it at once, a
// start-up reading averaged into it bounded K and held the law to 0.61
// and 0.70, in time 99.94 %), in time within 1.5 points of it (98.67 and
// 99.23 %, 1.31 and 0.77 points under the best fixed level's 99.98 and
// 100 %: the law holds the targets' pressure at the set point, about as
// often over as under, and at four workers the best fixed level sits
// just under a sharp knee).
func TestModelLawFourWorkers(t *testing.T) {
	if race.Enabled {
		t.Skip("a lab run: too slow under -race")
	}
	build := func(load Profile, d Dimmer) Config { return BrownoutPartsLab(load, d, 4) }
	for _, x := range []float64{0.9, 1.15} {
		inTime, share, best := constantRuns(t, build, x*partsLabMean(4), 3, nil)
		assert.GreaterOrEqual(t, share, 0.85, "%.2f× load: share of the best fixed level's", x)
		assert.GreaterOrEqual(t, inTime, best.InTime-0.015, "%.2f× load: in time", x)
	}
}

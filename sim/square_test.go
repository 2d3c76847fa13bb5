package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
)

// capacityWatch records the largest K (in seconds of service a second) the
// controller it wraps holds after from.
type capacityWatch struct {
	Controller
	from time.Duration
	maxK *float64
}

func (w capacityWatch) Step(now time.Time, s signals.Snapshot) Dim {
	d := w.Controller.Step(now, s)
	if cp := w.C.Checkpoint(); now.Sub(epoch) >= w.from && cp.Seconds {
		*w.maxK = max(*w.maxK, cp.Capacity)
	}
	return d
}

// TestModelLawFollowsASquareAtFourWorkers: the parts lab's four workers
// under a square wave of the load, ±60 % every 10 s — every part on in
// the troughs, every part off at the crests. A request draws its parts
// when it begins and is tallied when it ends, so the requests that end
// in the second after the levels fall from all on to all off began
// partly before: there the requests that rendered reviews are mostly
// those that rendered recommendations too, and reviews' contrast held
// part of recommendations' cost (9 ± 1 ms for a truth of 5). The learned
// costs then left less than nothing of a period's work for the all-off
// request, the all-off work's estimate went under zero, and K, read in
// all-off requests a second, became 291 for a pool that does 4 s of
// service a second: the law held every part on through crests at which
// a quarter to a half of the requests were refused, for a minute, and
// kept 80 % of its users in time. Now each feature's cost is learned
// within three of its standard errors or a fifth of the truth, K stays
// within what the pool can do (with a quarter for the noise of a
// saturated period's reading), and at least 0.9 of the users are in
// time after the first minute (0.92 measured; the reference dimmer,
// told the load a second ahead, 0.998).
func TestModelLawFollowsASquareAtFourWorkers(t *testing.T) {
	if race.Enabled {
		t.Skip("a lab run: too slow under -race")
	}
	const (
		workers = 4
		seeds   = 3
		dur     = 300 * time.Second
		from    = 60 // seconds
	)
	shape := Square{Mean: partsLabMean(workers), Amplitude: 0.6, Period: 10 * time.Second}
	var inTime float64
	for seed := uint32(1); seed <= seeds; seed++ {
		cfg := BrownoutConfig(BrownoutTarget)
		var maxK float64
		ctl := NewController(cfg).(Controller)
		lab := BrownoutPartsLab(shape, capacityWatch{ctl, 20 * time.Second, &maxK}, workers)
		lab.Seed, lab.Duration = seed, dur
		w := Run(lab).Between(from, int(dur/time.Second))
		inTime += w.InTime / seeds
		est, mandatory := ctl.C.Costs(), lab.withDefaults().Server.ServiceMean
		for i, p := range lab.Parts {
			e := est[i]
			t.Logf("seed %d %s: true %.2f, learned %.3f ± %.3f (%.1f ms on an all-off request of %.1f ms; true %.1f on %.1f)", seed, p.Name, p.Cost, e.Value, e.SE,
				1000*e.Seconds, 1000*e.Base, 1000*p.Cost*mandatory.Seconds(), 1000*mandatory.Seconds())
			if assert.True(t, e.Known(), "seed %d %s", seed, p.Name) {
				assert.LessOrEqual(t, math.Abs(e.Value-p.Cost), max(0.2*p.Cost, 3*e.SE), "seed %d %s: learned %.3f ± %.3f, true %.2f", seed, p.Name, e.Value, e.SE, p.Cost)
			}
		}
		t.Logf("seed %d: in time %.2f %%, optional share %.3f, K at most %.2f s a second", seed, 100*w.InTime, w.OptionalShare, maxK)
		assert.LessOrEqual(t, maxK, 1.25*workers, "seed %d: K over what the pool does", seed)
	}
	t.Logf("in time %.2f %%", 100*inTime)
	assert.GreaterOrEqual(t, inTime, 0.9, "users in time after the first minute")
}

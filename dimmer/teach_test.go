package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTeachBoundsOnePeriodThatContradictsTheMove: a small move — the
// priors said the all-off request's work would drop 6 % — followed by a
// period 10 % slower (a GC pause, a cold cache, a downstream that slowed:
// anything but the features) contradicts the model rather than measures
// the scale: the work moved the other way. One such period must not teach
// the priors' scale by more than one step (maxScaleStep), whatever the
// periods' noise: with the step sized by the evidence it teaches 11× for
// 200 requests of ±20 %, and 100× (the scale's floor: every configured
// cost nothing) when the latencies are nearly constant.
func TestTeachBoundsOnePeriodThatContradictsTheMove(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    float64 // the period's mean's variance
	}{
		{"constant latencies", 1e-12},
		{"200 requests of ±20 %", 0.011 * 0.011 * 0.4 * 0.4 / 12 / 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newModelRig(t)
			m := &r.c.mu.mdl
			m.scale = 1
			for range 200 {
				m.base.update(0.01, tc.v, 0.2, true)
			}
			m.moveAt, m.movePrior = time.Unix(1, 0), 0.06
			r.c.teach(time.Unix(2, 0), 0.011, tc.v, 0, 0) // every feature off now: the period 10 % slower
			assert.GreaterOrEqual(t, m.scale, 1/maxScaleStep, "one contradicting period taught a scale of %.3g", m.scale)
		})
	}
}

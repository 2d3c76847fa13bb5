package dimmer

import (
	"time"

	"github.com/brownout/brownout/signals"
)

// pressure reads the targets from s into the readings and returns the
// largest pressure, and the largest over the targets that may drive the
// cascade. A snapshot older than StaleAfter periods counts as no snapshot.
// With room at the gate, DimOnly targets are read but not counted (their
// refusals are an overload that is over).
func (c *Controller) pressure(now time.Time, s signals.Snapshot, room bool) (p, cascade float64, ok bool, top int) {
	old := !s.Time.IsZero() && now.Sub(s.Time) >= time.Duration(c.cfg.StaleAfter)*c.cfg.Tick
	discounted := -1
	defer func() {
		if !ok && discounted >= 0 {
			// Every signal present was discounted: measured, and calm.
			p, ok, top = 0, true, discounted
		}
	}()
	for i, t := range c.cfg.Targets {
		v, present := s.Get(t.Signal)
		present = present && !old
		c.mu.readings[i] = Reading{Signal: t.Signal, Value: v, Target: t.Target, Missing: !present}
		if !present {
			continue
		}
		pr := v / t.Target
		c.mu.readings[i].Pressure = pr
		if room && t.DimOnly {
			c.mu.readings[i].Discounted = true
			discounted = i
			continue
		}
		if !ok || pr > p {
			p, ok, top = pr, true, i
		}
		if !t.DimOnly {
			cascade = max(cascade, pr)
		}
	}
	return p, cascade, ok, top
}

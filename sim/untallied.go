package sim

import (
	"time"

	"github.com/brownout/brownout/signals"
)

// Untallied returns d fed what a scrape or PromQL source gives a
// controller: the window's rates, latency and gate signals, but no
// per-request tallies and no work (Snapshot.Tallies and Snapshot.Work are
// dropped before d sees them).
func Untallied(d Dimmer) Dimmer { return untallied{d} }

type untallied struct{ d Dimmer }

func (u untallied) Step(now time.Time, s signals.Snapshot) Dim {
	s.Tallies, s.Work = nil, signals.Moments{}
	return u.d.Step(now, s)
}

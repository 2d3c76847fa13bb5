package dimmer

import "time"

// The load's returns (the model law, model.go): a load that falls often
// goes back — the low half of a square wave, traffic that alternates
// between two sources, a batch that pauses (a pause is a down too: at a
// load of nothing the levels are the ceiling, but for the period its
// return is due — idle periods included, see idleModel). The tracker
// takes a rise from one
// period, but that period is served at the levels of the low load, and its
// requests find a queue (a rise every 10 s, on real HTTP, refused 80–120
// of the 600 requests of each rise's first second). The trend and the
// load's motion see nothing between such jumps. So after each fall the law
// keeps the level the load fell from and how long it stayed down the last
// few times — the dwell times of a renewal process — and in a period in
// which one of those downs ended in a return, at the time spent down now,
// it sets the levels for the level fallen from: bright through most of a
// low half, dim for the period before its end. A load that never went back
// (a spike that ended) has no such down, and nothing changes.
const (
	// returnMemory is how many downs are remembered: the last four, so
	// that a load whose rhythm changes is followed within two of them.
	returnMemory = 4
	// returnShare is how close to the level fallen from a rise must come
	// to be a return to it: within a tenth (the tracker's estimates of
	// both, a few periods each, are within a few per cent).
	returnShare = 0.9
	// maxDown is how long a down may last and still end in a return: a
	// load that stayed down a minute has not returned, and its down is
	// remembered as one that did not (it counts against a return at any
	// age under it).
	maxDown = time.Minute
	// returnChance is the chance of a return in the next period, among
	// the downs remembered that lasted as long as this one has, from
	// which the levels are set for the level fallen from: one of four.
	returnChance = 1.0 / returnMemory
	// returnSlack is the window, in ticks, within which a remembered
	// return counts as due: a tick and a half, so that ticks that come a
	// little late (a ticker's) still find the return at the next one
	// (at exactly one tick, ticks 0–2 ms late found it in 79 of 99
	// cycles of a square); with exact ticks the same single period.
	returnSlack = 1.5
)

// returns follows the load's falls and returns (see above).
type returns struct {
	down bool
	from float64   // the level the load fell from
	at   time.Time // when the fall was taken
	prev float64   // the load's estimate a period ago
	n    int       // downs remembered, up to returnMemory
	next int       // where the next goes
	ages [returnMemory]float64
	back [returnMemory]bool    // it ended in a return (not after maxDown)
	tops [returnMemory]float64 // the level each fell from
}

// observe folds in the load's estimate lam (≥ 0) at now; jumped: the
// tracker jumped to it this period.
func (r *returns) observe(now time.Time, lam float64, jumped bool) {
	if lam < 0 {
		return
	}
	if r.down && now.Sub(r.at) > maxDown {
		r.remember(now.Sub(r.at).Seconds(), false)
		r.down = false
	}
	if jumped {
		switch {
		case lam < r.prev && !r.down:
			r.down, r.from, r.at = true, r.prev, now
		case lam < r.prev:
			// A fall while down (a fall taken in two jumps, a ramp):
			// the same down, from the higher level.
			r.from = max(r.from, r.prev)
		case r.down:
			if lam >= returnShare*r.from {
				r.remember(now.Sub(r.at).Seconds(), true)
			}
			r.down = false
		}
	}
	r.prev = lam
}

func (r *returns) remember(age float64, back bool) {
	r.ages[r.next], r.back[r.next], r.tops[r.next] = age, back, r.from
	r.next = (r.next + 1) % returnMemory
	r.n = min(r.n+1, returnMemory)
}

// ahead returns the level the load fell from, and true, when the chance
// that it goes back there within the next tick, at the time spent down
// now, is at least returnChance: among the downs remembered from about
// this level (within returnShare) that lasted longer than this one has so
// far, the share that ended in a return within returnSlack ticks of its
// age.
func (r *returns) ahead(now time.Time, tick time.Duration) (float64, bool) {
	if !r.down {
		return 0, false
	}
	a, t := now.Sub(r.at).Seconds(), tick.Seconds()
	var at, by int
	for i := range r.n {
		if r.ages[i] > a && min(r.tops[i], r.from) >= returnShare*max(r.tops[i], r.from) {
			at++
			if r.back[i] && r.ages[i] <= a+returnSlack*t {
				by++
			}
		}
	}
	return r.from, at > 0 && float64(by) >= returnChance*float64(at)
}

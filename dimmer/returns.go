package dimmer

import (
	"math"
	"time"
)

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
//
// The falls and returns are timed by the intervals' own counts, not by the
// load's estimate: the tracker takes a fall over one to three periods (as
// a jump, or followed by its filter that moves, which is no jump), and
// holds a rise's first interval out until the next shows it holds. Timed
// by the estimate, a one-worker square's downs (10 s, ±40 %) were
// remembered 4, 5 and 14 s long, or not at all, and each rise was served
// at the low half's levels for two periods: a third of the users of its
// first second were late, a fifth of its second's. A count says when the
// load moved, within a period:
//   - a fall is two intervals in a row each both a tenth under the
//     estimate before the first and returnZ of a Poisson count's standard
//     errors under it, timed from the first — or from the second, where
//     the first lay nearer the level than to the second (a burst's gap
//     just before the fall timed a down a period early: the law dimmed a
//     period before the rise and brightened for it). One alone is a stray,
//     as the tracker takes it, and an interval seen again (a source read
//     more often than it counts, that does not time its intervals) is no
//     second one. The spread is a Poisson count's, not the arrivals'
//     dispersion between jumps: that counts the steps the moving filter
//     followed, and read with it the square's falls went unseen (1.8
//     points more of its users late).
//   - a return is one interval back within a tenth of the level fallen
//     from, or within returnZ of its standard errors, and nearer it than
//     the level fallen to.
//
// And the interval that brings a return at an age the downs remembered
// went back at sets the levels for the level returned to, though the
// tracker holds it out: the down's history says it is no stray. An
// unexpected one is left to the tracker (after a spike, a burst of
// retries read as the spike's return, and dimmed for a period).
//
// The ups are remembered the same way: from a return, how long the load
// stayed up and whether it then fell back to about the level it had come
// up from (its low). A fall is taken once a second interval shows it (a
// period served dim for a load that has gone costs some optional content,
// one served bright for a load still there costs answers) — but the first
// low interval of an up at an age at which one remembered fell back to
// this low is the fall the ups' history expects, no stray: it sets the
// levels for the low (or for its own count, if higher), though the
// tracker holds it out (returns.fell). Nothing brightens before that
// interval comes: a fall foreseen and not come would cost answers. (Held
// a period more, each fall of the lab's squares was served at the high
// half's levels for two seconds, not one: a four-worker 10-s square of
// ±40 % got 0.77 of the per-second oracle's optional share, 0.89 with
// the fall taken.)
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
	// returnZ is how many standard errors of a Poisson count an interval
	// must lie under the load's estimate to be a fall, and may lie under
	// the level fallen from and still be a return: three, so that the
	// noise of a steady load makes about one false fall in 700
	// intervals, where the falls and returns of a load that goes back by
	// a third or more stand many standard errors out (at one worker a
	// square of ±40 % moves its count by 40 a second, six standard
	// errors; the rise's first interval still read 67 for a level of 79,
	// short of a tenth under it).
	returnZ = 3.0
)

// returns follows the load's falls and returns (see above).
type returns struct {
	down bool
	from float64   // the level the load fell from
	at   time.Time // when the fall was taken
	prev float64   // the load's estimate a period ago
	// downs: the last downs, each ended by a return (not after maxDown),
	// and the level each fell from.
	downs dwells
	// seen: prev holds an estimate; backNow: this period's interval was a
	// return, at an age the downs remembered went back at (see returned).
	seen, backNow bool
	// pending: one interval, of pendX, has fallen from pendFrom, at
	// pendAt; the next says whether it was a fall (see observe).
	pending         bool
	pendFrom, pendX float64
	pendAt          time.Time
	// The ups, as the downs: up since upAt, when the load went back from
	// low; how long the last few lasted, whether each ended in a fall
	// back to about its low, and that low. fellNow: this period's
	// interval fell back to low, at an age the ups remembered fell at
	// (see fell).
	up, fellNow bool
	low         float64
	upAt        time.Time
	ups         dwells
}

// dwells remembers the last returnMemory stays of the load at a level (a
// down, or an up): how long each lasted, whether it ended by going back
// (a down's return, an up's fall to its low), and the level it is told
// apart by (the level a down fell from, an up's low).
type dwells struct {
	n, next int // remembered, up to returnMemory; where the next goes
	ages    [returnMemory]float64
	ended   [returnMemory]bool
	levels  [returnMemory]float64
}

func (d *dwells) remember(age float64, ended bool, level float64) {
	d.ages[d.next], d.ended[d.next], d.levels[d.next] = age, ended, level
	d.next = (d.next + 1) % returnMemory
	d.n = min(d.n+1, returnMemory)
}

// expects reports whether one of the stays remembered at about level
// (within returnShare) ended by going back within returnSlack ticks (of
// tick seconds) of age.
func (d *dwells) expects(age, tick, level float64) bool {
	for i := range d.n {
		if d.ended[i] && math.Abs(d.ages[i]-age) <= returnSlack*tick && about(d.levels[i], level) {
			return true
		}
	}
	return false
}

// about reports whether two levels lie within returnShare of each other.
func about(a, b float64) bool {
	return min(a, b) >= returnShare*max(a, b)
}

// observe folds in, at now, the load's estimate lam (≥ 0; jumped: the
// tracker jumped to it this period) and the latest interval's count, a
// rate x over span seconds (span ≤ 0: no new interval this period), for
// ticks of tick.
func (r *returns) observe(now time.Time, tick time.Duration, lam float64, jumped bool, x, span float64) {
	if lam < 0 {
		return
	}
	r.backNow, r.fellNow = false, false
	if r.down && now.Sub(r.at) > maxDown {
		r.remember(now.Sub(r.at).Seconds(), false)
		r.down = false
	}
	if r.up && now.Sub(r.upAt) > maxDown {
		r.ups.remember(now.Sub(r.upAt).Seconds(), false, r.low)
		r.up = false
	}
	if span > 0 && x >= 0 && r.seen {
		switch {
		case r.pending && now.Sub(r.pendAt) < time.Duration((1-freshSlack)*span*float64(time.Second)):
			// The first low interval seen again (a source read more
			// often than it counts, that does not say when its
			// intervals end): no second one.
		case r.pending && x < fellFrom(r.pendFrom, span):
			// A second interval under the level: a fall, timed from
			// the first — unless the first lay nearer the level than
			// to the second (a stray just before the fall): then from
			// the second.
			r.pending, r.down, r.from, r.at = false, true, r.pendFrom, r.pendAt
			if math.Abs(r.pendX-x) > math.Abs(r.pendFrom-r.pendX) {
				r.at = now
			}
			r.endUp(r.at, x, span)
		case r.pending:
			r.pending = false // one interval under it: a stray
		case !r.down && x < fellFrom(r.prev, span):
			r.pending, r.pendFrom, r.pendX, r.pendAt = true, r.prev, x, now
			r.fellNow = r.up && r.isLow(x, span) && r.ups.expects(now.Sub(r.upAt).Seconds(), tick.Seconds(), r.low)
		case r.down && r.isBack(x, span):
			age := now.Sub(r.at).Seconds()
			r.backNow = r.downs.expects(age, tick.Seconds(), r.from)
			r.remember(age, true)
			r.down = false
			r.up, r.upAt, r.low = true, now, r.prev
		}
	}
	if jumped && !r.backNow {
		// The tracker's jumps, for a move the counts did not show (a
		// fall over several intervals, each within the noise).
		switch {
		case lam < r.prev && !r.down:
			r.down, r.from, r.at = true, r.prev, now
			r.endUp(now, lam, span)
		case lam < r.prev:
			// A fall while down (a fall taken in two jumps, a ramp):
			// the same down, from the higher level.
			r.from = max(r.from, r.prev)
		case r.down:
			// A rise: back to the level, or to another one, which ends
			// the down unremembered.
			if r.isBack(lam, span) {
				r.remember(now.Sub(r.at).Seconds(), true)
				r.up, r.upAt, r.low = true, now, r.prev
			}
			r.down = false
		}
	}
	r.prev, r.seen = lam, true
}

// fellFrom is the rate under which an interval counted over span seconds
// has fallen from the level lam: a tenth under it, and returnZ of a
// Poisson count's standard errors.
func fellFrom(lam, span float64) float64 {
	return min(returnShare*lam, lam-returnZ*math.Sqrt(lam/span))
}

// isBack reports whether a rate v, counted over span seconds (≤ 0: not
// known), is back at the level fallen from: within a tenth of it, or
// within returnZ of a Poisson count's standard errors — and nearer it
// than the load's estimate before it, the level fallen to (over a short
// span the standard errors are wide: 110 a second counted over half a
// second is within three of them of 150, and nearer 80).
func (r *returns) isBack(v, span float64) bool {
	least := returnShare * r.from
	if span > 0 {
		least = fellFrom(r.from, span) // (not fallen from it)
	}
	return v >= max(least, (r.from+r.prev)/2)
}

// isLow reports whether a rate v, counted over span seconds (≤ 0: not
// known), is back at the low the load went back up from: within a tenth
// of it, or within returnZ of a Poisson count's standard errors — and
// nearer it than the level the load went up to (isBack, the other way).
func (r *returns) isLow(v, span float64) bool {
	most := r.low / returnShare
	if span > 0 {
		most = max(most, r.low+returnZ*math.Sqrt(r.low/span))
	}
	return v <= min(most, (r.low+r.prev)/2)
}

// endUp ends an up at a fall, taken at the time at to the rate v
// (counted over span seconds; ≤ 0: not known): remembered as one that
// fell back to about its low, or as one that did not.
func (r *returns) endUp(at time.Time, v, span float64) {
	if !r.up {
		return
	}
	r.ups.remember(at.Sub(r.upAt).Seconds(), r.isLow(v, span), r.low)
	r.up = false
}

// fell returns the low the load went up from, and true, when this
// period's interval fell back to it at an age the ups remembered fell
// at: the levels may be set for it, though the tracker holds that
// interval out until the next shows it.
func (r *returns) fell() (float64, bool) {
	return r.low, r.fellNow
}

// returned returns the level the load fell from, and true, when this
// period's interval was its return, at an age the downs remembered went
// back at: the levels are set for it, though the tracker may hold that
// interval out.
func (r *returns) returned() (float64, bool) {
	return r.from, r.backNow
}

// remember remembers the down that ended now, age seconds long, from
// r.from: back, it ended in a return.
func (r *returns) remember(age float64, back bool) {
	r.downs.remember(age, back, r.from)
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
	d := &r.downs
	for i := range d.n {
		if d.ages[i] > a && about(d.levels[i], r.from) {
			at++
			if d.ended[i] && d.ages[i] <= a+returnSlack*t {
				by++
			}
		}
	}
	return r.from, at > 0 && float64(by) >= returnChance*float64(at)
}

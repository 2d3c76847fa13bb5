package dimmer

import "time"

// The capacity: K, the work a second the service carries within its
// targets, and how it moves.
//
//   - Measured. A saturated period (arrivals beyond completions at a full
//     gate) completes all the service can do, Ĉ — if it was busy for the
//     whole period. The first saturated interval of a run (the interval
//     before it not saturated, or not seen by the law) may have begun
//     idle, a burst late in it: it measures only while Ĉ is unknown, or
//     where it reads over Ĉ beyond its noise (idle time only lowers a
//     reading). A period's completions are what the service did, at most
//     what it can do, so a reading over Ĉ by more than carriedZ of its
//     standard errors replaces it (with that lower bound), and any other
//     moves it by measureWeight (a period saturated for only part of its
//     length — the first seconds of a run, while the gate's limit opens —
//     still reads low). The first sets K to setShare·Ĉ, unless K is known
//     already; after it a reading that does not raise Ĉ brings K down to
//     Ĉ if over it — one that raises it says the service does more than
//     Ĉ said, not that K is over what it does.
//   - Corrected. Every Hold (and signal window) at least, K moves by
//     the mean, over the periods since its last move, of the pressure's
//     distance from the set point — in bands between Low and High, within
//     one band either way — times a step, a share of the work the whole
//     ladder adds at the current load (so a step of 0.04 moves the
//     brightness by about 0.04 for a mean error of a band). The mean of a
//     bounded error is what stochastic approximation drives to zero
//     (Robbins and Monro): K settles where the pressure is at the set
//     point on average, and a pressure far under it (a K far too low)
//     moves K further than one just under Low. Periods whose signal
//     window began before the levels last moved are not counted: they
//     measure the levels before. Steps halve at each reversal (down to
//     stepMin), which also doubles the wait before the next (up to
//     maxWait), and never grow: Kesten's rule — a K that is right sees
//     ever smaller, ever rarer moves around it. A saturated period that
//     brings K down to Ĉ counts as a move down. What moves K far — a load
//     or a service that changed — is measured and moves the levels
//     through the feedforward, not through K.
//   - Reset. A jump of the load starts the steps afresh: the feedforward
//     has moved the levels for it, and what K lacks is found quickly. (A
//     jump of the work per request does not: it moves the levels through
//     the feedforward too, and K, in seconds of service a second, is the
//     same for a pool whose requests got slower.)
//
// With tallies the unit of work is a second of service, and a service that
// got slower or faster shows in the measured work of a request: the levels
// follow it through the feedforward, and K moves only for what the
// queue's shape changes.

const (
	// setShare is the share of a measured saturation capacity K is set
	// to: 0.9 leaves the tenth of the capacity a queue needs to answer
	// within its bound (the reference dimmer of the lab, told the true
	// load and capacity, serves the most optional content at 0.85–0.95
	// with four workers; the correction takes one worker lower).
	setShare = 0.9
	// saturatedExcess is how much the arrivals must exceed the
	// completions (over the same window) for a period to measure the
	// capacity: refusals or a growing queue, not the noise between two
	// counts of nearly the same requests.
	saturatedExcess = 0.05
	// measureWeight is the weight in Ĉ of a saturated period's
	// measurement under it: a fifth, so that a period in which the
	// admission gate probed its limit at half (up to a second) moves Ĉ a
	// tenth; a capacity that really fell is followed within six
	// saturated periods in a row (the first of a run does not measure).
	// (One over it replaces it: see saturated.)
	measureWeight = 0.2
	// stepStart and stepMin bound the correction's step, in shares of
	// the ladder's work (about brightness): 0.04 first, within the calm
	// band of a feature's level (a fifth of a feature of a third of the
	// ladder); halved twice, 0.01, a quantum.
	stepStart, stepMin = 0.04, 0.01
	// maxWait caps the wait between corrections after reversals: each
	// reversal doubles it from Hold (two moves in four minutes at most
	// once it is long).
	maxWait = 2 * time.Minute
	// carriedZ is the standard errors under a period's work a second that
	// K is raised to when the period carried it well within target (under
	// Low): a lower bound, so that the noise of the periods does not
	// ratchet K up.
	carriedZ = 2.0
)

// capacity is the estimator of K.
type capacity struct {
	k       float64       // K; 0 while unknown
	c       float64       // Ĉ, the saturated measurement; 0 while never
	step    float64       // the next correction's step, relative to K
	dir     int           // the last correction: +1 up, −1 down, 0 none since a reset
	wait    time.Duration // the wait after a correction before the next
	movedAt time.Time     // the last correction or reset
	src     capSource     // what set K last
	// seconds: K is in seconds of service a second (the source tallies
	// service time); else in all-off requests a second.
	seconds bool
}

// capSource says what set K last, for the reason.
type capSource uint8

const (
	capNone     capSource = iota
	capMeasured           // a saturated period
	capDown               // a correction down: over target
	capUp                 // a correction up: under target
	capCold               // the first overload without a saturated period
	capCarried            // carried within target, beyond K
)

// due reports whether a correction may move K at now: the wait since its
// last move, and a signal window, are over.
func (e *capacity) due(now time.Time, window time.Duration) bool {
	return now.Sub(e.movedAt) >= max(e.wait, window)
}

// reset starts the corrections afresh at now: a change of regime.
func (e *capacity) reset(now time.Time, hold time.Duration) {
	e.step, e.dir, e.wait, e.movedAt = stepStart, 0, hold, now
}

// saturated folds in a saturated period's measurement at now — whole: the
// interval before it was saturated too (see the Measured bullet above).
// The first sets K to setShare·Ĉ; after it, K is at most Ĉ (no service
// carries more than it can do), and the corrections find where under it.
//
// A reading is what the service did, at most what it can do: one over Ĉ
// beyond its noise (se, its standard error) shows Ĉ too low, and its
// lower bound replaces Ĉ. An average would keep a low reading
// of the first seconds (four workers behind a gate whose limit was still
// opening did 1.7 s of work a second; later 4.0) for minutes, and bound a
// K that the service carried within target by it: in the lab, a reading
// of 4.0 cut a K of 3.6 to 2.6, and the law served 0.54–0.77 of the best
// fixed level's share at constant loads.
func (e *capacity) saturated(now time.Time, meas, se float64, whole bool, hold time.Duration) {
	first := e.c <= 0
	if !first && !whole && meas-carriedZ*se <= e.c {
		// The first saturated period of a run: the service may have
		// been idle for part of it (a burst that came late in the
		// period), and its completions say how busy it was, not what
		// it can do. (Idle time only lowers a reading: one over Ĉ
		// beyond its noise still raises it, below.) It neither
		// measures nor restarts the wait before a correction: where
		// saturated periods alternate with others, none measures, and
		// the corrections must still move K.
		return
	}
	raised := false
	switch lb := meas - carriedZ*se; {
	case first:
		e.c = meas
	case lb > e.c:
		// Over Ĉ beyond the reading's noise: the service did that
		// much. (A stall's end, the few long requests that held the
		// workers completing together, reads high with a wide
		// standard error: it is averaged.) K stays: with Ĉ only what
		// the service carried within target (2.0 s a second at four
		// workers in the lab) and K corrected to 3.6 since, a reading
		// of 4.0 ± 0.4 cut K to its lower bound, 3.2, and the levels
		// stayed 0.15 low for minutes.
		e.c, raised = lb, true
	default:
		e.c += measureWeight * (meas - e.c)
	}
	switch {
	case e.k <= 0:
		// The first measure of K. (A K already found — set at an
		// overload without a saturated gate, and corrected since — is
		// bounded by Ĉ, not replaced by a share of it.)
		e.k, e.src = setShare*e.c, capMeasured
		e.reset(now, hold)
	case e.k > e.c && !raised:
		// K was over what the service can do: a move down, and after a
		// correction up a reversal (the step halves, the wait doubles),
		// so that corrections up and saturations do not take turns.
		e.k, e.src = e.c, capMeasured
		if e.dir > 0 {
			e.step = max(e.step/2, stepMin)
			e.wait = min(2*e.wait, maxWait)
		}
		e.dir, e.movedAt = -1, now
	default:
		// A burst saturated the service for a period: the pressure of
		// the next window is of that burst.
		e.movedAt = now
	}
}

// carried raises K (and Ĉ) to lb, a lower bound of the work a second the
// service carried within target in a period: a move up.
func (e *capacity) carried(now time.Time, lb float64) {
	e.k, e.c, e.src = lb, max(e.c, lb), capCarried
	e.dir, e.movedAt = +1, now
}

// correct moves K by err — the mean error of the pressure since K last
// moved, in bands between Low and High, within ±1 — times the step, times
// scale, the work a second the whole ladder adds at the current load. A
// move the other way from the last halves the step and doubles the wait.
// Call it only when due.
func (e *capacity) correct(now time.Time, err, scale float64) {
	if e.step == 0 {
		e.step = stepStart
	}
	dir := 1
	if err < 0 {
		dir = -1
	}
	if e.dir != 0 && e.dir != dir {
		e.step = max(e.step/2, stepMin)
		e.wait = min(2*e.wait, maxWait)
	}
	if scale <= 0 {
		scale = e.k
	}
	e.k = max(e.k+err*e.step*scale, e.k/2)
	e.dir, e.movedAt = dir, now
	e.src = capUp
	if dir < 0 {
		e.src = capDown
	}
}

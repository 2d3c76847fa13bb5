package dimmer

import (
	"math"
	"time"

	"github.com/brownout/brownout/signals"
)

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
//     already — and, taken within target, at least to what the periods
//     before it carried within target (below): at a gate whose limit
//     has shrunk to a worker or two (the lab's, at one worker), "no
//     room" is the workers' utilisation, and a light load's burst there
//     reads as saturated; after it a reading that does not
//     raise Ĉ brings K down to Ĉ if over it — one that raises it says
//     the service does more than Ĉ said, not that K is over what it
//     does.
//   - Carried. A period carried well within target (under Low) says K is
//     at least its work, less carriedZ of its standard errors (see
//     carried). Before K is known the periods so carried are averaged
//     over the last carriedMemory (see before), and a first measure of K
//     taken within target (a saturated period under Low: a burst at the
//     gate) is raised to their mean less carriedZ of its standard errors;
//     one taken in an overload is what the service does now.
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
//     measure the levels before — unless the pressure has read over
//     High for two windows in a row (each level they span was set for
//     the load at K, and each was too bright). A saturated period is
//     taken for a burst: it measures Ĉ, and restarts the wait before a
//     correction, the window after it being mostly of that burst (its
//     errors still count in the mean the correction takes) — unless
//     the overload has outlasted two windows while the levels could
//     still dim: then it is the levels', and the saturated periods
//     correct K as the others do (at one worker, a K of 0.9·Ĉ held for
//     forty seconds of crests at which the gate refused 10–20 %, each
//     saturated period restarting the wait before a correction). At the
//     floors a lasting saturation is the load over what the service
//     does, which Ĉ measures (an overload there whose periods are not
//     saturated still corrects K). Steps halve at each reversal (down
//     to stepMin), which also doubles the wait before the next (up to
//     maxWait), and never grow: Kesten's rule — a K that is right sees
//     ever smaller, ever rarer moves around it. A saturated period that
//     brings K down to Ĉ counts as a move down. What moves K far — a
//     load or a service that changed — is measured and moves the levels
//     through the feedforward, not through K.
//   - Roomed. K from the cold rule (what the first overload carried,
//     scaled down by its latency) is a guess. A burst at a light load — a
//     one-worker gate whose limit was still settling, a p99 window
//     holding a few slow seconds — sets it far under what the service
//     does, and a step a correction (0.04 of the ladder) takes minutes to
//     give the features back. A response latency grows at least in
//     proportion to a request's work, so one read at pressure p says the
//     service could take at most Setpoint/p times the work (latencyRoom);
//     while the guess stands, a correction up at a gate with room (few
//     requests waited: the latency is the service's own, not the gate's
//     queue's) takes K half way to that bound in logarithm — but no
//     further than the work the levels at the ceiling take at the load now
//     (more buys nothing, and only delays the next dim). Where any target
//     but a response latency reads anything (a refusal is a limit the
//     latency does not show; a gate's wait, near nothing while it has
//     room, says nothing of the work), there is no such room — nor, so,
//     for a service with a steady error ratio. The guess
//     ends at a saturated period's measurement or at any move of K down:
//     from then on the steps find K, the raise having bracketed it from
//     above. (Raised so whatever set K, 16 / 12 / 26 / 18 of the lab
//     step's 100 runs turned more than twice, against 11 / 10 / 19 / 14:
//     at the knee of a gate its latency stays low until the refusals
//     come. Without a gate, or without the load, neither: nothing then
//     measures K, and the feedback-only law's slowdown test spent 11–30 of
//     its 60 s over target with the raise, 5 at most without.)
//   - Reset. A jump of the load starts the steps afresh: the feedforward
//     has moved the levels for it, and what K lacks is found quickly. (A
//     jump of the work per request does not: it moves the levels through
//     the feedforward too, and K, in seconds of service a second, is the
//     same for a pool whose requests got slower, less the idle their
//     longer wait calls for: see Rebased.)
//   - Rebased. A queue's wait at a given share of busy servers scales
//     with its requests' work: four workers busy 98 % of the time queue
//     10 ms requests for tens of ms, 40 ms ones four times as long. What
//     holds a wait's quantile within a budget W is idle servers in
//     proportion to the work: in an M/M/c queue the wait beyond t has the
//     tail P·e^(−(c−B)·t/w̄) (c servers, B busy on average, w̄ a request's
//     mean work), so the q quantile stays within W while c − B ≥ κ·w̄/W,
//     κ = ln(1/(1−q)): idle worth η = κ/W requests a second (see
//     Config.queueIdle). A service that got slower — the all-off work,
//     measured from the requests' tallies, jumped up — takes η times what
//     the all-off request's work grew by since K was found from K, or
//     what the idle K already leaves under Ĉ lacks of η·w₀ (a K set to
//     0.9 of a saturated Ĉ may leave enough), and one that got faster
//     again gives back what it took (see rebase). Each instance of a
//     fleet queues its own requests, and needs that idle: η counts
//     Snapshot.Instances times (the fleet's push and scrape sources say
//     how many carry the load). Only the all-off
//     work's jumps rebase K: a move of the levels, or the estimate's
//     drift, changes a request's work too, but the corrections measure K
//     at the levels and the work they move around, and an admission
//     gate's refusals (the lab's binding target at one worker) come at a
//     share of busy servers whatever the work. (Rebased at every move of
//     the levels, the law served 1.06–2.2 of the best fixed level's
//     share at constant loads in the lab, and fewer of its users in time;
//     rebased for the drift too, a one-worker sine load kept 1.5 points
//     fewer in time.)
//
// With tallies the unit of work is a second of service, and a service that
// got slower or faster shows in the measured work of a request: the levels
// follow it through the feedforward, K moves with it by the idle its
// queue's wait calls for, and the corrections move K only for what the
// model does not know of the queue's shape.

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
	// carriedMemory is how far back the periods carried within target
	// before K was known bound its first measure (see before): a
	// minute. Older ones may be of a service that has since lost
	// capacity or instances (a fleet scaled in), and a minute of
	// periods puts their mean within a few per cent.
	carriedMemory = time.Minute
	// minKShare bounds what rebasing takes from K as the all-off
	// request's work w0 grows: at least a quarter of it stays. Past it a
	// request's own work is most of the target, and the M/M/c tail the
	// rebasing rests on (every request waits, at P near 1) overstates the
	// idle a lightly loaded queue needs; the corrections find the rest.
	minKShare = 0.25
)

// capacity is the estimator of K.
type capacity struct {
	k       float64       // K; 0 while unknown
	c       float64       // Ĉ, the saturated measurement; 0 while never
	at      float64       // the all-off request's work K is at (0: not yet; see rebase)
	held    float64       // what a slower service took from K (see rebase)
	grown   float64       // the all-off work's growth held was taken for
	step    float64       // the next correction's step, relative to K
	dir     int           // the last correction: +1 up, −1 down, 0 none since a reset
	wait    time.Duration // the wait after a correction before the next
	movedAt time.Time     // the last correction or reset
	src     capSource     // what set K last
	// guessed: K is the cold rule's guess, and since it was made every
	// correction raised it — the latency's room may raise it further
	// (see Roomed). A saturated period's measurement, or any move down,
	// ends the guess.
	guessed bool
	// The periods carried within target while K was unknown (see
	// carriedBefore): their weight, weighted work a second and weighted
	// variance, each forgotten over carriedMemory, and when the last
	// was folded in.
	beforeW, beforeSum, beforeVar float64
	beforeAt                      time.Time
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
	capRoom               // raised by the latency's room (see Roomed)
	capSlower             // rebased: the service got slower (see rebase)
	capFaster             // rebased: the service got faster again
)

// rebase moves K for the all-off request's work w0. Where it jumped
// (jumped: its tracker found a new level this period, measured from the
// requests' own tallies — a window's mean latency, without tallies, holds
// the queue's wait, and grows with it), the service got slower or faster:
// the all-off request's work, and its queue's wait at a given share of
// busy servers, grew by w0 − e.at since K was found (the law sets e.at
// whenever a measurement or a correction moves K), and the queue needs
// idle worth η times as much more (see the Rebased bullet above). K gives
// it up — all of it, or what the idle K already leaves under Ĉ lacks of
// η·w0 — keeping at least minKShare of what it was before any slowdown
// (K + held: a slowdown in two jumps takes what one of the same size
// does). What it gave up (held, for the work's growth grown) it takes back
// when the service gets faster again, in the share of that growth undone
// — whatever η is by then, a target reconfigured in between — and never
// over Ĉ; a K carried within target in the slowdown (see carried) was
// found again, and spends held. The tracker's drift between jumps takes
// nothing from K: the corrections measure K where it drifts (and a jump's
// first estimate, of a few periods, drifts to the new level after it:
// followed, the drift of a capacity dip's first seconds was taken from K
// and not given back at its end). But while K holds what a slowdown took,
// the work's drift down gives it back as a jump down would, in the share
// of the growth it undid (own: w0 measured from the requests' own
// tallies, as for a jump). A jump's estimate is the mean of its first two
// periods, and the first is mostly of the service before the change: the
// work that came back reads higher at the jump than it settles to, and
// what the jump left held would otherwise stay held until the
// corrections found it, at a step a Hold (the one-worker lab's capacity
// back from half: K 0.848 s a second for the 0.862 before the dip, the
// levels 0.1 under where they were for 12 s). What is given back is at
// most what was taken, so the drift's noise cannot raise K past where
// the slowdown found it.
func (e *capacity) rebase(w0, eta float64, jumped, own bool) {
	settle := own && !jumped && e.held > 0 && e.at > 0 && w0 < e.at
	switch {
	case w0 <= 0:
		return
	case e.at <= 0 || !(jumped || settle) || e.k <= 0:
	case w0 > e.at:
		k := e.k - eta*(w0-e.at)
		if e.c > 0 {
			k = max(k, min(e.k, e.c-eta*w0))
		}
		k = max(k, min(e.k, minKShare*(e.k+e.held))) // (of K before any rebase: jumps do not compound it)
		if k < e.k {
			e.held += e.k - k
			e.grown += w0 - e.at
			e.k, e.src, e.guessed = k, capSlower, false
		}
	case e.held > 0:
		// What the work's growth undone gave up, whatever η is now.
		share := 1.0
		if e.grown > 0 {
			share = min((e.at-w0)/e.grown, 1)
		}
		back := e.held * share
		e.held -= back
		e.grown = max(e.grown-(e.at-w0), 0)
		if e.held <= 0 {
			e.held, e.grown = 0, 0
		}
		if e.c > 0 {
			back = min(back, max(e.c-e.k, 0)) // K at most Ĉ
		}
		if back > 0 {
			e.k += back
			e.src = capFaster
		}
	}
	if e.at <= 0 || jumped || settle {
		e.at = w0
	}
}

// queueIdle is η, the idle in requests a second that keeps a queue's wait
// within the tightest latency target at the set point (see the Rebased
// bullet above): κ/W, W the target times Setpoint and κ = ln(1/(1−q)) for
// its quantile q (1 for the mean, an M/M/c wait's mean being its tail's
// scale). A latency target holds a request's work as well as its wait:
// W is the whole target, so η is a lower bound. 0 without a latency
// target — a refusal ratio says nothing of a wait, nor a maximum (no
// quantile) or CoDel's minimum sojourn.
func (c *Config) queueIdle() float64 {
	eta := 0.0
	for _, t := range c.Targets {
		var kappa float64
		switch t.Signal {
		case signals.LatencyP50:
			kappa = math.Ln2
		case signals.LatencyP90:
			kappa = math.Ln10
		case signals.LatencyP99, signals.SojournP99:
			kappa = 2 * math.Ln10
		case signals.LatencyP999:
			kappa = 3 * math.Ln10
		case signals.LatencyMean:
			kappa = 1
		default:
			continue
		}
		if w := c.Setpoint * t.Target; w > 0 {
			eta = max(eta, kappa/w)
		}
	}
	if math.IsInf(eta, 0) || math.IsNaN(eta) {
		return 0 // (a target of a few hundred femtoseconds: no wait fits, and no idle model says anything)
	}
	return eta
}

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
// interval before it was saturated too (see the Measured bullet above);
// restart: the period is taken for a burst — the overload has not lasted
// two windows, or the levels are at their floors (see the Corrected
// bullet) — and the wait before the next correction restarts. The first
// sets K to setShare·Ĉ; after it, K is at most Ĉ (no service carries
// more than it can do), and the corrections find where under it.
//
// A reading is what the service did, at most what it can do: one over Ĉ
// beyond its noise (se, its standard error) shows Ĉ too low, and its
// lower bound replaces Ĉ. An average would keep a low reading
// of the first seconds (four workers behind a gate whose limit was still
// opening did 1.7 s of work a second; later 4.0) for minutes, and bound a
// K that the service carried within target by it: in the lab, a reading
// of 4.0 cut a K of 3.6 to 2.6, and the law served 0.54–0.77 of the best
// fixed level's share at constant loads.
func (e *capacity) saturated(now time.Time, meas, se float64, whole, restart bool, hold time.Duration) {
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
	e.guessed = false
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
	case restart:
		// A burst saturated the service for a period: the pressure of
		// the next window is mostly of that burst.
		e.movedAt = now
	}
}

// carriedBefore folds in, at now, a period that carried work busy a
// second (standard error se) within target while K was unknown.
func (e *capacity) carriedBefore(now time.Time, busy, se float64) {
	f := 0.0
	if !e.beforeAt.IsZero() && !now.Before(e.beforeAt) {
		f = math.Exp(-now.Sub(e.beforeAt).Seconds() / carriedMemory.Seconds())
	}
	e.beforeW = e.beforeW*f + 1
	e.beforeSum = e.beforeSum*f + busy
	e.beforeVar = e.beforeVar*f*f + se*se
	e.beforeAt = now
}

// before is, at now, a lower bound of K from the periods carried within
// target while K was unknown: their mean over the last carriedMemory, less
// carriedZ of its standard errors. Had K been known, each would have raised
// it to what it carried (see carried) — and a mean of many is surer than
// any one of them (at 100 requests a period, one period's work is known
// within about a tenth, thirty periods' mean within a fiftieth). None
// where the last such period is more than carriedMemory old.
func (e *capacity) before(now time.Time) float64 {
	if e.beforeW <= 0 || now.Sub(e.beforeAt) > carriedMemory {
		return 0
	}
	return max(e.beforeSum/e.beforeW-carriedZ*math.Sqrt(e.beforeVar)/e.beforeW, 0)
}

// carried raises K (and Ĉ) to lb, a lower bound of the work a second the
// service carried within target in a period: a move up. What a slower
// service took from K (held) is spent on it: K is what the service
// carries now, and a K given back over it would be over what it does.
func (e *capacity) carried(now time.Time, lb float64) {
	e.held = max(e.held-(lb-e.k), 0) // K found again: what it gets back is measured
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
		e.src, e.guessed = capDown, false
	}
}

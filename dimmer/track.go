package dimmer

import "math"

// tracker follows a noisy quantity the law reads every period — the
// offered load, the all-off request's work — with two averages: a fast one
// over about a signal window and a slow one over trackMemory periods. The
// slow one is the estimate: at a steady load it is precise enough that the
// levels do not move on noise. It jumps to the fast one when the two
// differ by more than jumpZ standard errors of the fast one (a change too
// big to be noise, found within a window), or when a period's value lies
// jumpZ standard errors of one period from it (a step) — each only the
// second period in a row it happens, the same way: one period can be an
// outlier the standard error does not describe (a burst of slow requests
// completing together), two in a row are a change.
//
// What the law reads is held: the slow average as it was when it last
// moved by more than jumpZ of its own standard errors (or jumped), so that
// the levels do not follow its remaining noise either.
type tracker struct {
	fast, slow, held float64
	prev             float64 // the previous period's value
	ok               bool
	pending          int // the direction of an exceedance last period; 0 none
}

const (
	// jumpZ is the standard errors that make a change: at 3, noise
	// makes one about once in 370 periods.
	jumpZ = 4.0
	// trackMemory is the slow average's mean age, in periods: 30 periods
	// of 1 s at 120 requests a second put the load within ±1.7 %, where a
	// 5 s window is within ±4 % — a level moves with the load's relative
	// change times the page's work over the ladder's (three times, in the
	// lab), so ±4 % would swing a feature by a tenth or more.
	trackMemory = 30.0
)

// update folds in one period's value x, whose variance is v, with fast the
// fast average's weight. It reports whether the estimate jumped; with jump
// false it does not (the caller knows of a cause for a change that the
// value would mistake: see demand).
func (t *tracker) update(x, v, fast float64, jump bool) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) || !(v >= 0) {
		return false
	}
	if !t.ok {
		t.fast, t.slow, t.held, t.prev, t.ok = x, x, x, x, true
		return false
	}
	prev := t.prev
	t.prev = x
	t.fast += fast * (x - t.fast)
	dir := 0
	switch {
	case !jump:
	case math.Abs(x-t.slow) > jumpZ*math.Sqrt(v):
		dir = sign(x - t.slow)
	case math.Abs(t.fast-t.slow) > jumpZ*math.Sqrt(v*fast/(2-fast)):
		dir = sign(t.fast - t.slow)
	}
	if dir != 0 && dir == t.pending {
		// Both periods are of the new level: their mean estimates it.
		t.fast, t.slow, t.held, t.pending = (prev+x)/2, (prev+x)/2, (prev+x)/2, 0
		return true
	}
	t.pending = dir
	t.slow += (x - t.slow) / trackMemory
	if math.Abs(t.slow-t.held) > jumpZ*math.Sqrt(v/(2*trackMemory-1)) {
		t.held = t.slow
	}
	return false
}

// shift moves every average by d: the caller changed what is measured by
// a predicted amount (the levels moved).
func (t *tracker) shift(d float64) {
	t.fast += d
	t.slow += d
	t.held += d
	t.prev += d
}

// fastWeight is the weight of an EWMA whose mean age is a window of n
// periods.
func fastWeight(n float64) float64 { return 2 / (max(n, 1) + 1) }

func sign(x float64) int {
	if x < 0 {
		return -1
	}
	return 1
}

package dimmer

import "math"

// tracker follows a noisy quantity the law reads every period — the
// offered load, the mean work of a request — as a scalar Kalman filter of
// a level that drifts slowly and sometimes jumps:
//
//	P ← P + q;  a = P/(P+v);  est ← est + a·(x − est);  P ← (1−a)·P
//
// where x is the period's value, v its variance and q = v/trackMemory²
// the drift allowed a period. After a change the gain starts near 1/2 and
// falls as periods accumulate (est is then the mean of the periods since
// the change), to about 1/trackMemory: the estimate grows more precise the
// longer the level holds, where a fixed average stays as noisy as its
// window — so that the law, which moves the levels only for a change of a
// twentieth (minMove), does not move them on noise.
//
// A jump: a fast average over about a signal window, or one period,
// lying jumpZ standard errors from the estimate — the second period in a
// row it happens, the same way (one period can be an outlier the standard
// error does not describe: a burst of slow requests completing together;
// two in a row are a change). The fast average's standard error is its
// own — the periods' variances weighted as it weighs their values — so
// that a period of a few very slow requests, which lifts the average for
// several periods, widens its band for as long (read as the latest
// period's variance instead, it made a jump of every such outlier). The
// estimate then restarts from the two periods' mean. A period that lies
// jumpZ standard errors from the estimate is held out of it until the
// next shows whether it began a new level, and folded in then if it did
// not: the second period of a change is tested against the estimate from
// before the change, not one the first period dragged toward it. A level
// that moves (the offered load) is let rise from one period: a single
// period that stands riseZ standard errors over the estimate, read as a
// count of the old level (see rises), restarts it from that period —
// a period served for the old load after the new one came costs users
// their answers, where a period more to confirm a fall costs only some
// optional content.
//
// Whether a level that jumped then holds or goes on moving is told by
// the periods after it: the tracker of a level that moves runs two
// filters side by side, one with the drift allowed after the jump and one
// with none, and mixes them by how well each predicted the periods (see
// predict): after a step the estimate averages the periods since it
// within a few of them, where it followed each period's count for half a
// minute.
type tracker struct {
	fast, est float64
	p         float64 // the variance of est
	fv        float64 // the variance of fast: the periods' own, weighted as fast weighs them
	prev      float64 // the previous period's value
	ok        bool
	pending   int     // the direction of an exceedance last period; 0 none
	q         float64 // the drift allowed a period after a jump (see update)
	// held: the last interval was held out of the estimate, its value
	// heldX of variance heldV (see update).
	held         bool
	heldX, heldV float64
	// heldFast and heldFv: the fast average and its variance before the
	// held interval moved them (see update: undone if it began no move).
	heldFast, heldFv float64
	// moves: a level that jumped may go on moving (the offered load),
	// rather than hold at its new value (a request's work).
	moves bool
	// before is the estimate of a level that holds (not moves) just
	// before its last jump, and beforeP its variance then; beforeN the
	// periods since, over which it may have drifted (see update: a
	// return to it).
	before, beforeP, beforeN float64
	beforeOK                 bool
	// own: the values are the requests' own (their tallies' work), not a
	// window's mean latency, which holds the queue's wait and jumps as it
	// grows and drains: only a level measured so is weighed for a return
	// (see update; set by the caller).
	own bool
	// sub: for a level that moves, two filters of it side by side, one
	// that takes it to hold (sub[0]: drift v/trackMemory² a period) and
	// one that takes it to go on moving (sub[1]: drift q); mu is the
	// probability that it moves, and est, p their mixture (see mix).
	sub [2]struct{ est, p float64 }
	mu  float64
	// jv is the least variance the jump tests read a period's value
	// with, when the caller knows one (0: the period's own, v). A
	// period's own variance of skewed values is small when its sample
	// lacks the tail: see Controller.spread.
	jv float64
	// span and disp: a level that moves is a rate counted over span
	// seconds, as its jump tests read it, whose counts are disp times as
	// dispersed as Poisson's between its jumps (see rises); span 0: not
	// known to be a count.
	span, disp float64
	// w is the share of a period the next value stands for (0: a whole
	// one): a daemon that ticks faster than its instances push sees one
	// interval several times, and each sighting weighs as its share (its
	// variance over w) in the estimate and the fast average; the jump
	// tests, which only a first sighting makes, read the interval's own.
	w float64
}

const (
	// jumpZ is the standard errors that make a change: at 4, noise
	// makes one about once in 16 000 periods (twice in a row, far less).
	jumpZ = 4.0
	// trackMemory is the estimate's memory, in periods, once a level has
	// held that long: 480 periods of 1 s at 120 requests a second put the
	// load within ±0.3 % (a 5 s window: ±4 %). A level moves with the
	// load's relative change times the page's work over the ladder's
	// (three to five times, in the lab), and a feature's level by that
	// over its stretch of the ladder: the estimates must be that precise
	// for the levels to stay within a few hundredths. (At 120 periods,
	// ±0.6 %, 36 of 420 constant runs of the lab were not calm after
	// their first minute; at 480, 22.) A drift faster than the memory
	// follows is found by the jump test.
	trackMemory = 480.0
	// riseZ is the standard errors (of a count: see rises) by which one
	// period must exceed the estimate of a level that moves for the rise
	// to be taken at once: √2·jumpZ, so that counts twice as dispersed as
	// the measured dispersion says still stand jumpZ of their own
	// standard errors over it — that dispersion is a minute's mean,
	// biased low where false jumps leave their periods out, and bursty
	// counts (a crawler's, retries in step) have longer tails than the
	// root scale's normal: negative binomial arrivals twice as dispersed
	// as Poisson's, read at jumpZ of their dispersion, rose at once in
	// about 10 periods of 100 000, three times jumpZ's rate, and three
	// times as dispersed, at riseZ of Poisson's, in 70–130 (at 5–25
	// requests a second; none for Poisson arrivals), and the levels moved
	// a fifth more often than without.
	riseZ = math.Sqrt2 * jumpZ
	// jumpPeriods and moveMemory: after a jump of J the level is taken to
	// go on moving by about J/jumpPeriods a period (a jump is found over
	// about two), which the estimate is let follow, and that allowance is
	// forgotten over moveMemory periods (ten: a load that moved once and
	// holds settles within a quarter of a minute; one that keeps moving
	// keeps jumping).
	jumpPeriods, moveMemory = 2.0, 10.0
)

// update folds in one period's value x, whose variance is v, with fast the
// fast average's weight. It reports whether the estimate jumped; with jump
// false it does not, and the value neither starts nor confirms a jump:
// the caller knows of a cause for a change that the value would mistake
// (see demand), or the value's interval was seen before (a daemon that
// ticks faster than its instances push). A value seen again (the same
// as the last) keeps an exceedance pending from its interval for the
// next one; any other breaks the run: two exceedances far apart are no
// change.
func (t *tracker) update(x, v, fast float64, jump bool) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) || !(v >= 0) {
		return false
	}
	r := 1.0
	if t.w > 0 && t.w < 1 {
		r = 1 / t.w // each sighting weighs as its share of a period
	}
	vi := max(v, t.jv) // the interval's own, for the jump tests
	whole := v         // the interval's own, for folding it in whole
	v, vj := v*r, vi*r
	if !t.ok {
		t.fast, t.est, t.prev, t.p, t.fv, t.ok = x, x, x, v, v, true
		t.restart(0)
		return false
	}
	prev := t.prev
	t.prev = x
	if t.beforeOK {
		t.beforeN++
	}
	fastWas, fvWas := t.fast, t.fv
	t.fast += fast * (x - t.fast)
	t.fv = (1-fast)*(1-fast)*t.fv + fast*fast*vj
	dir, out := 0, false
	switch {
	case !jump:
	case math.Abs(x-t.est) > jumpZ*math.Sqrt(vi+t.p):
		dir, out = sign(x-t.est), true
	case math.Abs(t.fast-t.est) > jumpZ*math.Sqrt(t.fv+t.p):
		dir = sign(t.fast - t.est)
	}
	if dir > 0 && t.moves && t.rises(x, vi) {
		// A level that moves (the offered load), up by jumpZ standard
		// errors in one period: a rise is taken at once — a period
		// served for the old load when the new one has come costs
		// users their answers, where waiting a period to confirm a
		// fall costs only some optional content.
		t.q = max(t.q, (x-t.est)*(x-t.est)/jumpPeriods)
		t.fast, t.est, t.p, t.fv, t.pending, t.held = x, x, v, v, 0, false
		t.restart(muJump)
		return true
	}
	if dir != 0 && !out && dir == t.pending && t.held && float64(dir)*(x-t.est) <= math.Sqrt(vi+t.p) {
		// The period before was held out, and this one is not out: only
		// the fast average, which the held one dragged, says the level
		// moved — and this period lies within its own standard error of
		// the estimate, or past it the other way. The held one began no
		// new level, and is folded in below with this one. (A load of
		// 200 a second, one interval of 40 — a scrape that missed
		// instances, an instance's first push — and the next at 194: the
		// fast average took it for the second period of a fall, to
		// their mean, 117, and the levels went to full brightness for
		// two periods.) A moving load's second period lies beyond the
		// estimate toward the held one, and still confirms the move. Its
		// drag on the fast average is undone, or it would confirm a fall
		// a period later (40, then 186, 185, 185 took the estimate to 185).
		dir = 0
		t.fast = t.heldFast + fast*(x-t.heldFast)
		t.fv = (1-fast)*(1-fast)*t.heldFv + fast*fast*vj
	}
	if dir != 0 && dir == t.pending {
		// Both periods are of the new level: their mean estimates it. A
		// level that jumped may go on moving: the drift allowed a period
		// becomes the jump's share of a period, forgotten over
		// moveMemory periods.
		m := (prev + x) / 2
		if t.moves {
			t.q = max(t.q, (m-t.est)*(m-t.est)/jumpPeriods)
		}
		pv := v / 2
		if !t.moves {
			// A level that holds may have gone back where it was
			// before its last jump — a dependency that recovered, a
			// capacity back: returned weighs that against a new level,
			// the two periods' mean read with the spread the jump
			// tests read a period with (a skewed period's own variance
			// is small where its sample lacks the tail), the old
			// estimate with the drift a holding level may have made
			// since. Taken from the two periods alone, the first of
			// them partly of the level before, the all-off work of a
			// lab whose capacity came back from half read 8 % high
			// after its jump and took fifteen periods to settle: the
			// levels came back to 0.41 where they had been 0.60, and 3
			// of 40 seeds were not back within 10 s (all within 3 s
			// with it). (Not a window's mean latency standing for the work:
			// see own. A pool that lost half its workers, gateless, kept
			// 0.748 of its users in time on its worst seed with it, 0.84
			// without.)
			be, bp, ok := t.before, t.beforeP+t.beforeN*v/(trackMemory*trackMemory), t.beforeOK
			left := t.est
			t.before, t.beforeP, t.beforeN, t.beforeOK = t.est, t.p, 0, true
			if ok && t.own {
				m, pv = returned(m, pv, max(pv, vj/2), be, bp, left)
			}
		}
		t.fast, t.est, t.p, t.fv, t.pending, t.held = m, m, pv, pv, 0, false
		t.restart(muJump)
		return true
	}
	if jump || x != prev {
		t.pending = dir // (0 when not tested)
	}
	if !jump && x == prev && t.held {
		return false // the interval held out, seen again
	}
	if out {
		// A period that lies jumpZ standard errors from the estimate
		// is held out of it for a period: it is an outlier or the first
		// period of a new level, and folded in at once it would drag the
		// estimate toward the new level by its gain — by enough, on a
		// fall of half the load, that the second period no longer stood
		// jumpZ from it, and the estimate then crept down at its gain for
		// twenty periods. One that began no new level is folded in with
		// the next (left out, the high periods of a bursty load would
		// leave the estimate low) — or, if that one is held out too,
		// before it.
		if t.held {
			t.fold(t.heldX, t.heldV)
		}
		t.held, t.heldX, t.heldV = true, x, whole
		t.heldFast, t.heldFv = fastWas, fvWas
		return false
	}
	t.q *= 1 - 1/moveMemory
	t.predict(v)
	if t.held {
		t.held = false
		t.fold(t.heldX, t.heldV)
	}
	t.fold(x, v)
	return false
}

// rises reports whether x, the value of variance v of a period over the
// estimate (by jumpZ standard errors, or with the fast average past
// them), is a rise of a level that moves, to be taken at once: a count
// that stands riseZ standard errors over the old level's, as dispersed
// as the counts between the level's jumps (disp). A count's variance
// grows with its mean, so that read with the new value's variance a real
// step stands fewer standard errors over the old level than it is (25 →
// 70 requests a second stood 5.4, under riseZ, and was taken a period
// late: the lab's one-worker square waves kept up to 2.8 points fewer of
// their users in time over five minutes); and
// read with the old level's on a Gaussian scale a small count's long
// tail rises too often. On the root scale a Poisson count's variance is
// the same whatever its mean (Anscombe): 2(√(x·s) − √(est·s)) has a
// variance of 1, disp times that for counts more dispersed, plus what
// the estimate's own variance p carries to it, p·s/est. A value not known
// to be a count stands riseZ of v and p over the estimate.
func (t *tracker) rises(x, v float64) bool {
	if t.span <= 0 || t.est <= 0 {
		return x-t.est > riseZ*math.Sqrt(v+t.p)
	}
	s := t.span
	z := 2 * (math.Sqrt(x*s) - math.Sqrt(t.est*s))
	return z > riseZ*math.Sqrt(max(t.disp, 1)+t.p*s/t.est)
}

// Of a level that moves, whether it holds or goes on moving after a jump
// is told by the periods that follow: a load that stepped holds, one on a
// ramp or a wave goes on. The tracker keeps a filter of each beside the
// other and weighs them by how well each predicted the periods (an
// interacting-multiple-model filter of two models): after a step the
// holding filter, which averages every period since the jump, takes over
// within a few periods, and its estimate no longer follows each period's
// count; on a ramp the moving one's predictions stay the better ones.
const (
	// muJump is the probability that a level goes on moving just after it
	// jumped: a jump tells nothing of it.
	muJump = 0.5
	// holdToMove and moveToHold are the chances a period that the level
	// begins to move while it holds, and stops while it moves. A move
	// lasts about moveMemory periods (as the drift allowance after a
	// jump). A level that holds begins to move only where a jump test
	// finds it — the jump restarts both filters, the moving one with
	// muJump — so holdToMove is 0: at a chance a period of its own (1/60,
	// a hold of about a minute) the moving filter kept taking weight back
	// while the load held, the estimate after a step followed each
	// period's count again, and the levels turned on it (through the
	// lab's step, 36/39/54/57 of 100 runs turned more than twice; at 0,
	// 28/29/36/36). A load that drifts too slowly for the jump tests is
	// followed by the holding filter, at its memory.
	holdToMove, moveToHold = 0.0, 1 / moveMemory
	// minMoving is the least chance that the level moves the tracker
	// keeps: under it, none. Without a chance of its own to begin moving
	// it falls by moveToHold's factor every period, and past the smallest
	// floats its odds in fold overflow (a NaN estimate from a chance of
	// 1e-310 against a period the two filters read 745 nats apart); at a
	// billionth it weighs nothing in the estimate.
	minMoving = 1e-9
)

// restart sets both filters to the estimate, the level moving with
// probability mu.
func (t *tracker) restart(mu float64) {
	for i := range t.sub {
		t.sub[i].est, t.sub[i].p = t.est, t.p
	}
	t.mu = mu
}

// predict adds a period's drift to the estimate's variance. For a level
// that moves it first mixes the two filters by the chances that the level
// changed between holding and moving since the last period.
func (t *tracker) predict(v float64) {
	hold := v / (trackMemory * trackMemory)
	if !t.moves {
		t.p += max(hold, t.q)
		return
	}
	// The chance of each model now, and each filter's start: the mixture of
	// both, each weighed by the chance it was the model a period ago.
	mu0, mu1 := 1-t.mu, t.mu
	c := [2]float64{(1-holdToMove)*mu0 + moveToHold*mu1, holdToMove*mu0 + (1-moveToHold)*mu1}
	w := [2][2]float64{ // w[i][j]: the chance the level was in j, given it is in i now
		{(1 - holdToMove) * mu0 / c[0], moveToHold * mu1 / c[0]},
		{holdToMove * mu0 / c[1], (1 - moveToHold) * mu1 / c[1]},
	}
	var mixed [2]struct{ est, p float64 }
	for i := range mixed {
		if c[i] <= 0 {
			continue
		}
		for j := range t.sub {
			mixed[i].est += w[i][j] * t.sub[j].est
		}
		for j := range t.sub {
			d := t.sub[j].est - mixed[i].est
			mixed[i].p += w[i][j] * (t.sub[j].p + d*d)
		}
	}
	if c[1] <= 0 {
		// No chance left that the level moves (it holds since the last
		// jump): the moving filter is the holding one until the next
		// jump restarts it. (c[0] is never 0.)
		mixed[1] = mixed[0]
	}
	t.sub = mixed
	t.mu = c[1]
	t.sub[0].p += hold
	t.sub[1].p += max(hold, t.q)
	t.combine()
}

// fold corrects the estimate by the value x of variance v; for a level
// that moves, each filter, and the chance that it moves by how likely
// each filter found x.
func (t *tracker) fold(x, v float64) {
	if !t.moves {
		t.est, t.p = foldInto(t.est, t.p, x, v)
		return
	}
	var ll [2]float64 // log-likelihoods of x under each filter
	for i := range t.sub {
		s := &t.sub[i]
		if sv := s.p + v; sv > 0 {
			e := x - s.est
			ll[i] = -e*e/(2*sv) - math.Log(sv)/2
		}
		s.est, s.p = foldInto(s.est, s.p, x, v)
	}
	// mu' = mu·L1 / (mu·L1 + (1−mu)·L0), in logs so that neither underflows.
	if t.mu < minMoving {
		t.mu = 0 // (see minMoving)
	}
	if t.mu > 0 && t.mu < 1 {
		t.mu = 1 / (1 + (1-t.mu)/t.mu*math.Exp(min(ll[0]-ll[1], 700)))
	}
	t.combine()
}

// combine sets est and p to the filters' mixture.
func (t *tracker) combine() {
	mu := [2]float64{1 - t.mu, t.mu}
	t.est = mu[0]*t.sub[0].est + mu[1]*t.sub[1].est
	t.p = 0
	for i := range t.sub {
		d := t.sub[i].est - t.est
		t.p += mu[i] * (t.sub[i].p + d*d)
	}
}

// foldInto corrects est of variance p by the value x of variance v.
func foldInto(est, p, x, v float64) (float64, float64) {
	a := 1.0
	if p+v > 0 {
		a = p / (p + v)
	}
	return est + a*(x-est), p * (1 - a)
}

// rescale multiplies every average by f: the caller restated what is
// measured in another unit (the priors' scale changed).
func (t *tracker) rescale(f float64) {
	t.fast *= f
	t.est *= f
	t.prev *= f
	for i := range t.sub {
		t.sub[i].est *= f
		t.sub[i].p *= f * f
	}
	t.heldX *= f
	t.heldV *= f * f
	// (The level before the last jump was measured at other shares of
	// the features than the ones f restates: its restatement is
	// another factor, unknown here. It is forgotten.)
	t.beforeOK = false
	t.p *= f * f
	t.fv *= f * f
}

// atLeast makes the estimate's variance, and each filter's, at least v: an
// estimate restated from fewer periods than the tracker had folded in.
func (t *tracker) atLeast(v float64) {
	if !(v > 0) {
		return
	}
	t.p = max(t.p, v)
	for i := range t.sub {
		t.sub[i].p = max(t.sub[i].p, v)
	}
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

// returned is the estimate, and its variance, of a level that jumped from
// left to m (the two periods' mean, of variance pv, read by the jump
// tests at pr ≥ pv), weighing whether it went back to the level be
// (variance bp, its drift since included) that it left before: equal odds
// of a return and of a new level, a return's likelihood that of m from
// be, a new level's uniform over the jump's reach |m − left|. A return
// joins be's estimate to the periods' by their precisions; the mixture's
// variance keeps the two hypotheses' spread, so that periods that show a
// new level after all correct it at once rather than over the tracker's
// memory (joined whole, a work back 30 % off the old level held the old
// estimate for three more periods, until the jump test found it again).
func returned(m, pv, pr, be, bp, left float64) (float64, float64) {
	s2 := pr + bp
	reach := math.Abs(m - left)
	if !(s2 > 0) || !(reach > 0) {
		return m, pv
	}
	d := m - be
	l0 := math.Exp(-d*d/(2*s2)) / math.Sqrt(2*math.Pi*s2)
	w := l0 / (l0 + 1/reach)
	joined, pj := m+(be-m)*(pr/s2), pr*(bp/s2)
	est := w*joined + (1-w)*m
	return est, w*pj + (1-w)*pv + w*(1-w)*(joined-m)*(joined-m)
}

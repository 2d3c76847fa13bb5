package dimmer

import "math"

// The trend of a load that moves. The levels set at a tick serve the
// period after it, and a load on a swing has moved by then. The load's
// tracker (track.go) follows a level — one that holds, or one that jumped
// and may go on moving — and lags a load that moves smoothly: on the parts
// lab's one-worker sine (±50 % every 30 s) its estimate ran 4–6 s behind
// the arrivals, and the levels were too dim on the fall and too bright on
// the rise, where the gate refused what they let in.
//
// While the load moves (loadMotion), the levels are set for a trend's
// prediction instead: the load's level moves each period by its slope,
// and the slope by a random step — an integrated random walk, the model
// whose Kalman filter is Holt's linear smoothing in steady state. How far
// the slope steps is not known (a swing of a minute and one of ten
// seconds differ by forty times in curvature), so a bank of such filters,
// each assuming its own pace (trendPaces), predicts every period, and each
// is weighed by the likelihood of the periods it predicted over the last
// trendMemory (a Bayesian average over the paces, forgetting). The bank
// is weighed against the tracker by the chance that the load moves on
// rather than holds (trend.moving, from both likelihoods), and the load
// the levels are set for is the two by that chance (loadAhead, load.go);
// so is the margin they keep above it, the bank's part of which is how
// far its predictions missed beyond the periods' noise (trend.margin).
//
// The bank restarts where the tracker finds a jump (a step is no trend:
// carried on as one, its slope would run past the new level), and a
// period the tracker holds out as a possible outlier is no measurement
// of it either.

// trendPaces are the slope's steps the bank's filters assume, each a
// period's variance times the pace: a factor of four apart, so that any
// pace between two is served within a few per cent of its own filter's
// error. In steady state their Kalman gains (level/slope) are 0.40/0.10,
// 0.51/0.17, 0.64/0.30, 0.77/0.48 and 0.88/0.69. A sine's squared
// curvature over a period's variance — the pace that follows it — is
// 0.02 for ±50 % every 30 s at 50 requests a second, 0.1 at 200, and
// 0.001 to 11 for the swings of ±40–60 % every 10–60 s at 50–200 the
// controller is asked to follow: the paces span the middle of that, and
// the likelihood takes the nearest.
var trendPaces = [...]float64{1.0 / 64, 1.0 / 16, 1.0 / 4, 1, 4}

// trendMemory is the periods over which the filters' predictions are
// weighed, and the bank's errors averaged for its margin: half a minute,
// a swing or more of the loads it is for, so that a period's noise does
// not hand the load to another pace, and a load whose swings change pace
// is followed within a minute.
const trendMemory = 30.0

// trendFilter is one pace's Kalman filter of the load's level and slope.
type trendFilter struct {
	level, slope  float64
	pll, pls, pss float64 // the covariance of (level, slope)
	// logw is the log of its weight, less the largest of the bank's.
	logw float64
}

// trend is the bank (see above); the zero value has not started.
type trend struct {
	f  [len(trendPaces)]trendFilter
	ok bool
	// msq is the mean squared error of the bank's predictions over the
	// last trendMemory periods, of n so far.
	msq float64
	n   int
	// mu is the chance that the load moves on the trend rather than
	// holds at the tracker's level (see update).
	mu float64
}

// restart starts every filter at level x, of variance v (a period's),
// its slope unknown — as uncertain as a period's value, so that the
// periods after it measure it — and forgets the bank's errors.
func (t *trend) restart(x, v float64) {
	*t = trend{ok: true, mu: muJump}
	for i := range t.f {
		t.f[i] = trendFilter{level: x, pll: v, pss: v}
	}
}

// update folds in one period's value x, of variance v (the period's
// noise: a Poisson count's, times the arrivals' dispersion), which the
// load's tracker had estimated at est with variance p (p ≤ 0: no
// tracker, and mu stays). With missing, the period is not measured: each
// filter only moves on by its slope.
//
// Whether the load moves on the trend or holds at the tracker's level is
// weighed as the tracker weighs its own two models (track.go): a
// restart — the tracker's jump — makes the chance muJump, none begins to
// move (holdToMove), a move ends with a chance of 1/trendMemory a period
// (a swing lasts a swing or more: at the tracker's tenth, the trend lost
// the load at each crest, and the one-worker sine kept 0.7 point fewer
// of its users in time), and each period moves the chance by how likely
// the bank and the tracker each found it. On a swing the tracker runs
// behind and the bank takes the load within a few periods; once a swing
// stops the tracker takes it back as fast, where the bank's weights,
// which stay with its fast paces for a memory, would have the levels
// follow their noise (they turned seven times as often in the minute
// after).
func (t *trend) update(x, v float64, missing bool, est, p float64) {
	if !t.ok || !(v > 0) || math.IsInf(v, 0) || math.IsNaN(x) || math.IsInf(x, 0) {
		return
	}
	if !missing {
		e := x - t.predict(1)
		t.n++
		t.msq += max(1/trendMemory, 1/float64(t.n)) * (e*e - t.msq)
	}
	top, wtop := math.Inf(-1), t.topw()
	var ll [len(trendPaces)]float64 // each filter's log-likelihood of x
	for i := range t.f {
		f := &t.f[i]
		// Predict: the level moves by its slope, the slope by its step.
		f.level += f.slope
		f.pll += 2*f.pls + f.pss
		f.pls += f.pss
		f.pss += trendPaces[i] * v
		if missing {
			continue
		}
		// The period's likelihood under this filter, and the correction.
		s := f.pll + v
		e := x - f.level
		ll[i] = -e*e/(2*s) - math.Log(s)/2
		kl, ks := f.pll/s, f.pls/s
		f.level += kl * e
		f.slope += ks * e
		f.pll, f.pls, f.pss = f.pll-kl*f.pll, f.pls-kl*f.pls, f.pss-ks*f.pls
	}
	if missing {
		return
	}
	// The bank's log-likelihood of x: its filters', by their weights
	// before it (log Σ wᵢ·Lᵢ − log Σ wᵢ, from the largest term).
	lb := math.Inf(-1)
	for i := range t.f {
		lb = max(lb, t.f[i].logw-wtop+ll[i])
	}
	var num, den float64
	for i := range t.f {
		num += math.Exp(t.f[i].logw - wtop + ll[i] - lb)
		den += math.Exp(t.f[i].logw - wtop)
	}
	lb += math.Log(num / den)
	if math.IsNaN(lb) || math.IsInf(lb, 0) {
		return // (a value no filter finds likely at all: 1e155 and more)
	}
	for i := range t.f {
		f := &t.f[i]
		f.logw = (1-1/trendMemory)*f.logw + ll[i]
		top = max(top, f.logw)
	}
	for i := range t.f {
		t.f[i].logw -= top // the largest 0: no weight underflows
	}
	if s := p + v; p > 0 && !math.IsInf(s, 0) && !math.IsNaN(est) && !math.IsInf(est, 0) {
		e := x - est
		lt := -e*e/(2*s) - math.Log(s)/2
		t.mu = t.mu*(1-1/trendMemory) + (1-t.mu)*holdToMove
		if t.mu < minMoving {
			t.mu = 0 // (see minMoving)
		}
		if t.mu > 0 && t.mu < 1 {
			t.mu = 1 / (1 + (1-t.mu)/t.mu*math.Exp(min(lt-lb, 700)))
		}
	}
}

// moving is the chance that the load moves on the trend rather than
// holds at the tracker's level (see update).
func (t *trend) moving() float64 { return t.mu }

// predict returns the bank's prediction of the load h periods after the
// last it was moved on to: the filters' predictions, each by its weight.
func (t *trend) predict(h float64) float64 {
	var sum, w float64
	top := t.topw()
	for i := range t.f {
		f := &t.f[i]
		wi := math.Exp(f.logw - top)
		sum += wi * (f.level + h*f.slope)
		w += wi
	}
	return sum / w // (the largest weight is 1)
}

// slope is the bank's slope: how far the load moves a step, by the
// filters' weights.
func (t *trend) slope() float64 { return t.predict(1) - t.predict(0) }

// topw is the largest of the filters' log weights.
func (t *trend) topw() float64 {
	top := math.Inf(-1)
	for i := range t.f {
		top = max(top, t.f[i].logw)
	}
	return top
}

// predictVar is the variance of predict(h): each filter's, and how far
// the filters' predictions lie apart, by their weights.
func (t *trend) predictVar(h float64) float64 {
	mean := t.predict(h)
	var sum, w float64
	top := t.topw()
	for i := range t.f {
		f := &t.f[i]
		wi := math.Exp(f.logw - top)
		d := f.level + h*f.slope - mean
		sum += wi * (f.pll + 2*h*f.pls + h*h*f.pss + d*d)
		w += wi
	}
	return sum / w
}

// margin is how far the bank's predictions missed beyond the periods'
// noise v: the root of their mean squared error less v — the
// predictions' own uncertainty and what the trend did not foresee; 0
// until two periods have been predicted.
func (t *trend) margin(v float64) float64 {
	if !t.ok || t.n < 2 {
		return 0
	}
	return math.Sqrt(max(t.msq-v, 0))
}

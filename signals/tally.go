package signals

import "math"

// Moments summarises a sample by its count, sum and sum of squares: enough
// for a mean and its standard error, and merged by adding — so that apps
// can push them to a daemon per tick and the daemon estimate what an
// embedded controller does.
type Moments struct {
	N          int64
	Sum, SumSq float64
}

// Add records one observation.
func (m *Moments) Add(x float64) {
	m.N++
	m.Sum += x
	m.SumSq += x * x
}

// Merge adds o to m.
func (m *Moments) Merge(o Moments) {
	m.N += o.N
	m.Sum += o.Sum
	m.SumSq += o.SumSq
}

// Mean returns the sample mean, NaN when empty.
func (m Moments) Mean() float64 {
	if m.N == 0 {
		return math.NaN()
	}
	return m.Sum / float64(m.N)
}

// Var returns the unbiased sample variance, NaN with fewer than two
// observations.
func (m Moments) Var() float64 {
	if m.N < 2 {
		return math.NaN()
	}
	n := float64(m.N)
	return max(m.SumSq-m.Sum*m.Sum/n, 0) / (n - 1)
}

// Tally is one feature's per-request contrast over a window: the requests
// that rendered it (On) and those that did not (Off), with the Moments of
// their service time in seconds — admission to completion, the time the
// request held the server, its wait at the gate left out. While the
// feature's level is fractional the dimmer's bucketing decides on or off
// by user, so the two are a randomised experiment the controller runs
// anyway; the difference of their means, within one window, estimates
// what the feature costs.
type Tally struct {
	Feature string
	On, Off Moments
	// Unattributed counts evaluations of the feature that no request's
	// tally saw (evaluated outside the middleware): never counted as off.
	Unattributed int64
}

// Merge adds o's counts to t (the same feature).
func (t *Tally) Merge(o Tally) {
	t.On.Merge(o.On)
	t.Off.Merge(o.Off)
	t.Unattributed += o.Unattributed
}

package shed

import (
	"math"
	"time"
)

// LimitConfig configures the adaptive concurrency limit, in cost units in
// flight. The zero value is adaptive from 20, between 1 and 1000.
//
// The algorithm is a gradient limit in the manner of Netflix's
// concurrency-limits Gradient2: per completion it takes the latency per
// cost unit, keeps a short EWMA (weight 0.1) and a long EWMA (weight 0.01)
// of it, and moves the limit towards
//
//	limit × clamp(Tolerance × long / short, 0.5, 1) + QueueSize
//
// with smoothing 0.2 — while latency stays near its long-run level the
// limit grows by QueueSize per update, and when queueing inflates the short
// average the gradient falls below 1 and the limit shrinks. A limit that is
// not reached (in flight < limit / 2) is not raised: an idle service learns
// nothing about its capacity. Little's law (L = λW) is the model: the right
// limit is throughput × unloaded latency, plus a little queue.
type LimitConfig struct {
	// Initial limit. Default 20.
	Initial float64
	// Min and Max bound the limit. Default 1 and 1000.
	Min, Max float64
	// Tolerance is how much latency inflation is accepted before the limit
	// shrinks. Default 1.5.
	Tolerance float64
	// QueueSize is added each update while latency is flat. Default 4.
	QueueSize float64
	// Fixed turns adaptation off: the limit stays at Initial.
	Fixed bool
}

func (c LimitConfig) withDefaults() LimitConfig {
	if c.Initial <= 0 {
		c.Initial = 20
	}
	if c.Min <= 0 {
		c.Min = 1
	}
	if c.Max <= 0 {
		c.Max = 1000
	}
	if c.Tolerance <= 0 {
		c.Tolerance = 1.5
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 4
	}
	c.Initial = min(max(c.Initial, c.Min), c.Max)
	return c
}

// gradient is the adaptive limit. Its owner serializes access.
type gradient struct {
	cfg         LimitConfig
	limit       float64
	short, long float64 // EWMAs of seconds per cost unit; 0 until the first sample
}

func newGradient(cfg LimitConfig) gradient {
	cfg = cfg.withDefaults()
	return gradient{cfg: cfg, limit: cfg.Initial}
}

// sample takes one completion: its latency, its cost and the cost in
// flight when it started.
func (g *gradient) sample(latency time.Duration, cost, inflight float64) {
	if latency <= 0 || cost <= 0 {
		return
	}
	per := latency.Seconds() / cost
	if g.short == 0 {
		g.short, g.long = per, per
	} else {
		g.short += 0.1 * (per - g.short)
		g.long += 0.01 * (per - g.long)
	}
	if g.cfg.Fixed {
		return
	}
	grad := min(max(g.cfg.Tolerance*g.long/g.short, 0.5), 1)
	next := g.limit*grad + g.cfg.QueueSize
	if next > g.limit && inflight < g.limit/2 {
		return // app-limited: do not grow on no evidence
	}
	next = 0.8*g.limit + 0.2*next
	if math.IsNaN(next) || math.IsInf(next, 0) {
		return
	}
	g.limit = min(max(next, g.cfg.Min), g.cfg.Max)
}

// unit returns the measured seconds per cost unit, or 0 before any sample.
func (g *gradient) unit() float64 { return g.short }

package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/gate"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/shed"
)

// The limit algorithms we measured before choosing shed's (see
// gate.LimitConfig), side by side in the lab. Each drives the same gate
// through SetLimit from every completion; ours runs inside the gate.
//
//	go test ./sim -run TestLimitHoldsTheBandWhereOthersDrift -v

// candidate is a limit algorithm fed every completion: its latency, its
// cost and the cost in flight.
type candidate interface {
	sample(now time.Time, lat time.Duration, cost, inflight float64)
	limit() float64
}

// legacyGradient is the limit shed shipped before, verbatim: a Gradient2-
// style EWMA pair (0.1 and 0.01 per sample), tolerance 1.5, queue 4,
// smoothing 0.2, fed one release in eight as the Shedder did.
type legacyGradient struct {
	lim, short, long float64
	n                int
}

func (g *legacyGradient) limit() float64 { return g.lim }

func (g *legacyGradient) sample(_ time.Time, lat time.Duration, cost, inflight float64) {
	if g.n++; g.n%8 != 0 {
		return
	}
	per := lat.Seconds() / cost
	if g.short == 0 {
		g.short, g.long = per, per
	} else {
		g.short += 0.1 * (per - g.short)
		g.long += 0.01 * (per - g.long)
	}
	grad := min(max(1.5*g.long/g.short, 0.5), 1)
	next := g.lim*grad + 4
	if next > g.lim && inflight < g.lim/2 {
		return
	}
	g.lim = min(max(0.8*g.lim+0.2*next, 1), 1000)
}

// vegas is Netflix's VegasLimit: the baseline is the smallest latency
// seen, reset every 30 × limit samples; queue = L·(1 − base/latency);
// grow by 3·log10 L while the queue is under log10 L, by log10 L under
// 3·log10 L, shrink by log10 L over 6·log10 L.
type vegas struct {
	lim, base float64
	n         int
}

func (v *vegas) limit() float64 { return v.lim }

func (v *vegas) sample(_ time.Time, lat time.Duration, cost, inflight float64) {
	per := lat.Seconds() / cost
	v.n++
	if float64(v.n) > 30*v.lim {
		v.n, v.base = 0, 0 // probe: forget the baseline
	}
	if v.base == 0 || per < v.base {
		v.base = per
		return
	}
	if inflight*2 < v.lim {
		return // app-limited
	}
	lg := max(math.Log10(v.lim), 1)
	queue := v.lim * (1 - v.base/per)
	switch {
	case queue <= lg:
		v.lim += 3 * lg
	case queue < 3*lg:
		v.lim += lg
	case queue > 6*lg:
		v.lim -= lg
	}
	v.lim = min(max(v.lim, 1), 1000)
}

// aimd is additive increase, multiplicative decrease on a latency target
// (the gate's CoDel target, 100 ms): each 100 ms window, ×0.9 when the
// mean latency is over the target, +1 when under and the limit in use.
type aimd struct {
	lim, sum float64
	n        int
	used     bool
	start    time.Time
	target   time.Duration
}

func (a *aimd) limit() float64 { return a.lim }

func (a *aimd) sample(now time.Time, lat time.Duration, _, inflight float64) {
	if a.start.IsZero() {
		a.start = now
	}
	a.sum += lat.Seconds()
	a.n++
	a.used = a.used || inflight >= a.lim-1
	if now.Sub(a.start) < 100*time.Millisecond {
		return
	}
	switch {
	case a.sum/float64(a.n) > a.target.Seconds():
		a.lim *= 0.9
	case a.used:
		a.lim++
	}
	a.lim = min(max(a.lim, 1), 1000)
	a.sum, a.n, a.used, a.start = 0, 0, false, now
}

// driven returns a Shed whose limit the candidate sets.
func driven(c candidate) *Shed {
	s := NewShed(shed.GateConfig{})
	s.g.SetLimit(c.limit())
	s.observe = func(now time.Time, t *gate.Ticket) {
		c.sample(now, now.Sub(t.Start), t.Cost, s.g.InFlight())
		s.g.SetLimit(c.limit())
	}
	return s
}

type candidateRun struct {
	name         string
	w            int
	cancel       bool
	inBand, good float64
	median, max  float64
	critical     float64
	p99          time.Duration
}

func runCandidate(name string, mk func() *Shed, w int, cancel bool, seed uint32, d time.Duration) candidateRun {
	srv := limitApp(w)
	srv.CancelWaiting = cancel
	res := Run(Config{Seed: seed, Duration: d, Load: Constant(2 * capacityOf(srv)), Mix: limitMix, Server: srv, Admission: mk()})
	hi := 0.0
	for _, s := range res.Seconds {
		hi = max(hi, s.Limit)
	}
	return candidateRun{name: name, w: w, cancel: cancel, inBand: inBand(res.Seconds, 10, float64(w), float64(2*w+2)),
		good: goodput(res, 10) / capacityOf(srv), median: medianLimit(res.Seconds[10:]), max: hi,
		critical: res.Summary.CriticalOK, p99: res.Summary.P99}
}

// TestLimitHoldsTheBandWhereOthersDrift runs every candidate for W = 4 and 16 at 2× the
// capacity, seed 1, 120 s, and checks the two facts the choice rests on:
// the lab reproduces the drift that real HTTP showed once clients cancel
// (and does not without), and ours holds the band where the others do not.
func TestLimitHoldsTheBandWhereOthersDrift(t *testing.T) {
	if race.Enabled {
		t.Skip("single-threaded lab: make test runs it without -race")
	}
	d := 120 * time.Second
	algos := []struct {
		name string
		mk   func() *Shed
	}{
		{"gradient (shed before)", func() *Shed { return driven(&legacyGradient{lim: 20}) }},
		{"vegas (Netflix)", func() *Shed { return driven(&vegas{lim: 20}) }},
		{"aimd, 100 ms target", func() *Shed { return driven(&aimd{lim: 20, target: 100 * time.Millisecond}) }},
		{"half-limit probe (shed)", func() *Shed { return NewShed(shed.GateConfig{}) }},
	}
	var rows []candidateRun
	for _, w := range []int{4, 16} {
		rows = append(rows, runCandidate("gradient (shed before)", algos[0].mk, w, false, 1, d))
		for _, a := range algos {
			rows = append(rows, runCandidate(a.name, a.mk, w, true, 1, d))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %3s %-7s %8s %7s %6s %8s %8s %7s\n", "algorithm", "W", "cancel", "in band", "median", "max", "goodput", "critical", "p99")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-26s %3d %-7v %7.1f%% %7.1f %6.0f %7.1f%% %7.1f%% %5dms\n", r.name, r.w, r.cancel, 100*r.inBand, r.median, r.max, 100*r.good, 100*r.critical, r.p99.Milliseconds())
	}
	t.Log("\n" + b.String())
	for _, r := range rows {
		switch {
		case r.name == "gradient (shed before)" && r.cancel:
			assert.Greater(t, r.max, float64(10*r.w), "W=%d: the lab reproduces the drift once clients cancel", r.w)
		case r.name == "half-limit probe (shed)":
			assert.GreaterOrEqual(t, r.inBand, 0.95, "W=%d: ours holds the band", r.w)
			assert.GreaterOrEqual(t, r.good, 0.95, "W=%d: ours keeps goodput", r.w)
		}
	}
}

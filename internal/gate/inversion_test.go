package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
)

// mixStats is what a replay of several classes admitted and refused.
type mixStats struct {
	admitted, refused [signals.NumClasses]int
	inverted          int // seconds that admitted a lower class while refusing critical work
	seconds           int
}

// runMix offers rate(c, t) requests a second of each class c (t: seconds
// since the call) for dur, and tallies them into st by class and second.
func (p *pool) runMix(rate func(c signals.Class, t float64) float64, dur time.Duration, st *mixStats) {
	start := p.now
	var adm, ref [signals.NumClasses]int
	drop := func(t *Ticket, _ signals.Reason) { ref[t.Class]++ }
	flush := func() {
		for c := range adm {
			st.admitted[c] += adm[c]
			st.refused[c] += ref[c]
		}
		if ref[signals.Critical] > 0 && adm[signals.Default]+adm[signals.Sheddable] > 0 {
			st.inverted++
		}
		st.seconds++
		adm, ref = [signals.NumClasses]int{}, [signals.NumClasses]int{}
	}
	for stop := p.now.Add(dur); p.now.Before(stop); {
		p.advance()
		ts := p.now.Sub(start).Seconds()
		for c := range signals.Class(signals.NumClasses) {
			for range poisson(p.rng, rate(c, ts)/1000) {
				t := &Ticket{Class: c, Cost: p.charge, Arrival: p.now}
				switch dec, _ := p.g.Arrive(p.now, t, drop); dec {
				case Admitted:
					adm[c]++
					p.admit(t)
				case Refused:
					ref[c]++
				}
			}
		}
		for t := p.g.Next(p.now, drop); t != nil; t = p.g.Next(p.now, drop) {
			adm[t.Class]++
			p.admit(t)
		}
		p.dispatch()
		if p.now.Sub(start)%time.Second == 0 {
			flush()
		}
	}
}

// TestPriorityInversionsUnderASteadyOverload: critical work over what the
// server completes (steady, or a square wave around it) beside default
// work, at one worker of 43 ms requests, two of 10 ms and eight of 10 ms,
// ten seeds of 30 s each: the seconds that admit default work while they
// refuse critical work (inversions). A known fault, measured here: a fold
// that finds nothing waiting opens the lower classes, and under a steady
// overload the queue empties now and then (docs/gate.md, "Left: the empty
// moments of a steady overload"). Each line holds today's count with a
// margin, so that a step back fails; holding the classes closed through
// those moments brought them to 5–50, but is not landed.
//
// A replay in virtual time, single-threaded: the race detector has nothing
// to find in it and only slows it twenty times, so it skips under -race and
// make test runs it on its own without it (the Makefile's LAB).
func TestPriorityInversionsUnderASteadyOverload(t *testing.T) {
	if race.Enabled {
		t.Skip("a single-threaded replay: make test runs it without -race")
	}
	square := func(hi, lo float64) func(x, t float64) float64 {
		return func(x, t float64) float64 {
			if int(t)%2 == 0 {
				return hi * x
			}
			return lo * x
		}
	}
	steady := func(k float64) func(x, t float64) float64 { return func(x, _ float64) float64 { return k * x } }
	for _, tc := range []struct {
		name     string
		workers  int
		unit     time.Duration
		crit     func(x, t float64) float64 // critical requests a second, for x, the full requests a second the workers do
		def      float64                    // default requests a second, in x
		inverted int                        // today's count, of 300 seconds
	}{
		{"critical 1.2 × X", 2, 10 * time.Millisecond, steady(1.2), 0.5, 133},
		{"critical 1.15 × X", 2, 10 * time.Millisecond, steady(1.15), 1.0, 164},
		{"critical 1.3 × X", 8, 10 * time.Millisecond, steady(1.3), 0.5, 27},
		{"critical 1.15 × X", 1, 43 * time.Millisecond, steady(1.15), 1.0, 106},
		{"critical 1.2 × X", 1, 43 * time.Millisecond, steady(1.2), 0.5, 118},
		{"critical 0.9 × X", 2, 10 * time.Millisecond, steady(0.9), 0.5, 4},
		{"critical 1.44 / 0.36 × X", 2, 10 * time.Millisecond, square(1.44, 0.36), 0.5, 73},
		{"critical 1.44 / 0.36 × X", 1, 43 * time.Millisecond, square(1.44, 0.36), 0.5, 39},
	} {
		var st mixStats
		for seed := range uint64(10) {
			p := newPool(tc.workers, seed)
			p.unit = tc.unit
			x := float64(tc.workers) / p.unit.Seconds()
			p.runMix(func(c signals.Class, ts float64) float64 {
				switch c {
				case signals.Critical:
					return tc.crit(x, ts)
				case signals.Default:
					return tc.def * x
				}
				return 0
			}, 30*time.Second, &st)
		}
		t.Logf("%d workers, %-26s critical admitted %6d, refused %5d; default admitted %5d; seconds inverted %3d of %d",
			tc.workers, tc.name+":", st.admitted[signals.Critical], st.refused[signals.Critical], st.admitted[signals.Default], st.inverted, st.seconds)
		assert.LessOrEqual(t, st.inverted, tc.inverted+tc.inverted/4+5, "%d workers, %s: seconds that admitted default work while refusing critical work", tc.workers, tc.name)
	}
}

package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// The gate's priority acceptance in the lab: an app of W workers whose
// page is 1 unit of mandatory work and 0.625 of optional parts, behind the
// package-default gate and the lab's brownout controller; a calm load of
// 65 % of the all-on capacity, a spike of 2× or 3× the all-off capacity
// for 40 s, then calm again. Critical requests alone are critShare of
// the all-off capacity during the spike; the rest are default.

// prioritySpike is one shape of the acceptance.
type prioritySpike struct {
	workers int
	fixed   bool    // service times exactly their mean, else exponential
	spike   float64 // × the all-off capacity
	crit    float64 // critical work alone, × the all-off capacity
}

func (p prioritySpike) String() string {
	dist := "exponential"
	if p.fixed {
		dist = "fixed"
	}
	return fmt.Sprintf("W=%d %s %v× critical %.0f%%", p.workers, dist, p.spike, 100*p.crit)
}

const (
	spikeFrom = 20 // s
	spikeTo   = 60 // s
	// phaseSettle is left out at the start of the spike when counting
	// critical requests in time, as the real-HTTP harness's tables leave
	// out each phase's first 5 s: at full brightness critical work alone
	// is 1.5× the capacity until the controller dims, and the backlog of
	// that second drains at the 5 % left over.
	phaseSettle = 5 // s
)

func (p prioritySpike) run(seed uint32) Result {
	return p.runWith(seed, p.spike, NewShed(shed.GateConfig{}))
}

// calm runs p's calm load throughout, the spike left out: the twin that
// tells the refusals the calm load has of its own (the queue's tail at
// 65 % with exponential service) from those the spike left behind.
func (p prioritySpike) calm(seed uint32) Result {
	return p.runWith(seed, 0, NewShed(shed.GateConfig{}))
}

// told runs p's calm load behind the reference gate, whose limit is fixed
// at the worker count (the pages at full brightness that fill the
// workers): what a gate that knows the bottleneck refuses of that load.
func (p prioritySpike) told(seed uint32) Result {
	return p.runWith(seed, 0, NewShedFixed(shed.GateConfig{}, float64(p.workers)*(1+priorityOptional)))
}

// priorityOptional is the optional work of a page, in units of its
// mandatory work (the shop's 3 ms + 2 ms on 8 ms).
const priorityOptional = 0.625

func (p prioritySpike) runWith(seed uint32, spike float64, adm Admission) Result {
	page := 8 * time.Millisecond
	if p.workers >= 16 {
		page = 32 * time.Millisecond // the same rates with more workers
	}
	off := float64(p.workers) / page.Seconds()
	calm := 0.65 * off / (1 + priorityOptional)
	share := p.crit / p.spike
	load := Steps{At: []time.Duration{0, spikeFrom * time.Second, spikeTo * time.Second}, Rates: []float64{calm, spike * off, calm}}
	if spike == 0 {
		load = Steps{At: []time.Duration{0}, Rates: []float64{calm}}
	}
	return Run(Config{
		Seed: seed, Duration: 90 * time.Second,
		Load: load,
		Mix: []ClassMix{{Class: signals.Critical, Share: share, Cost: 1, Optional: priorityOptional},
			{Class: signals.Default, Share: 1 - share, Cost: 1, Optional: priorityOptional}},
		Server:    Server{Workers: p.workers, ServiceMean: page, Fixed: p.fixed, CancelWaiting: true},
		Admission: adm,
		Dimmer:    NewController(BrownoutConfig(BrownoutTarget)),
		Signals:   signals.Config{Latency: signals.WindowConfig{Slices: 5}},
	})
}

// criticalInTime is the share of the critical users who arrived during the
// spike, after its first phaseSettle seconds, and were answered in time.
func criticalInTime(res Result) float64 {
	n, ok := 0, 0
	for _, s := range res.Seconds[spikeFrom+phaseSettle : spikeTo] {
		n += s.CriticalUsers
		ok += s.CriticalInTime
	}
	return float64(ok) / float64(max(n, 1))
}

// refusals counts the refusals and drops of class c in s, rate limits
// aside.
func refusals(s Second, c signals.Class) int {
	n := 0
	for why, k := range s.Failed[c] {
		if signals.Reason(why) != signals.ReasonRateLimit {
			n += k
		}
	}
	return n
}

// inversions returns the seconds from `from` on in which a default or
// sheddable request was admitted while a critical one was refused.
func inversions(res Result, from int) []int {
	var secs []int
	for _, s := range res.Seconds[from:] {
		if refusals(s, signals.Critical) > 0 && s.Admitted[signals.Default]+s.Admitted[signals.Sheddable] > 0 {
			secs = append(secs, s.T)
		}
	}
	return secs
}

// refusedFrom counts the refusals and drops of every class, rate limits
// aside, from second `from` to the end of the run.
func refusedFrom(res Result, from int) int {
	n := 0
	for _, s := range res.Seconds[from:] {
		for c := range signals.Class(signals.NumClasses) {
			n += refusals(s, c)
		}
	}
	return n
}

// fallGrace is how long after the load falls under capacity refusals
// may go on: the acceptance's 2 s.
const fallGrace = 2 // s

// TestPriorityCriticalFirst: wherever critical work alone is at most 95 %
// of the all-off capacity, at least 99 % of the critical requests of a 2×
// or 3× spike are served in time (after its first 5 s), with exponential and fixed service
// times, for W = 1, 2, 4 and 16; no lower class is admitted in a second in
// which a critical request is refused (but the spike's first second, when
// critical work at full brightness is over capacity until the controller's
// first tick); and refusals stop within 2 s of the spike's end — every
// refusal from then to the end of the run counts, against the refusals of
// the same shape's calm load without the spike on the same seeds (with
// exponential service one worker at 65 % has a queue tail of its own),
// plus one a run for the noise between two runs; and that calm load is
// refused no more than by a gate whose limit is told the worker count. A
// probe of the limit halves what the gate admits, and once refused tens
// of requests of the calm load, before the spike and ten seconds after.
func TestPriorityCriticalFirst(t *testing.T) {
	seeds, _ := labSeeds(t)
	seeds = min(seeds, 3)
	for _, w := range []int{1, 2, 4, 16} {
		for _, fixed := range []bool{false, true} {
			for _, spike := range []float64{2, 3} {
				p := prioritySpike{workers: w, fixed: fixed, spike: spike, crit: 0.95}
				worst, after, twin, told := 1.0, 0, 0, 0
				for seed := uint32(1); seed <= seeds; seed++ {
					res := p.run(seed)
					ok := criticalInTime(res)
					worst = min(worst, ok)
					assert.GreaterOrEqual(t, ok, 0.99, "%v seed %d: critical in time", p, seed)
					assert.Empty(t, inversions(res, spikeFrom+1), "%v seed %d: seconds with a lower class admitted while critical was refused", p, seed)
					after += refusedFrom(res, spikeTo+fallGrace)
					twin += refusedFrom(p.calm(seed), spikeTo+fallGrace)
					told += refusedFrom(p.told(seed), spikeTo+fallGrace)
				}
				assert.LessOrEqual(t, twin, told+int(seeds), "%v: the calm load's refusals, against a gate told the worker count (%d)", p, told)
				assert.LessOrEqual(t, after, twin+int(seeds), "%v: refusals from %d s after the spike's end, against its calm twin's %d", p, fallGrace, twin)
				t.Logf("%v: worst seed %.2f %% of critical in time; %d refusals from %d s after the spike (calm twin %d, told the workers %d)", p, 100*worst, after, fallGrace, twin, told)
			}
		}
	}
}

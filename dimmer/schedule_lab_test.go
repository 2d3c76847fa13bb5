package dimmer_test

import (
	"testing"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/sim"
	"github.com/stretchr/testify/assert"
)

// TestLabScheduledCap runs the 11.11 midnight spike (sim.SaleLoad: 60 →
// 250 req/s at t = 60 s, decaying towards 120) through the brownout lab
// (sim.BrownoutLab: package shed's gate, capacity 100 req/s with every
// optional part on), with and without a schedule that caps
// recommendations at 50 % from 30 s before the spike for three minutes,
// and compares the first seconds after the spike. The figures are in the
// package documentation ("Scheduled caps"); LAB_SEEDS sets the seeds.
func TestLabScheduledCap(t *testing.T) {
	if race.Enabled {
		t.Skip("lab runs: slow under -race, and the controller's locking is tested elsewhere")
	}
	const spike = 60 // s
	const seeds = 10
	run := func(seed uint32, capped bool) sim.Result {
		cfg := sim.BrownoutConfig(sim.BrownoutTarget)
		if capped {
			cfg.Schedule = []dimmer.Cap{{Feature: "recommendations", Max: 0.5,
				From: sim.Epoch().Add((spike - 30) * time.Second), For: 3 * time.Minute, Reason: "11.11 midnight: pre-dim"}}
		}
		lab := sim.BrownoutLab(sim.SaleLoad(), sim.NewController(cfg))
		lab.Duration, lab.Seed = 240*time.Second, seed
		return sim.Run(lab)
	}
	// window sums, over every seed, what happened in seconds [spike,
	// spike+n): attempts, answers in time (by arrival), the largest
	// one-second p99, and the p99 of all the answers.
	type window struct {
		att, good int
		maxP99    time.Duration // mean over seeds of the largest one-second p99
		p99       time.Duration // mean over seeds
	}
	type side struct {
		w1, w3, w10      window
		inTime, optional float64 // whole run, mean over seeds
		levelBefore      float64
		levelAfter       float64
	}
	var res [2]side // without, with
	add := func(w *window, r sim.Result, n int) {
		var mx time.Duration
		for _, s := range r.Seconds[spike : spike+n] {
			w.att += s.Arrivals
			w.good += s.GoodByArrival
			mx = max(mx, s.P99)
		}
		p, _ := r.P99Between(spike, spike+n)
		w.maxP99 += mx / time.Duration(seeds)
		w.p99 += p / time.Duration(seeds)
	}
	for seed := uint32(1); seed <= seeds; seed++ {
		for k, capped := range []bool{false, true} {
			r := run(seed, capped)
			s := &res[k]
			add(&s.w1, r, 1)
			add(&s.w3, r, 3)
			add(&s.w10, r, 10)
			s.inTime += r.Summary.InTime / float64(seeds)
			s.optional += r.Summary.OptionalServed / float64(seeds)
			s.levelBefore = r.Seconds[spike-1].Level
			s.levelAfter = r.Seconds[spike+1].Level
		}
	}
	share := func(w window) float64 { return float64(w.good) / float64(w.att) }
	for k, name := range []string{"without schedule", "with schedule"} {
		s := res[k]
		t.Logf("%-16s level before the spike %.2f, after its first tick %.2f; in time: first 1 s %.1f%%, 3 s %.1f%%, 10 s %.1f%%; "+
			"p99 of the first 10 s %v, largest one-second p99 in them %v; whole run: in time %.1f%%, optional served %.1f%% (%d seeds)",
			name, s.levelBefore, s.levelAfter, 100*share(s.w1), 100*share(s.w3), 100*share(s.w10),
			s.w10.p99.Round(time.Millisecond), s.w10.maxP99.Round(time.Millisecond), 100*s.inTime, 100*s.optional, seeds)
	}
	without, with := res[0], res[1]
	assert.InDelta(t, 0.6875, with.levelBefore, 1e-9, "recommendations (0.25 of 0.4 optional cost) at half")
	assert.Equal(t, 1.0, without.levelBefore)
	// Robust over seeds: more of the spike's first seconds served in time.
	// The p99 is not asserted: package shed's gate bounds it either way,
	// and its differences are within the seeds' noise.
	assert.GreaterOrEqual(t, share(with.w3), share(without.w3), "in time, the spike's first 3 s")
	assert.GreaterOrEqual(t, share(with.w1), share(without.w1), "in time, the spike's first second")
}

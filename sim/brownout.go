package sim

import (
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Controller adapts a dimmer.Controller to the lab. Without Config.Parts
// the lab's requests have one block of optional work; the dimmer's features
// share it by their configured cost, so the block's level is the
// cost-weighted mean of the feature levels (Dim.Level). With Parts each
// feature's level goes straight to the part of its name (Dim.Names and
// Dim.Levels), and the configured costs are only what the dimmer believes.
type Controller struct {
	C *dimmer.Controller
}

// Step implements Dimmer.
func (b Controller) Step(now time.Time, s signals.Snapshot) Dim {
	st := b.C.Step(now, s)
	var sum, w float64
	for i, f := range b.C.Config().Features {
		sum += f.Cost * st.Features[i].Level
		w += f.Cost
	}
	d := Dim{Level: sum / w, Shed: st.Shed, Names: make([]string, len(st.Features)), Levels: make([]float64, len(st.Features))}
	for i, f := range st.Features {
		d.Names[i], d.Levels[i] = f.Name, f.Level
	}
	return d
}

// BrownoutFeatures returns the lab's optional parts as dimmer features:
// recommendations dim first, then reviews. Each call returns a new slice.
//
// Their costs are the lab's true ones in the unit dimmer.Feature.Cost
// states them in, a share of the all-off request's work: the optional
// block is 0.4 of a page with every part on (0.25 of it recommendations,
// 0.15 reviews) and the mandatory part 0.6, so recommendations cost
// 0.25/0.6 of an all-off request and reviews 0.15/0.6.
func BrownoutFeatures() []dimmer.Feature {
	return []dimmer.Feature{
		{Name: "recommendations", Rank: 0, Cost: 0.25 / 0.6},
		{Name: "reviews", Rank: 1, Cost: 0.15 / 0.6},
	}
}

// BrownoutConfig is the controller the lab's brownout scenarios use: p99
// latency against target, and the share of arrivals refused for overload
// against 1 %, DimOnly (the admission layer holds latency near its bounds
// by refusing: those refusals are pressure the latency cannot show); the
// package defaults otherwise.
func BrownoutConfig(target time.Duration) dimmer.Config {
	return dimmer.Config{
		Targets: []dimmer.Target{
			{Signal: signals.LatencyP99, Target: target.Seconds()},
			{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true},
		},
		Features: BrownoutFeatures(),
	}
}

// NewController returns a lab Dimmer running a dimmer.Controller built from
// cfg; it panics on a bad cfg (scenarios are code).
func NewController(cfg dimmer.Config) Dimmer {
	c, err := dimmer.New(cfg)
	if err != nil {
		panic(err)
	}
	return Controller{C: c}
}

// BrownoutTarget is the brownout lab's p99 target.
const BrownoutTarget = 300 * time.Millisecond

// BrownoutMix returns the traffic of the brownout lab of the dimmer's
// acceptance: capacity 100 req/s with every optional part on, optional parts
// 40 % of every page's cost, 30 % critical (the rest default), client
// timeout 1 s, p99 target [BrownoutTarget]. Each call returns a new slice.
func BrownoutMix() []ClassMix {
	return []ClassMix{
		{Class: signals.Critical, Share: 0.3, Cost: 0.6, Optional: 0.4},
		{Class: signals.Default, Share: 0.7, Cost: 0.6, Optional: 0.4},
	}
}

// BrownoutStep returns the brownout lab's step: 80 req/s, 150 from 30 s to
// 60 s, then 80 again. Each call returns new slices.
func BrownoutStep() Steps {
	return Steps{At: []time.Duration{0, 30 * time.Second, 60 * time.Second}, Rates: []float64{80, 150, 80}}
}

// BrownoutLab is one run of the brownout lab. Admission is package shed's
// gate ([NewShed]) with its adaptive limit, told nothing about the server:
// a critical request may wait 800 ms for a slot, the others 250 ms, and a
// queue that stays busy for a second (CoDel's interval) with its oldest
// request over 250 ms (CoDel's target, under the 300 ms p99 target) lets
// requests wait only 250 ms, newest first — so that admission holds latency
// near target and the controller's cascade stays the last resort. A request
// admitted but still waiting for the worker leaves when its client gives up
// (Server.CancelWaiting). The controller reads a 5 s window (see package
// dimmer on window length).
func BrownoutLab(load Profile, d Dimmer) Config {
	return Config{
		Duration: 90 * time.Second, Load: load, Mix: BrownoutMix(), Dimmer: d,
		Admission: NewShed(shed.GateConfig{MaxWait: [signals.NumClasses]time.Duration{800 * time.Millisecond, 250 * time.Millisecond, 100 * time.Millisecond}, Target: 250 * time.Millisecond, Interval: time.Second}),
		Server:    Server{CancelWaiting: true},
		Signals:   signals.Config{Latency: signals.WindowConfig{Slices: 5}},
	}
}

// BrownoutParts returns the parts of the lab with per-feature parts: the
// features of [BrownoutFeatures], by name and in their ladder's order, with
// TRUE costs that differ from the configured ones — recommendations cost
// one and a half times the mandatory work, reviews half of it (configured:
// 0.25/0.6 and 0.15/0.6 of an all-off request, 3.6 and 2 times too low, a
// ratio of 5:3, not 3:1) — so that with every
// part on a page is 3 times its mandatory work. Large parts on purpose:
// with them off the server has twice the capacity it has at level 0.5, so
// that a sine of amplitude 0.5 around that capacity is absorbed by dimming
// alone at a utilisation of 0.75, where one worker's queue still answers
// in time. Each call returns a new slice.
func BrownoutParts() []Part {
	return []Part{{Name: "recommendations", Cost: 1.5}, {Name: "reviews", Cost: 0.5}}
}

// BrownoutPartsLab is [BrownoutLab] (same admission, client and window)
// with a part per feature ([BrownoutParts]) instead of one optional block,
// mandatory cost 1 (one ServiceMean, 10 ms), and the given worker count.
func BrownoutPartsLab(load Profile, d Dimmer, workers int) Config {
	cfg := BrownoutLab(load, d)
	cfg.Mix = []ClassMix{{Class: signals.Critical, Share: 0.3}, {Class: signals.Default, Share: 0.7}}
	cfg.Parts = BrownoutParts()
	cfg.Server.Workers = workers
	return cfg
}

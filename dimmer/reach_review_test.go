package dimmer

import (
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
)

// reachSnap is modelRig.snap where only a share of the requests evaluate
// the features (product pages; the others, carts, evaluate none and do the
// base work alone): every request is in Work, a feature's tally counts
// those that evaluated it.
func (r *modelRig) reachSnap(lam, share float64, st *State) signals.Snapshot {
	var tallies [2]signals.Tally
	tallies[0].Feature, tallies[1].Feature = "recommendations", "reviews"
	var work signals.Moments
	n := int(lam)
	for j := range n {
		evaluates := float64(j%100) < share*100
		s, on := r.request(st, evaluates)
		work.Add(s)
		if !evaluates {
			continue
		}
		for i := range tallies {
			if on[i] {
				tallies[i].On.Add(s)
			} else {
				tallies[i].Off.Add(s)
			}
		}
	}
	s := signals.Snapshot{Window: 5 * time.Second, Tallies: tallies[:], Work: work, RecentSpan: time.Second}
	s.Recent.Arrived, s.Recent.Completed = uint64(lam), uint64(n)
	s.Set(signals.ArrivalRate, lam)
	s.Set(signals.Throughput, lam)
	s.Set(signals.RejectRatio, 0)
	s.Set(signals.GateBusy, 0)
	s.Set(signals.LatencyP99, 0.1)
	return s
}

// TestReachRisesWhenAFeatureReturns: a feature that no request evaluated
// for minutes (every shopper at the checkout at a sale's midnight) has a
// reach near 0 — rendering it is nearly free to the law. When its pages
// come back, the first period that evaluates it for half the requests must
// give it a reach near a half at once, not the 1/60 a minute's forgetting
// adds a period: meanwhile the law would take the pages' features for
// free and light them all, the work a request does twice what it predicts.
func TestReachRisesWhenAFeatureReturns(t *testing.T) {
	r := newModelRig(t)
	step := func(share float64) {
		s := r.reachSnap(200, share, r.c.State())
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		r.c.Step(r.now, s)
	}
	for range 60 {
		step(0.5)
	}
	r.c.mu.Lock()
	before := r.c.mu.mdl.reach[0]
	r.c.mu.Unlock()
	if before < 0.4 || before > 0.6 {
		t.Fatalf("reach %.3f after a minute at a half", before)
	}
	for range 180 { // three minutes of carts alone
		step(0)
	}
	r.c.mu.Lock()
	lull := r.c.mu.mdl.reach[0]
	r.c.mu.Unlock()
	if lull > 0.05 {
		t.Fatalf("reach %.3f after three minutes without the feature", lull)
	}
	step(0.5)
	r.c.mu.Lock()
	back, mean := r.c.mu.mdl.reach[0], r.c.mu.mdl.mean
	b := r.c.mu.brightness
	r.c.mu.Unlock()
	if back < 0.35 {
		t.Errorf("reach %.3f in the period the feature is back for half the requests (a request's predicted work %.4f s at brightness %.2f)", back, mean, b)
	}
}

// TestReachAcrossReconfigure: a Reconfigure keeps a measured
// reach by feature name (a new feature's is unmeasured, 1, until its
// first tally), whatever the features' order.
func TestReachAcrossReconfigure(t *testing.T) {
	r := newModelRig(t)
	for range 60 {
		s := r.reachSnap(200, 0.5, r.c.State())
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		r.c.Step(r.now, s)
	}
	cfg := r.c.Config()
	cfg.Features = []Feature{{Name: "extra", Rank: 0, Cost: 0.2}, {Name: "recommendations", Rank: 1, Cost: 1.5}}
	if err := r.c.ReconfigureAt(r.now, cfg); err != nil {
		t.Fatal(err)
	}
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for i, f := range r.c.cfg.Features {
		got := r.c.mu.mdl.reach[i]
		switch f.Name {
		case "extra":
			if got != 1 || r.c.mu.mdl.reachN[i] >= 0 {
				t.Errorf("new feature's reach %.3f (reachN %.3f)", got, r.c.mu.mdl.reachN[i])
			}
		case "recommendations":
			if got < 0.4 || got > 0.6 {
				t.Errorf("recommendations' reach %.3f after Reconfigure", got)
			}
		}
	}
}

// TestReachWithoutWorkIsOne: a source that stops giving Snapshot.Work
// while its tallies count (a rolled-back app, an older Pusher back in the
// fleet: package fleet then gives none) makes a feature's tally stand for
// every request, as docs/model.md says: the reach is 1 again. A reach
// measured before, kept, would put half a product page's feature cost on
// a product page's work and make the features look cheap.
func TestReachWithoutWorkIsOne(t *testing.T) {
	r := newModelRig(t)
	step := func(hide bool) {
		s := r.reachSnap(200, 0.5, r.c.State())
		if hide {
			s.Work = signals.Moments{}
		}
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		r.c.Step(r.now, s)
	}
	for range 60 {
		step(false)
	}
	step(true)
	r.c.mu.Lock()
	got := r.c.mu.mdl.reach[0]
	r.c.mu.Unlock()
	if got != 1 {
		t.Errorf("reach %.3f in a period whose tallies count without Work", got)
	}
	for range 5 {
		step(false)
	}
	r.c.mu.Lock()
	got = r.c.mu.mdl.reach[0]
	r.c.mu.Unlock()
	if got < 0.4 || got > 0.6 {
		t.Errorf("reach %.3f once Work is back", got)
	}
}

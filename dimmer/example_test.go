package dimmer_test

import (
	"fmt"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

func ExampleController() {
	c, err := dimmer.New(dimmer.Config{
		Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{
			{Name: "recommendations", Rank: 0},
			{Name: "reviews", Rank: 1},
		},
	})
	if err != nil {
		panic(err)
	}
	// 100 requests a second answered well within the 1 s target, then the
	// load triples and the p99 goes over. A second period over target
	// confirms the overload (one is a burst); what the service carried
	// then, scaled by how far over the latency is, is the first measure
	// of its capacity K, and the levels fall at once to those whose work
	// fits in it at 300 requests a second. Without an admission gate and
	// the requests' tallies (package shed and signals.Recorder provide
	// both), K is in all-off requests and the costs stay the configured
	// ones (1 each: a feature doubles a request).
	for i, p := range []struct{ load, p99 float64 }{{100, 0.4}, {100, 0.4}, {300, 1.3}, {300, 1.3}, {300, 0.9}} {
		now := time.Date(2026, 11, 11, 0, 0, 1+i, 0, time.UTC)
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.ArrivalRate, p.load)
		s.Set(signals.LatencyP99, p.p99)
		st := c.Step(now, s)
		rec, _ := st.Level("recommendations", "")
		rev, _ := st.Level("reviews", "")
		// (Status, not st: a state is published only when what a reader
		// acts on changes, and st keeps the reason it was published with.)
		fmt.Printf("%s\nrecommendations %.2f, reviews %.2f\n", c.Status().Reason, rec, rev)
	}
	// Output:
	// latency.p99 400ms < 1s target: full brightness (load 100/s, capacity unknown until an overload measures it)
	// recommendations 1.00, reviews 1.00
	// latency.p99 400ms < 1s target: full brightness (load 100/s, capacity unknown until an overload measures it)
	// recommendations 1.00, reviews 1.00
	// latency.p99 1.3s > 1s target: full brightness (load 300/s, capacity unknown until an overload measures it)
	// recommendations 1.00, reviews 1.00
	// latency.p99 1.3s > 1s target: load 300/s, carries 537 all-off requests a second (carried at the first overload; without a gate to measure it, the pressure corrects it), recommendations costs 1.00 of an all-off request (configured) → brightness 0.39: dimming recommendations
	// recommendations 0.00, reviews 0.79
	// latency.p99 900ms < 1s target: load 300/s, carries 537 all-off requests a second (carried at the first overload; without a gate to measure it, the pressure corrects it), reviews costs 1.00 of an all-off request (configured) → brightness 0.39: holding
	// recommendations 0.00, reviews 0.79
}

// A scheduled cap dims recommendations ahead of the 11.11 midnight sale,
// 30 s before midnight in Dhaka, whatever zone the controller's clock
// reads in.
func ExampleCap() {
	dhaka := time.FixedZone("+06", 6*60*60) // or time.LoadLocation("Asia/Dhaka")
	c, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Schedule: []dimmer.Cap{{
			Feature: "recommendations", Max: 0.5,
			From: time.Date(2026, 11, 11, 23, 59, 30, 0, dhaka), For: 5 * time.Minute,
			Reason: "11.11 midnight: pre-dim",
		}},
	})
	if err != nil {
		panic(err)
	}
	for _, now := range []time.Time{
		time.Date(2026, 11, 11, 17, 59, 0, 0, time.UTC),  // 23:59:00 in Dhaka
		time.Date(2026, 11, 11, 17, 59, 30, 0, time.UTC), // 23:59:30: the window opens
	} {
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 0.2) // quiet
		st := c.Step(now, s)
		rec, _ := st.Level("recommendations", "")
		i, _ := st.FeatureIndex("recommendations")
		fmt.Printf("%s recommendations %.2f (%s)\n", now.In(dhaka).Format("15:04:05"), rec, st.FeatureMode(i))
	}
	fmt.Println(c.State().Reason)
	// Output:
	// 23:59:00 recommendations 1.00 (auto)
	// 23:59:30 recommendations 0.50 (scheduled)
	// recommendations capped at 50% until Nov 12 00:04:30 +06 by schedule: 11.11 midnight: pre-dim; latency.p99 200ms < 1s target: at the scheduled cap, holding
}

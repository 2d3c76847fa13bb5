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
	// 1.3 s against a 1 s target, three periods in a row: evidence first
	// (a period over target counts 2, Evidence is 5), then a step.
	for i := range 3 {
		now := time.Date(2026, 11, 11, 0, 0, 1+i, 0, time.UTC)
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 1.3)
		st := c.Step(now, s)
		rec, _ := st.Level("recommendations", "")
		rev, _ := st.Level("reviews", "")
		fmt.Printf("%s\nrecommendations %.2f, reviews %.2f\n", st.Reason, rec, rev)
	}
	// Output:
	// latency.p99 1.3s > 1s target: over 85% of target at full brightness: weighing whether it is an overload
	// recommendations 1.00, reviews 1.00
	// latency.p99 1.3s > 1s target: over 85% of target at full brightness: weighing whether it is an overload
	// recommendations 1.00, reviews 1.00
	// latency.p99 1.3s > 1s target: dimming recommendations
	// recommendations 0.60, reviews 1.00
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

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
	now := time.Date(2026, 11, 11, 0, 0, 1, 0, time.UTC)
	var s signals.Snapshot
	s.Time = now
	s.Set(signals.LatencyP99, 1.3) // 1.3 s against a 1 s target
	st := c.Step(now, s)

	rec, _ := st.Level("recommendations", "")
	rev, _ := st.Level("reviews", "")
	fmt.Println(st.Reason)
	fmt.Printf("recommendations %.2f, reviews %.2f\n", rec, rev)
	// Output:
	// latency.p99 1.3s > 1s target: dimming recommendations
	// recommendations 0.00, reviews 0.42
}

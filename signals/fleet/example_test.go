package fleet_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// An app that cannot be scraped pushes its Recorder to the daemon's
// PushSource, which merges the instances of the fleet as a scrape does.
func ExamplePushSource() {
	src := fleet.NewPushSource(fleet.PushConfig{})
	srv := httptest.NewServer(src) // brownoutd: POST /v1/signals, behind its token check
	defer srv.Close()

	ctx := context.Background()
	var recs []*signals.Recorder
	var pushers []*fleet.Pusher
	for _, id := range []string{"shop-1", "shop-2"} {
		rec := signals.NewRecorder(signals.Config{})
		p, err := fleet.NewPusher(rec, fleet.PusherConfig{URL: srv.URL + "/v1/signals", Instance: id})
		if err != nil {
			panic(err)
		}
		recs, pushers = append(recs, rec), append(pushers, p)
	}
	pushAll := func() { // p.Run(ctx) pushes every Interval
		for _, p := range pushers {
			if err := p.Push(ctx); err != nil {
				panic(err)
			}
		}
	}
	pushAll()
	// shop-1 is fast; shop-2 has a slow tail: 4 % of its requests, 2 % of
	// the fleet's. The fleet's p99 is slow, read from the merged buckets
	// (averaging the instances' p99s would say 410 ms).
	now := time.Now()
	for i, rec := range recs {
		for j := range 1000 {
			rec.Arrive(signals.Default)
			s := rec.Start(now)
			d := 20 * time.Millisecond
			if i == 1 && j%25 == 0 {
				d = 800 * time.Millisecond
			}
			rec.Done(signals.Default, s, s.Add(d), false, time.Time{})
		}
	}
	pushAll()

	snap, err := src.Snapshot(ctx, time.Now())
	if err != nil {
		panic(err)
	}
	p50, _ := snap.Duration(signals.LatencyP50)
	p99, _ := snap.Duration(signals.LatencyP99)
	fmt.Println("p50:", p50.Round(10*time.Millisecond))
	fmt.Println("p99:", p99.Round(100*time.Millisecond), "(2 % of the fleet is slow)")
	for _, in := range src.Health().Instances {
		fmt.Println(in.Name, "live:", in.OK)
	}
	// Output:
	// p50: 20ms
	// p99: 800ms (2 % of the fleet is slow)
	// shop-1 live: true
	// shop-2 live: true
}

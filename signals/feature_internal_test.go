package signals

import (
	"sync"
	"testing"
)

// A read that lands inside an add may count a request without its time,
// never a time without its request: the daemon's sources refuse a count
// of 0 with a sum whole (a push), or leave its tallies out (a scrape). A
// writer adds requests of 10 ms each while a reader loads; no read may
// hold more time than its requests' worth.
func TestMomentCountersNeverReadTimeWithoutItsRequest(t *testing.T) {
	const x = 0.010
	var m momentCounters
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.add(x)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 2_000_000 {
		got := m.load()
		if got.Sum > float64(got.N)*x*(1+1e-9)+1e-12 {
			t.Fatalf("read %d: %d requests with %.6f s: the time of a request not counted", i, got.N, got.Sum)
		}
	}
}

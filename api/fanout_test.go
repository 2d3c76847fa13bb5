package api

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// BenchmarkStreamFanout: 1000 clients follow /v1/stream over 127.0.0.1
// while the control loop ticks every 100 ms; each of 10 published changes
// is timed from its publication to its arrival at every client. Reports
// the p99 and max delivery time and the tick's lag p99 meanwhile. Run
// with -benchtime 1x.
func BenchmarkStreamFanout(b *testing.B) {
	const clients, changes = 1000, 10
	for b.Loop() {
		ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond,
			Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
			Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}}})
		if err != nil {
			b.Fatal(err)
		}
		a, err := New(Config{Controller: ctl})
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: a.Handler()}
		go srv.Serve(ln)
		ctx, cancel := context.WithCancel(context.Background())
		// The loop ticks on a quiet source (nothing changes by itself).
		go a.Run(ctx, sourceFunc(func(ctx context.Context, now time.Time) (signals.Snapshot, error) {
			var s signals.Snapshot
			s.Time = now
			s.Set(signals.LatencyP99, 0.5)
			return s, nil
		}))

		var mu sync.Mutex
		got := map[string][]time.Time{} // event id → arrival times
		var ready sync.WaitGroup
		ready.Add(clients)
		for range clients {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte("GET /v1/stream HTTP/1.1\r\nHost: x\r\n\r\n"))
			go func() {
				sc := bufio.NewScanner(conn)
				first := true
				for sc.Scan() {
					line := sc.Text()
					if id, ok := strings.CutPrefix(line, "id: "); ok {
						now := time.Now()
						if first {
							first = false
							ready.Done()
							continue
						}
						mu.Lock()
						got[id] = append(got[id], now)
						mu.Unlock()
					}
				}
			}()
		}
		ready.Wait()
		published := map[string]time.Time{}
		for i := range changes {
			// Every change publishes (an operator's pin, level alternating);
			// the loop's subscription fans it out.
			st, err := ctl.Pin("reviews", []float64{0.3, 0.6}[i%2], time.Hour, "fan-out test")
			if err != nil {
				b.Fatal(err)
			}
			published[a.eventID(st.Generation)] = time.Now()
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		var lat []time.Duration
		missing := 0
		mu.Lock()
		for id, at := range published {
			missing += clients - len(got[id])
			for _, t := range got[id] {
				lat = append(lat, t.Sub(at))
			}
		}
		mu.Unlock()
		slices.Sort(lat)
		if len(lat) == 0 {
			b.Fatal("nothing delivered")
		}
		p99 := lat[len(lat)*99/100]
		b.ReportMetric(float64(p99)/1e6, "p99-ms")
		b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
		b.ReportMetric(float64(missing), "missed")
		b.ReportMetric(1000*a.hist.lagP99(), "tick-lag-p99-ms")
		cancel()
		a.Shutdown()
		srv.Close()
	}
}

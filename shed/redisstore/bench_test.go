package redisstore

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/brownout/brownout/shed"
)

// BenchmarkDecision: one rate limit decision (headers written) by the
// limiter's own memory and by Redis, in the same run, one caller at a time
// and from parallel callers, over 1000 clients, nearly all allowed. It
// reports decisions per second and the p99 latency of one decision
// (p99-µs; the clock reads around it included), so the price of sharing
// the limit across a fleet is the ratio of the two lines.
func BenchmarkDecision(b *testing.B) {
	srv := startRedis(b)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "u:" + strconv.Itoa(i)
	}
	cfg := shed.RateLimitConfig{Rate: 1e6, Burst: 1 << 20}
	for _, store := range []string{"local", "redis"} {
		newLimiter := func(b *testing.B) *shed.RateLimiter {
			c := cfg
			if store == "redis" {
				st, err := New(srv.client(), Config{Prefix: "bench:", Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				c.Store = st
			}
			l, err := shed.NewRateLimiter(c)
			if err != nil {
				b.Fatal(err)
			}
			return l
		}
		b.Run(store, func(b *testing.B) {
			l := newLimiter(b)
			lat := make([]time.Duration, 0, 1<<16)
			h := http.Header{}
			b.ReportAllocs()
			start, i := time.Now(), 0
			for b.Loop() {
				t := time.Now()
				l.Allow(h, keys[i%len(keys)], t)
				lat = append(lat, time.Since(t))
				i++
			}
			report(b, lat, time.Since(start))
		})
		b.Run(store+"-parallel", func(b *testing.B) {
			l := newLimiter(b)
			var mu sync.Mutex
			var lat []time.Duration
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				mine := make([]time.Duration, 0, 1<<12)
				h := http.Header{}
				for i := 0; pb.Next(); i++ {
					t := time.Now()
					l.Allow(h, keys[i%len(keys)], t)
					mine = append(mine, time.Since(t))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			report(b, lat, time.Since(start))
		})
	}
}

// report adds decisions per second and the p99 latency to b's line.
func report(b *testing.B, lat []time.Duration, took time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/took.Seconds(), "decisions/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

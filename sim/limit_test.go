package sim

import (
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// The adaptive limit's acceptance in the lab: it is not told the worker
// count, clients time out after 1 s and their handlers stop waiting for a
// worker then (Server.CancelWaiting), 30 % of requests are critical.

// limitApp is an app with W workers sized so that the lab's rates stay
// moderate: capacity W / service.
func limitApp(w int) Server {
	svc := map[int]time.Duration{1: 10 * time.Millisecond, 2: 10 * time.Millisecond, 4: 10 * time.Millisecond,
		16: 40 * time.Millisecond, 64: 100 * time.Millisecond}[w]
	return Server{Workers: w, ServiceMean: svc, CancelWaiting: true}
}

func capacityOf(s Server) float64 { return float64(s.Workers) / s.ServiceMean.Seconds() }

var limitMix = []ClassMix{{Class: signals.Critical, Share: 0.3}, {Class: signals.Default, Share: 0.7}}

// labSeeds and labLength: the full acceptance. The lab is single-threaded,
// so the race detector has nothing to find in it and only slows it ten
// times: under -race these tests skip, and make test runs them on their
// own without it.
func labSeeds(t *testing.T) (seeds uint32, length time.Duration) {
	if race.Enabled {
		t.Skip("single-threaded lab: make test runs it without -race")
	}
	return 10, 300 * time.Second
}

// goodput returns the good answers per second from second `from` on.
func goodput(res Result, from int) float64 {
	n := 0
	for _, s := range res.Seconds[from:] {
		n += s.Good
	}
	return float64(n) / float64(len(res.Seconds)-from)
}

func limitCfg() shed.GateConfig {
	var c shed.GateConfig
	if v, err := strconv.ParseFloat(os.Getenv("TOLERANCE"), 64); err == nil {
		c.Limit.Tolerance = v // for exploring the setting: go test -run Limit -v with TOLERANCE=1.7
	}
	return c
}

// inBand returns the share of seconds from `from` on whose limit lies in
// [lo, hi].
func inBand(secs []Second, from int, lo, hi float64) float64 {
	in, n := 0, 0
	for _, s := range secs[from:] {
		n++
		if s.Limit >= lo && s.Limit <= hi {
			in++
		}
	}
	return float64(in) / float64(n)
}

func medianLimit(secs []Second) float64 {
	var ls []float64
	for _, s := range secs {
		ls = append(ls, s.Limit)
	}
	slices.Sort(ls)
	return ls[len(ls)/2]
}

// TestLimitFindsTheWorkers: under a sustained 2× overload, for hidden
// concurrency W of 1, 4, 16 and 64, the limit is within [W, 2W + 2] for at
// least 95 % of the seconds from 10 s on, for every seed.
func TestLimitFindsTheWorkers(t *testing.T) {
	seeds, length := labSeeds(t)
	for _, w := range []int{1, 4, 16, 64} {
		srv := limitApp(w)
		lo, hi := float64(w), float64(2*w+2)
		var worst float64 = 1
		for seed := uint32(1); seed <= seeds; seed++ {
			res := Run(Config{Seed: seed, Duration: length, Load: Constant(2 * capacityOf(srv)), Mix: limitMix,
				Server: srv, Admission: NewShed(limitCfg())})
			share := inBand(res.Seconds, 10, lo, hi)
			worst = min(worst, share)
			assert.GreaterOrEqual(t, share, 0.95, "W=%d seed %d: seconds with the limit in [%v, %v] (median %.1f)", w, seed, lo, hi, medianLimit(res.Seconds[10:]))
			assert.GreaterOrEqual(t, goodput(res, 10), 0.9*capacityOf(srv), "W=%d seed %d: goodput from 10 s on", w, seed)
		}
		t.Logf("W=%d: worst seed in band %.1f %% of the seconds", w, 100*worst)
	}
}

// TestLimitFollowsCapacity: the pool loses half its workers at 100 s and
// gets them back at 200 s (W 16 → 8 → 16, 2× the full capacity
// throughout): within 10 s of each change the limit is in the new band,
// and it stays there (95 % of the seconds until the next change).
func TestLimitFollowsCapacity(t *testing.T) {
	seeds, length := labSeeds(t)
	length = max(length, 300*time.Second)
	srv := limitApp(16)
	srv.WorkersAt = func(t time.Duration) int {
		if t >= 100*time.Second && t < 200*time.Second {
			return 8
		}
		return 16
	}
	for seed := uint32(1); seed <= seeds; seed++ {
		res := Run(Config{Seed: seed, Duration: length, Load: Constant(2 * capacityOf(srv)), Mix: limitMix,
			Server: srv, Admission: NewShed(limitCfg())})
		for _, ph := range []struct {
			from, to int
			w        float64
		}{{100, 200, 8}, {200, 300, 16}} {
			back := -1
			for i := ph.from; i < ph.to; i++ {
				if s := res.Seconds[i].Limit; s >= ph.w && s <= 2*ph.w+2 {
					back = i - ph.from
					break
				}
			}
			assert.True(t, back >= 0 && back <= 10, "seed %d: W=%v from %d s: back in band after %d s", seed, ph.w, ph.from, back)
			assert.GreaterOrEqual(t, inBand(res.Seconds[:ph.to], ph.from+10, ph.w, 2*ph.w+2), 0.95, "seed %d: W=%v held", seed, ph.w)
		}
	}
}

// uslApp is a database-like app: no worker limit, service time growing
// with the requests in service (the universal scalability law, contention
// 2 %, coherency 0.05 %: throughput peaks at n* ≈ 44).
func uslApp() Server {
	s := Server{Workers: 100000, ServiceMean: 10 * time.Millisecond, CancelWaiting: true}
	s.Contention.Alpha, s.Contention.Beta = 0.02, 0.0005
	return s
}

// TestLimitFindsTheThroughputPeak: for the database-like app the limit
// settles within ±25 % of the throughput-maximising concurrency that a
// sweep of fixed limits finds.
func TestLimitFindsTheThroughputPeak(t *testing.T) {
	seeds, length := labSeeds(t)
	srv := uslApp()
	a, b := srv.Contention.Alpha, srv.Contention.Beta
	nstar := math.Sqrt((1 - a) / b)
	load := 2 * nstar / (srv.ServiceMean.Seconds() * srv.contention(int(math.Round(nstar))))
	run := func(adm Admission, seed uint32, d time.Duration) Result {
		return Run(Config{Seed: seed, Duration: d, Load: Constant(load), Mix: limitMix, Server: srv, Admission: adm})
	}
	// The sweep: fixed limits around n*, two seeds each.
	best, bestN := 0.0, 0.0
	for n := math.Round(0.5 * nstar); n <= math.Round(1.6*nstar); n += 3 {
		g := 0.0
		for seed := uint32(1); seed <= 2; seed++ {
			g += run(NewShedFixed(shed.GateConfig{}, n), seed, 20*time.Second).Summary.GoodPerSec
		}
		if g > best {
			best, bestN = g, n
		}
	}
	best /= 2
	t.Logf("sweep: goodput peaks at %.0f/s with %v in flight (theory: n* = %.1f)", best, bestN, nstar)
	for seed := uint32(1); seed <= seeds; seed++ {
		res := run(NewShed(limitCfg()), seed, length)
		med := medianLimit(res.Seconds[10:])
		assert.InDelta(t, bestN, med, 0.25*bestN, "seed %d: median limit", seed)
		g := goodput(res, 10)
		assert.GreaterOrEqual(t, g, 0.9*best, "seed %d: goodput from 10 s on", seed)
		t.Logf("seed %d: median limit %.1f (%.0f %% of the sweep's), goodput %.0f/s (%.1f %%)", seed, med, 100*med/bestN, g, 100*g/best)
	}
}

// TestLimitHoldsNearCapacity: at 0.95 of the capacity, with the dimmer
// held at 0.5 (so that the limit alone answers for the latency), the gate
// admits at least three quarters of the worker count every second from
// 10 s on. Near capacity the queue comes and goes, so probes often end
// because they hurt, with part of their cohort still running; a cohort
// counted that way once read a third of the service time as the
// baseline, against which every window at the limit read as queueing,
// and the limit fell from 20 to 1 under eight workers.
func TestLimitHoldsNearCapacity(t *testing.T) {
	seeds, length := labSeeds(t)
	const (
		load  = 0.95 // of the capacity at level 0.5
		level = 0.5
		floor = 0.75 // of the worker count: under it, admitted work leaves workers idle
	)
	for _, workers := range []int{4, 8} {
		build := func(p Profile) Config {
			cfg := BrownoutPartsLab(p, Static(level), workers)
			cfg.Duration = length
			return cfg
		}
		lam := load * MandatoryCapacity(build(nil)) / (1 + level*partsCost(build(nil).Parts))
		lowest, lost, users := math.Inf(1), 0, 0
		for seed := uint32(1); seed <= seeds; seed++ {
			cfg := build(Constant(lam))
			cfg.Seed = seed
			res := Run(cfg)
			runLowest := math.Inf(1)
			for _, s := range res.Seconds[10:] {
				runLowest = min(runLowest, s.Limit)
				lost += s.Users - s.UsersInTime
				users += s.Users
			}
			assert.GreaterOrEqual(t, runLowest, floor*float64(workers), "W=%d seed %d: the lowest limit from 10 s on", workers, seed)
			lowest = min(lowest, runLowest)
		}
		t.Logf("W=%d at %.0f req/s: lowest limit %.1f, users late %.2f %%", workers, lam, lowest, 100*float64(lost)/float64(users))
	}
}

package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
)

func TestRunIsDeterministic(t *testing.T) {
	cfg := func() Config {
		return Config{Seed: 7, Load: Constant(150), Admission: PriorityLimits(50, 20),
			Client: Client{Retry: RetryPolicy{MaxRetries: 3, Backoff: 500 * time.Millisecond, RetryRefused: true}}}
	}
	a, b := Run(cfg()), Run(cfg())
	assert.Equal(t, a, b)
	c := cfg()
	c.Seed = 8
	assert.NotEqual(t, a.Summary, Run(c).Summary, "another seed, another run")
}

// TestConservation: every attempt is served, refused, dropped or still in
// the system at the end, whatever the policy.
func TestConservation(t *testing.T) {
	policies := map[string]func() Admission{
		"unbounded": func() Admission { return Unbounded() },
		"failfast":  func() Admission { return FailFast(50) },
		"priority":  func() Admission { return &Limits{Limit: [3]float64{50, 20, 10}, DropExpired: true} },
		"codel": func() Admission {
			return &CoDel{Enabled: true, Limit: 300, Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond}
		},
	}
	for name, mk := range policies {
		for _, load := range []float64{50, 120, 200} {
			for seed := range uint32(3) {
				t.Run(fmt.Sprintf("%s/%v/%d", name, load, seed), func(t *testing.T) {
					r := Run(Config{Seed: seed, Load: Constant(load), Admission: mk(), Duration: 20 * time.Second,
						Mix:    []ClassMix{{Class: signals.Critical, Share: 3}, {Class: signals.Default, Share: 5}, {Class: signals.Sheddable, Share: 2}},
						Client: Client{Retry: RetryPolicy{MaxRetries: 2, Backoff: 200 * time.Millisecond, RetryRefused: true}}})
					s := r.Summary
					assert.Equal(t, s.Attempts, s.Served+s.Refused+s.Dropped+s.InSystem,
						"attempts %d = served %d + refused %d + dropped %d + in system %d", s.Attempts, s.Served, s.Refused, s.Dropped, s.InSystem)
					perSec := 0
					for _, sec := range r.Seconds {
						perSec += sec.Arrivals
					}
					assert.Equal(t, s.Attempts, perSec, "the series adds up to the summary")
					assert.LessOrEqual(t, s.Good, s.Served)
				})
			}
		}
	}
}

func TestLabAgreesWithTheSources(t *testing.T) {
	// The lab's model of overload-policies.js lands near the sources'
	// table (different draws, same system): good/s and critical ok.
	for _, c := range []struct {
		name       string
		mk         func() Admission
		load       float64
		good, crit float64
		goodTol    float64
	}{
		{"unbounded", func() Admission { return Unbounded() }, 80, 80.7, 1, 5},
		{"unbounded", func() Admission { return Unbounded() }, 200, 5.8, 0.02, 6},
		{"failfast", func() Admission { return FailFast(50) }, 150, 95.1, 0.64, 6},
		{"priority", func() Admission { return PriorityLimits(50, 20) }, 200, 99.4, 1, 6},
	} {
		t.Run(fmt.Sprintf("%s/%v", c.name, c.load), func(t *testing.T) {
			var good, crit float64
			const seeds = 4
			for seed := range uint32(seeds) {
				s := Run(Config{Seed: seed + 1, Load: Constant(c.load), Admission: c.mk()}).Summary
				good += s.GoodPerSec / seeds
				crit += s.CriticalOK / seeds
			}
			assert.InDelta(t, c.good, good, c.goodTol, "good/s")
			assert.InDelta(t, c.crit, crit, 0.08, "critical ok")
		})
	}
}

func TestRetryStormAndBudget(t *testing.T) {
	// capacity-dip: without a budget the retries keep the server down after
	// the dip; with budget and expired-drop it recovers at once.
	run := func(rp RetryPolicy, dropExpired bool) Summary {
		return Run(Config{Seed: 3, Duration: 240 * time.Second, Load: Constant(70),
			Server: Server{Capacity: Dip(30*time.Second, 30*time.Second, 0.5)}, Client: Client{Retry: rp},
			Admission: &Limits{Limit: Unbounded().Limit, DropExpired: dropExpired}, RecoverFrom: 60 * time.Second}).Summary
	}
	storm := run(RetryPolicy{MaxRetries: 3}, false)
	assert.Equal(t, time.Duration(-1), *storm.Recovery, "immediate retries: metastable, never recovers")
	assert.Greater(t, float64(storm.Attempts)/float64(storm.New), 2.5, "load amplification")
	fixed := run(RetryPolicy{MaxRetries: 3, Backoff: 500 * time.Millisecond, Budget: 0.1}, true)
	assert.LessOrEqual(t, *fixed.Recovery, 2*time.Second, "budget + expired drop recovers")
	assert.GreaterOrEqual(t, *fixed.Recovery, time.Duration(0))
}

func TestDependencySlowdown(t *testing.T) {
	s, err := Lookup("dependency-slowdown")
	if err != nil {
		t.Fatal(err)
	}
	cases := s.Run(Options{Seed: 4})
	none, timeout, breaker := cases[0].Result.Summary, cases[1].Result.Summary, cases[2].Result.Summary
	assert.Less(t, none.InTime, 0.8, "no timeout: workers wait 30 s each and the site freezes")
	assert.GreaterOrEqual(t, timeout.InTime, 0.99, "a timeout keeps checkout up")
	assert.GreaterOrEqual(t, breaker.InTime, 0.99)
	assert.Less(t, breaker.P99, timeout.P99, "the breaker takes the timeout off the request path")
	assert.Less(t, breaker.P99, 300*time.Millisecond, "about the provider's normal 200 ms")
}

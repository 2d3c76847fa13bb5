package sim

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestLabAgreesWithTheSources: the lab's model of overload-policies.js
// lands where the sources' table does (testdata/seeds/overload-policies.out,
// which SeedOverload reproduces byte for byte): the same system, other
// draws. Every figure of the table is checked: good/s, p99, rejected,
// critical ok and the queue at 30 s, for the three policies at six loads.
//
// How the bounds are derived. The table is one 30 s run (Mulberry32 seed
// 42); the lab runs the same 30 s with its own draws. If both model one
// system, a figure x of the table and the lab's figure for one seed are
// two draws of one distribution. The test runs the lab over N = labSeeds
// seeds and asserts two bounds per figure, each k standard deviations of
// the difference between one draw and the mean of N:
//
//   - Absolute: the sources within the lab's spread. With m and s the
//     mean and sample standard deviation of the lab's figure, σ = max(s,
//     u) where u is half a unit of the table's last printed digit (the
//     table rounds, and a figure such as critical ok = 100 % has no
//     spread at all): |x − m| ≤ k·σ·√(1 + 1/N) + u.
//   - Relative: the lab within a factor of the sources. The same on
//     logarithms, ℓ = ln(figure + u), which measures spread as a ratio and
//     suits the skewed figures (a queue length, a count of refusals): with
//     μ and σℓ the mean and standard deviation of the lab's ℓ, σℓ floored
//     at u/(x + u), |ln(x + u) − μ| ≤ k·σℓ·√(1 + 1/N) + u/(x + u). It
//     bounds max(x/g, g/x), with g the lab's geometric mean, and catches a
//     lab figure many times the sources' that a wide absolute spread would
//     let through.
//
// k = 4: the table has 90 figures; at k = 4 a normal error passes the
// bound with probability 6·10⁻⁵ each, 0.6 % for any of the 90, so a change
// of the lab's draws (which re-rolls every figure) rarely trips the test
// by chance, where k = 3 would one time in five. The largest deviations
// when this was written were 2.1 σ (fail fast at load 150, good/s) and
// 2.3 σ on logarithms (the unbounded queue at load 150, critical ok).
//
// What one draw cannot do: where a policy collapses (the unbounded queue
// from load 100 up) a 30 s run varies a lot between seeds (good/s ±28 %
// at load 100 and 120, ±13 % at load 200), so the bounds stay wide there.
// At load 200 the absolute bound is 5.8 ± 3.6 good/s (± 6 before) and the
// relative one fails a lab 1.6 times too high (4.2 σ), which the old bound
// let through; at loads 100 and 120 even a lab twice too high passes.
// go test -v logs each figure that the absolute bound tests only to more
// than ±50 %. Comparing means over seeds on both sides would need the
// sources' port to take a seed.
func TestLabAgreesWithTheSources(t *testing.T) {
	if race.Enabled {
		t.Skip("single-threaded lab: make test runs it without -race")
	}
	const (
		labSeeds = 20
		k        = 4.0
	)
	admissions := map[string]func() Admission{
		"unbounded queue":          func() Admission { return Unbounded() },
		"bounded queue, fail fast": func() Admission { return FailFast(50) },
		"priority shedding":        func() Admission { return PriorityLimits(50, 20) },
	}
	// The table's columns after load, what the lab reports for each, and u.
	figures := []struct {
		name string
		lab  func(Summary) float64
		u    float64
	}{
		{"good/s", func(s Summary) float64 { return s.GoodPerSec }, 0.05},
		{"p99 ms", func(s Summary) float64 { return float64(s.P99) / float64(time.Millisecond) }, 0.5},
		{"rejected", func(s Summary) float64 { return float64(s.Refused) }, 0.5},
		{"critical ok", func(s Summary) float64 { return s.CriticalOK }, 0.005},
		{"queue at 30 s", func(s Summary) float64 { return float64(s.InSystem) }, 0.5},
	}
	spread := math.Sqrt(1 + 1.0/labSeeds) // sd of one draw minus a mean of N, in σ
	rows := readOverloadTable(t)
	require.Len(t, rows, 18)
	for _, row := range rows {
		t.Run(fmt.Sprintf("%s/%v", row.policy, row.load), func(t *testing.T) {
			mk, ok := admissions[row.policy]
			require.True(t, ok, "no admission for %q", row.policy)
			require.Len(t, row.figures, len(figures))
			got := make([][]float64, len(figures))
			for seed := range uint32(labSeeds) {
				s := Run(Config{Seed: seed + 1, Load: Constant(row.load), Admission: mk()}).Summary
				for i, f := range figures {
					got[i] = append(got[i], f.lab(s))
				}
			}
			for i, f := range figures {
				x := row.figures[i]
				m, sd := meanSD(got[i])
				sigma := math.Max(sd, f.u)
				d, tol := math.Abs(x-m), k*sigma*spread+f.u
				assert.LessOrEqual(t, d, tol, "%s: sources %v, lab %.4g ± %.3g over %d seeds: off by %.1f σ",
					f.name, x, m, sd, labSeeds, (d-f.u)/(sigma*spread))

				logs := make([]float64, len(got[i]))
				for j, v := range got[i] {
					logs[j] = math.Log(v + f.u)
				}
				lm, lsd := meanSD(logs)
				lu := f.u / (x + f.u)
				lsigma := math.Max(lsd, lu)
				ld, ltol := math.Abs(math.Log(x+f.u)-lm), k*lsigma*spread+lu
				assert.LessOrEqual(t, ld, ltol, "%s: sources %v, lab geometric mean %.4g (×/÷ %.3g) over %d seeds: off by a factor %.3g, %.1f σ",
					f.name, x, math.Exp(lm)-f.u, math.Exp(lsd), labSeeds, math.Exp(ld), (ld-lu)/(lsigma*spread))

				if rel := tol / (m + f.u); rel > 0.5 && m > 20*f.u {
					t.Logf("%s: sources %v, lab %.4g ± %.3g: one draw tests it to ±%.0f%% only", f.name, x, m, sd, 100*rel)
				}
			}
		})
	}
}

// overloadRow is one line of overload-policies.out: the figures after the
// load, in the table's order, with percentages as fractions.
type overloadRow struct {
	policy  string
	load    float64
	figures []float64
}

func readOverloadTable(t *testing.T) []overloadRow {
	t.Helper()
	raw, err := os.ReadFile("testdata/seeds/overload-policies.out")
	require.NoError(t, err)
	var rows []overloadRow
	for _, block := range strings.Split(strings.TrimSpace(string(raw)), "\n\n") {
		lines := strings.Split(block, "\n")
		require.Greater(t, len(lines), 2, "a policy, a header and rows")
		for _, line := range lines[2:] {
			fields := strings.Fields(line)
			row := overloadRow{policy: lines[0]}
			for i, f := range fields {
				scale := 1.0
				if p, ok := strings.CutSuffix(f, "%"); ok {
					f, scale = p, 0.01
				}
				v, err := strconv.ParseFloat(f, 64)
				require.NoError(t, err, "%q", line)
				if i == 0 {
					row.load = v
				} else {
					row.figures = append(row.figures, v*scale)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// meanSD returns the mean and the sample standard deviation of xs.
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
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

// TestEventsPopInKeyOrder: pushes and pops interleaved at random, with
// ties on the time, come out in (at, seq) order, and the heap keeps no
// popped request.
func TestEventsPopInKeyOrder(t *testing.T) {
	rng := NewMulberry32(5)
	var h events
	var seq uint64
	last := event{at: -1}
	popped := 0
	for range 20000 {
		if len(h) == 0 || rng.Float64() < 0.55 {
			seq++
			// Times on a coarse grid, so that many tie and seq decides;
			// never before the last popped event, as in a run.
			h.push(event{at: last.at + time.Duration(rng.Float64()*8)*time.Millisecond, seq: seq, r: &Request{}})
			continue
		}
		e := h.pop()
		require.True(t, last.before(e), "pop %d: %v/%d after %v/%d", popped, e.at, e.seq, last.at, last.seq)
		require.Nil(t, h[:cap(h)][len(h)].r, "the popped slot is cleared")
		last = e
		popped++
	}
	for len(h) > 0 {
		e := h.pop()
		require.True(t, last.before(e))
		last = e
	}
	assert.Greater(t, popped, 5000)
}

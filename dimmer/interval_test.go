package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// Two instances push every second; brownoutd ticks every 250 ms. The
// fleet's Recent is the sum of each instance's latest interval and its
// RecentAt the latest push (aggregate.finish). Instance A has one interval
// of 20 arrivals instead of 100 (the fleet: 120 instead of 200, the same
// single-interval outlier as TestModelCountsARepeatedPeriodOnce). In phase
// or half a second apart, the levels hold: RecentAt moves at each
// instance's push, and a new interval of the fleet is one a span after the
// last — the one interval of A is not two (it was, and the levels
// brightened for it).
func TestModelCountsAFleetIntervalOnceWhenInstancesPushApart(t *testing.T) {
	for _, phaseB := range []int{0, 2} { // B pushes at tick%4 == phaseB
		t.Run(map[int]string{0: "in phase", 2: "half a second apart"}[phaseB], func(t *testing.T) {
			tick := 250 * time.Millisecond
			r := newModelRigWith(t, func(cfg *Config) { cfg.Tick = tick })
			a, b := 100.0, 100.0
			var s signals.Snapshot
			var at time.Time
			k := 0
			step := func(nextA float64) float64 {
				pushed := false
				if k%4 == 0 {
					a, pushed = nextA, true
				}
				if k%4 == phaseB {
					b, pushed = 100, true
				}
				r.now = r.now.Add(tick)
				if pushed || k == 0 {
					s = r.pushSnap(a+b, r.c.State())
					at = r.now
				}
				s.RecentAt, s.Time = at, r.now
				k++
				return r.c.Step(r.now, s).Brightness
			}
			for range 90 * 4 {
				step(100)
			}
			b0 := r.c.State().Brightness
			require.Greater(t, b0, 0.05)
			require.Less(t, b0, 0.95)
			hi := step(20) // A's one low interval
			for range 3 {
				hi = max(hi, step(20))
			}
			for range 4 {
				hi = max(hi, step(100))
			}
			assert.LessOrEqual(t, hi, b0+minMove, "one interval of one instance brightened the levels from %.2f to %.2f: %s", b0, hi, r.c.State().Reason)
		})
	}
}

// The all-off work's tracker (moves false) settled at 10 ms. One period
// of 100 requests reads 14 ms (an outlier: a burst of slow requests), then
// 300 periods of fewer than minJumpCount requests read 10 ms — demand
// passes jump=false for them — then one more period of 100 requests reads
// 14 ms. Two outliers five minutes apart, with normal periods between,
// are not two periods in a row: a value other than the last, tested or
// not, breaks the run (only a value seen again keeps it).
func TestTrackerForgetsAnExceedanceAcrossOtherValues(t *testing.T) {
	var tr tracker
	const sd = 0.0005 // a 100-request period's standard error
	for range 600 {
		tr.update(0.010, sd*sd, fastWeight(5), true)
	}
	require.InDelta(t, 0.010, tr.est, 1e-6)
	require.False(t, tr.update(0.014, sd*sd, fastWeight(5), true), "one outlier is no jump")
	for range 300 {
		tr.update(0.010, 10*sd*sd, fastWeight(5), false) // N < minJumpCount
	}
	jumped := tr.update(0.014, sd*sd, fastWeight(5), true)
	assert.False(t, jumped, "a second outlier 300 periods later confirmed a jump: est %.4f", tr.est)
}

// A source that reports completions and latency but no arrival rate and
// no per-period counts (a PromQL source whose arrival query returns no
// data, Queries without ArrivalRate, or a LoadSignal the source lacks).
// Two periods over High set K (capCold). A scheduled cap of 0.3 on every
// feature for a minute pulls the brightness down to it (anti-windup).
// After the cap ends, with the latency far under target, the levels come
// back: a load unknown holds the levels only while one was known within
// a signal window (here never).
func TestModelBrightensAfterACapWhenNoLoadIsReported(t *testing.T) {
	from := t0.Add(30 * time.Second)
	cfg := Config{
		Targets:  []Target{{Signal: signals.LatencyP99, Target: 0.3}},
		Features: []Feature{{Name: "recommendations", Rank: 0, Cost: 1.5}, {Name: "reviews", Rank: 1, Cost: 0.5}},
		Schedule: []Cap{{Max: 0.3, From: from, For: time.Minute, Reason: "sale"}},
	}
	c, err := New(cfg)
	require.NoError(t, err)
	now := t0
	step := func(p99 float64) *State {
		now = now.Add(time.Second)
		s := signals.Snapshot{Time: now, Window: 5 * time.Second}
		s.Set(signals.LatencyP99, p99)
		s.Set(signals.Throughput, 200)
		return c.Step(now, s)
	}
	step(0.6)
	step(0.6)
	c.mu.Lock()
	k := c.mu.mdl.capacity.k
	c.mu.Unlock()
	require.Greater(t, k, 0.0, "K set at the overload")
	for now.Before(from.Add(30 * time.Second)) {
		step(0.05)
	}
	require.Less(t, c.State().Brightness, 0.5, "capped")
	var st *State
	for range 600 { // ten minutes after the cap's end, far under target
		st = step(0.05)
	}
	assert.Greater(t, st.Brightness, 0.9, "ten minutes after the cap ended: %s", st.Reason)
}

// Ĉ measured at 4 s of work a second (K 3.6). One saturated period reads
// 12: a 3 s stall of a dependency ends and the four requests that held the
// workers complete together (a period's Work sums the service times of
// the requests that completed in it). Then the service loses half its
// workers and every saturated period reads 2: within five saturated
// periods K is under 3.5. The burst's reading has a standard error of 6 s
// a second (four requests of 3 s): it is averaged, not taken as Ĉ
// (replacing Ĉ by it left K at 3.6 for nine periods).
func TestCapacityAveragesABurstOfLongRequests(t *testing.T) {
	now := t0
	var e capacity
	e.saturated(now, 4, 0, true, true, 5*time.Second)
	require.InDelta(t, 3.6, e.k, 1e-9)
	now = now.Add(time.Minute)
	e.saturated(now, 12, 6, true, true, 5*time.Second) // the stall's burst: four requests of 3 s, an SE of 6 s a second
	for range 5 {
		now = now.Add(time.Second)
		e.saturated(now, 2, 0, true, true, 5*time.Second)
	}
	assert.Less(t, e.k, 3.5, "K after five saturated periods at half the capacity (Ĉ %.2f)", e.c)
}

// Dimmed for 300 req/s, one period comes without per-period counts (the
// windowed arrival rate alone: 300), then one interval of 150. The
// period without counts resets the load tracker; the next interval's
// load before it is then the last rate (300), not the reset tracker's 0,
// and the one interval of the fall does not brighten the levels.
func TestModelHoldsForOneIntervalOfAFallAfterAPeriodWithoutCounts(t *testing.T) {
	r := newModelRig(t)
	r.periods(20, 100)
	b := r.periods(60, 300).Brightness
	require.Less(t, b, 0.6)
	s := r.snap(300, r.c.State(), 5*time.Second)
	s.Recent, s.RecentSpan = signals.ClassCounts{}, 0
	r.now = r.now.Add(time.Second)
	s.Time = r.now
	r.c.Step(r.now, s)
	st := r.period(150)
	assert.LessOrEqual(t, st.Brightness, b+minMove, "one interval of a fall after a period without counts: %s", st.Reason)
}

package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestCapacityReadingOverĈReplacesIt: a saturated period's completions
// are at most what the service can do. The first seconds of a run read
// low (four workers behind a gate whose limit is still opening: 1.7 s of
// work a second), K is raised since to what the service carried within
// target, and a later saturated period reads 4.2 ± 0.1: it shows Ĉ too
// low and replaces it — it must not average with the start-up's into a bound
// under K (the average cut a K of 3.6 to 2.6). A reading under Ĉ still
// moves it by measureWeight, and enough of them bring K down.
func TestCapacityReadingOverĈReplacesIt(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var e capacity
	e.saturated(t0, 1.7, 0, true, true, 5*time.Second)
	assert.InDelta(t, setShare*1.7, e.k, 1e-9, "the first reading sets K")
	e.carried(t0.Add(time.Minute), 3.6)
	e.saturated(t0.Add(5*time.Minute), 4.5, 6, true, true, 5*time.Second)
	assert.InDelta(t, 3.6+measureWeight*(4.5-3.6), e.c, 1e-9, "a reading over Ĉ within its noise moves it by measureWeight")
	e.saturated(t0.Add(5*time.Minute+time.Second), 4.2, 0.1, true, true, 5*time.Second)
	assert.InDelta(t, 4.0, e.c, 1e-9, "one beyond its noise replaces it with its lower bound")
	assert.InDelta(t, 3.6, e.k, 1e-9, "K carried within target stays")

	e.saturated(t0.Add(6*time.Minute), 3.0, 0, true, true, 5*time.Second)
	assert.InDelta(t, 4.0+measureWeight*(3.0-4.0), e.c, 1e-9, "a reading under Ĉ moves it by measureWeight")
	assert.InDelta(t, 3.6, e.k, 1e-9)
	for i := range 5 {
		e.saturated(t0.Add(7*time.Minute+time.Duration(i)*time.Second), 3.0, 0, true, true, 5*time.Second)
	}
	assert.Less(t, e.k, 3.4, "a service that does less, period after period, bounds K")
	assert.Equal(t, capMeasured, e.src)
}

// capOf returns the rig's K and Ĉ.
func (r *modelRig) capOf() (k, c float64) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.mu.mdl.capacity.k, r.c.mu.mdl.capacity.c
}

// scaleOf returns the priors' scale the moves taught the rig's law.
func (r *modelRig) scaleOf() float64 {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.mu.mdl.scale
}

// burstSnap is a saturated period whose completions read far under Ĉ:
// a burst late in it, the service idle before it (20 completions of the
// 200 arrivals, half refused, the gate full).
func (r *modelRig) burstSnap() signals.Snapshot {
	s := r.snap(20, r.c.State(), 5*time.Second)
	s.Recent.Arrived = 200
	s.Set(signals.ArrivalRate, 200)
	s.Set(signals.RejectRatio, 0.5)
	s.Set(signals.GateBusy, 1)
	return s
}

// stepSnap steps s one second on.
func (r *modelRig) stepSnap(s signals.Snapshot) *State {
	r.now = r.now.Add(time.Second)
	s.Time = r.now
	return r.c.Step(r.now, s)
}

// TestModelMeasuresCapacityFromTheSecondSaturatedPeriod: a saturated
// period (the gate full, arrivals beyond completions) whose completions
// read far under Ĉ — a burst late in the period, the service idle before
// it — is the first of its run: it measures nothing, and K and Ĉ stay. A
// second in a row, busy throughout, is a measurement.
func TestModelMeasuresCapacityFromTheSecondSaturatedPeriod(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400) // overloaded: Ĉ and K measured
	r.periods(60, 200)
	k0, c0 := r.capOf()
	require.Greater(t, c0, 0.0, "Ĉ measured in the overload")
	r.stepSnap(r.burstSnap())
	k, c := r.capOf()
	assert.Equal(t, k0, k, "the first saturated period of a run moved K")
	assert.Equal(t, c0, c, "the first saturated period of a run moved Ĉ")
	r.stepSnap(r.burstSnap())
	_, c = r.capOf()
	assert.Less(t, c, c0, "the second saturated period in a row measures")
}

// TestModelStartsASaturatedRunAfterAGap: a run of saturated periods ends
// where the law did not see the periods after it — a freeze, another
// replica's term — and a burst after the gap is the first of a new run.
// (A count of saturated periods that only the law's own periods reset
// took the burst after an unfreeze, or a takeover, as the fourth in a row
// and moved Ĉ from 4.0 to 3.2.) An interval seen twice is one period.
func TestModelStartsASaturatedRunAfterAGap(t *testing.T) {
	saturate := func(t *testing.T) (*modelRig, float64, float64) {
		r := newModelRig(t)
		r.periods(30, 400)
		r.periods(3, 1000) // saturated at the floors
		k0, c0 := r.capOf()
		require.Greater(t, c0, 0.0)
		return r, k0, c0
	}
	t.Run("freeze", func(t *testing.T) {
		r, k0, c0 := saturate(t)
		r.c.FreezeAt(r.now, "incident")
		r.periods(120, 100)
		r.c.UnfreezeAt(r.now)
		r.stepSnap(r.burstSnap())
		k, c := r.capOf()
		assert.Equal(t, c0, c, "Ĉ")
		assert.Equal(t, k0, k, "K")
	})
	t.Run("takeover", func(t *testing.T) {
		r, k0, c0 := saturate(t)
		cp := r.c.Checkpoint()
		r.now = r.now.Add(10 * time.Minute) // another replica led meanwhile
		_, err := r.c.AdoptAt(r.now, cp)
		require.NoError(t, err)
		r.stepSnap(r.burstSnap())
		k, c := r.capOf()
		assert.Equal(t, c0, c, "Ĉ")
		assert.Equal(t, k0, k, "K")
	})
	t.Run("an interval seen twice", func(t *testing.T) {
		r := newModelRig(t)
		r.periods(30, 400)
		r.periods(60, 200)
		k0, c0 := r.capOf()
		s := r.burstSnap()
		s.RecentAt, s.RecentSpan = r.now.Add(time.Second), time.Second
		r.stepSnap(s)
		r.stepSnap(s) // the same push, seen again
		k, c := r.capOf()
		assert.Equal(t, c0, c, "Ĉ")
		assert.Equal(t, k0, k, "K")
	})
}

// TestModelCorrectsKWhenSaturationAlternates: the capacity halves (four
// workers to two) at 150 req/s, over target throughout, and the gate is
// full every other period only. No saturated period is the second of a
// run, so none measures; the corrections bring K down instead. (When the
// first period of a run restarted the wait before a correction, K stayed
// at 3.65 for five minutes and the levels brightened.)
func TestModelCorrectsKWhenSaturationAlternates(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400)
	r.periods(60, 200)
	r.workers = 2
	for i := range 300 {
		s := r.snap(150, r.c.State(), 5*time.Second)
		if i%2 == 1 {
			s.Set(signals.GateBusy, 0.2) // under SaturatedAt: not saturated
		}
		s.Set(signals.LatencyP99, 0.6) // over target throughout
		r.stepSnap(s)
	}
	k, _ := r.capOf()
	st := r.c.State()
	assert.Less(t, k, 2.2, "K after five minutes over target at a capacity of 2: %s", st.Reason)
	assert.Less(t, st.Brightness, 0.3, st.Reason)
}

// TestCapacityFirstOfARunOverĈRaisesIt: idle time only lowers a period's
// reading, so the first saturated period of a run that reads over Ĉ
// beyond its noise still raises it (here Ĉ was only what the service
// carried within target).
func TestCapacityFirstOfARunOverĈRaisesIt(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := capacity{k: 2, src: capCold}
	e.carried(t0, 2.5)
	e.saturated(t0.Add(time.Minute), 4, 0.1, false, true, 5*time.Second)
	assert.InDelta(t, 4-carriedZ*0.1, e.c, 1e-9)
}

// TestCapacityARaisedĈCutsNoK: Ĉ was only what the service carried
// within target (2.0), and the corrections took K to 3.6 since. A
// saturated period reads 4.0 ± 0.4: it raises Ĉ to its lower bound, 3.2 —
// evidence that the service does more than Ĉ said, not that K is over
// what it does — and K stays. (It used to cut K to that lower bound: at
// four workers in the lab K went from 3.6 to 3.1, and the levels stayed
// 0.15 low for minutes.) A reading within its noise of Ĉ, under K, still
// brings K down to Ĉ.
func TestCapacityARaisedĈCutsNoK(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := capacity{k: 1.8, c: 2.0, src: capMeasured}
	e.carried(t0, 2.0)
	e.k = 3.6 // corrected up since
	e.saturated(t0.Add(time.Minute), 4.0, 0.4, true, true, 5*time.Second)
	assert.InDelta(t, 4.0-carriedZ*0.4, e.c, 1e-9, "Ĉ raised to the reading's lower bound")
	assert.InDelta(t, 3.6, e.k, 1e-9, "K cut by a raise of Ĉ")
	e.saturated(t0.Add(2*time.Minute), 3.0, 0.4, true, true, 5*time.Second)
	assert.InDelta(t, 3.2+measureWeight*(3.0-3.2), e.c, 1e-9)
	assert.InDelta(t, e.c, e.k, 1e-9, "a reading under K within its noise of Ĉ brings K down to it")
}

// TestModelReadsASaturatedIntervalOnce: brownoutd ticking four times a
// push sees each interval four times (Snapshot.RecentAt the same). A
// saturated interval is one reading of the capacity: Ĉ moves by
// measureWeight of its distance, not by that four times over.
func TestModelReadsASaturatedIntervalOnce(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400)
	r.periods(60, 200)
	_, c0 := r.capOf()
	var meas float64
	for i := range 2 { // a run of two saturated intervals, each seen four times
		s := r.burstSnap()
		s.RecentAt, s.RecentSpan = r.now.Add(time.Second), time.Second
		if i == 1 {
			meas = s.Tallies[0].On.Sum + s.Tallies[0].Off.Sum
		}
		for range 4 {
			r.now = r.now.Add(250 * time.Millisecond)
			s.Time = r.now
			r.c.Step(r.now, s)
		}
	}
	_, c := r.capOf()
	assert.InDelta(t, c0+measureWeight*(meas-c0), c, 1e-9, "Ĉ after one reading of %.2f", meas)
}

// TestModelReadsAnUntimedSaturatedIntervalOnce: a source that reports
// per-period counts over a second (RecentSpan) but not when its intervals
// end (no RecentAt), read every 250 ms: a burst's interval is seen four
// times. It is the first saturated interval of a run, seen again — not
// the second, third and fourth — and K and Ĉ stay.
func TestModelReadsAnUntimedSaturatedIntervalOnce(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400)
	r.periods(60, 200)
	k0, c0 := r.capOf()
	s := r.burstSnap()
	for range 4 {
		r.now = r.now.Add(250 * time.Millisecond)
		s.Time = r.now
		r.c.Step(r.now, s)
	}
	k, c := r.capOf()
	assert.Equal(t, c0, c, "Ĉ")
	assert.Equal(t, k0, k, "K")
}

// TestCapacityRebasedForASlowerService: the 11.11 sale's capacity dip. At
// midnight, every section off, four workers carried 3.92 s of 9.5 ms
// requests a second within target (K = Ĉ: no idle left); then every piece
// of work took twice as long. K gives up the idle the longer wait calls
// for — η (19.8 requests a second for a p99 of 300 ms at the default set
// point) times what the all-off request's work grew by since K was found
// — and takes it back when the service recovers, whatever the estimate
// drifted by between the two jumps. A K that already leaves that idle
// under Ĉ (0.9 of it, as a saturated period sets it) gives up nothing, and
// takes nothing back. K keeps at least a quarter of itself.
func TestCapacityRebasedForASlowerService(t *testing.T) {
	fs := []Feature{{Name: "reviews", Cost: 0.3}}
	cfg, err := Config{Targets: []Target{{Signal: signals.LatencyP99, Target: 0.3}, {Signal: signals.RejectRatio, Target: 0.01}}, Features: fs}.withDefaults()
	require.NoError(t, err)
	eta := cfg.queueIdle()
	assert.InDelta(t, math.Log(100)/(0.775*0.3), eta, 1e-9, "η = ln(1/(1−0.99)) / (set point × target)")

	e := capacity{k: 3.92, c: 3.92}
	e.rebase(0.0095, eta, true, true)
	assert.InDelta(t, 3.92, e.k, 1e-12, "the first period only says where K is")
	e.rebase(0.0097, eta, false, true)
	assert.InDelta(t, 3.92, e.k, 1e-12, "drift moves nothing")
	e.rebase(0.0194, eta, true, true)
	assert.InDelta(t, 3.92-eta*0.0099, e.k, 1e-9, "twice the work: K gives up η times what the all-off request's work grew by since K was found")
	slow := e.k
	e.rebase(0.0190, eta, false, true)
	assert.InDelta(t, slow+(3.92-slow)*0.0004/0.0099, e.k, 1e-9, "while K holds what the slowdown took, the work's drift down gives back its share")
	e.rebase(0.0192, eta, false, true)
	assert.InDelta(t, slow+(3.92-slow)*0.0004/0.0099, e.k, 1e-9, "and its drift up takes nothing")
	settled := e.k
	e.rebase(0.0185, eta, false, false)
	assert.Equal(t, settled, e.k, "a drift not measured from the requests' own tallies gives nothing back")
	e.rebase(0.0095, eta, true, true)
	assert.InDelta(t, 3.92, e.k, 1e-9, "the service back: K back")
	e.rebase(0.0090, eta, false, true)
	assert.InDelta(t, 3.92, e.k, 1e-9, "and no more than the slowdown took")

	e = capacity{k: 3.92, at: 0.0095} // no Ĉ to bound the give-back
	e.rebase(0.0090, eta, false, true)
	assert.Equal(t, 0.0095, e.at, "nothing held: a drift down leaves the work K was found at")
	e.rebase(0.0194, eta, true, true)
	assert.InDelta(t, 3.92-eta*(0.0194-0.0095), e.k, 1e-9, "so a slowdown takes for its growth from there")
	e.rebase(0.0090, eta, false, true)
	assert.InDelta(t, 3.92, e.k, 1e-9, "settling past that work gives back what was held, no more")
	assert.Zero(t, e.held)

	e = capacity{k: 0.9 * 3.93, c: 3.93}
	e.rebase(0.0095, eta, true, true)
	e.rebase(0.019, eta, true, true)
	assert.InDelta(t, 0.9*3.93, e.k, 1e-12, "the idle under Ĉ is what the slower work needs: K stays")
	e.rebase(0.0095, eta, true, true)
	assert.InDelta(t, 0.9*3.93, e.k, 1e-12, "and takes nothing back")

	tight, err := Config{Targets: []Target{{Signal: signals.LatencyP999, Target: 0.05}}, Features: fs}.withDefaults()
	require.NoError(t, err)
	e = capacity{k: 1, at: 0.01}
	e.rebase(0.1, tight.queueIdle(), true, true)
	assert.InDelta(t, minKShare, e.k, 1e-9, "K keeps a quarter of itself")

	none, err := Config{Targets: []Target{{Signal: signals.RejectRatio, Target: 0.01}, {Signal: signals.LatencyMax, Target: 1}}, Features: fs}.withDefaults()
	require.NoError(t, err)
	assert.Zero(t, none.queueIdle(), "no quantile of a wait: no idle for it")
}

// etaFor is η for a p99 latency target of target seconds.
func etaFor(t *testing.T, target float64) float64 {
	cfg, err := Config{Targets: []Target{{Signal: signals.LatencyP99, Target: target}}, Features: []Feature{{Name: "a", Cost: 1}}}.withDefaults()
	require.NoError(t, err)
	return cfg.queueIdle()
}

// TestCapacityGivesBackAtMostĈ: a K carried within target again while
// the service was slow is what the service does: what the slowdown took
// is spent on it, and what is given back never takes K over Ĉ.
func TestCapacityGivesBackAtMostĈ(t *testing.T) {
	eta := etaFor(t, 0.3)
	e := capacity{k: 3.92, c: 3.92, at: 0.0095}
	e.rebase(0.0194, eta, true, true)
	e.carried(time.Unix(0, 0), 3.9)
	e.at = 0.0194 // (as the law stamps it when a rule moves K)
	e.rebase(0.0095, eta, true, true)
	assert.LessOrEqual(t, e.k, e.c, "K at most Ĉ")
	assert.Zero(t, e.held)
}

// TestCapacityRebaseFloorDoesNotCompound: a slowdown in two jumps leaves
// K where one jump of the same size does, and at least a quarter of what
// it was before either.
func TestCapacityRebaseFloorDoesNotCompound(t *testing.T) {
	cfg, err := Config{Targets: []Target{{Signal: signals.LatencyP999, Target: 0.05}}, Features: []Feature{{Name: "a", Cost: 1}}}.withDefaults()
	require.NoError(t, err)
	eta := cfg.queueIdle()
	one := capacity{k: 1, at: 0.01}
	one.rebase(0.1, eta, true, true)
	two := capacity{k: 1, at: 0.01}
	two.rebase(0.055, eta, true, true)
	two.rebase(0.1, eta, true, true)
	assert.InDelta(t, one.k, two.k, 1e-9)
	assert.InDelta(t, minKShare, two.k, 1e-9)
}

// TestCapacityGivesBackWhatTheGrowthTook: what is given back is the share
// of what was taken that the work's growth undone took — whatever η is by
// then (a target reconfigured in the slowdown, or none left).
func TestCapacityGivesBackWhatTheGrowthTook(t *testing.T) {
	e := capacity{k: 3.92, c: 3.92, at: 0.0095}
	e.rebase(0.0194, etaFor(t, 0.3), true, true)
	e.rebase(0.0095, etaFor(t, 0.6), true, true)
	assert.InDelta(t, 3.92, e.k, 1e-9)
	assert.Zero(t, e.held)

	e = capacity{k: 3.92, c: 3.92, at: 0.0095}
	e.rebase(0.0194, etaFor(t, 0.3), true, true)
	e.rebase(0.0145, 0, true, true)
	held := etaFor(t, 0.3) * 0.0099
	assert.InDelta(t, 3.92-held*(1-0.0049/0.0099), e.k, 1e-9, "about half the growth undone, without a target: that share given back")
}

// TestCapacityRebaseStaysFinite: a target so small that η overflows
// models no idle, and K stays a number.
func TestCapacityRebaseStaysFinite(t *testing.T) {
	eta := etaFor(t, 1e-309)
	assert.Zero(t, eta)
	e := capacity{k: 1, at: 0.01, held: 0.5}
	e.rebase(0.01, eta, true, true)
	e.rebase(0.02, eta, true, true)
	assert.False(t, math.IsNaN(e.k) || math.IsInf(e.k, 0), "K %v", e.k)
}

// TestModelSaturationIsThePeriods: whether a period is saturated is judged
// on the counts of the period whose work it reads. A window whose rates
// still hold a burst's refusals from seconds before, over a period served
// within capacity, measures nothing (the period's work is what the load
// brought, not what the service can do); a period whose own arrivals ran
// beyond its completions, in a window that averages them away, measures.
func TestModelSaturationIsThePeriods(t *testing.T) {
	r := newModelRig(t)
	withWork := func(s signals.Snapshot) signals.Snapshot {
		// Every request evaluates both features in the rig: the first's
		// tally is the work of every request.
		s.Work = s.Tallies[0].On
		s.Work.Merge(s.Tallies[0].Off)
		return s
	}
	r.periods(30, 400) // overloaded: Ĉ and K measured
	r.periods(60, 200)
	k0, c0 := r.capOf()
	require.Greater(t, c0, 0.0)
	for range 3 {
		s := withWork(r.snap(200, r.c.State(), 5*time.Second))
		s.Set(signals.ArrivalRate, 230) // the window: a burst's refusals
		s.Set(signals.GateBusy, 1)
		r.stepSnap(s)
	}
	k, c := r.capOf()
	assert.Equal(t, c0, c, "a period served within capacity measured Ĉ")
	assert.GreaterOrEqual(t, k, k0, "a period served within capacity cut K")

	for range 3 {
		s := withWork(r.burstSnap())
		th, _ := s.Get(signals.Throughput)
		s.Set(signals.ArrivalRate, th) // the window: nothing over
		r.stepSnap(s)
	}
	_, c = r.capOf()
	assert.NotEqual(t, c0, c, "saturated periods measured nothing")
}

// TestModelKeepsWhatWasCarriedBeforeKWasKnown: a service that has carried
// its load within target — all on, 3 s of work a second for four workers,
// the p99 at two thirds of its target — and then sees its first saturated
// period, a burst at its gate that completes 1.8 s of work, does not take
// the burst for its capacity: K is at least what the periods before it
// carried (less their noise), as it would be had K been known then (see
// capacity.before), and the levels stay where they were. (Without it, K
// was 0.9 of the burst's 1.8 s and every feature dimmed at once: a
// one-worker lab at half its capacity went to its floors on 12 of 40
// seeds.)
func TestModelKeepsWhatWasCarriedBeforeKWasKnown(t *testing.T) {
	r := newModelRig(t)
	st := r.periods(30, 100)
	require.Equal(t, 1.0, st.Brightness, "all on within target: %s", st.Reason)
	k, _ := r.capOf()
	require.Equal(t, 0.0, k, "no K yet")

	s := r.snap(60, r.c.State(), 5*time.Second) // the burst's completions
	s.Recent.Arrived = 100
	s.Set(signals.ArrivalRate, 100)
	s.Set(signals.GateBusy, 0.5)
	s.Set(signals.LatencyP99, 0.2)
	st = r.stepSnap(s)
	k, c := r.capOf()
	t.Logf("K %.2f, Ĉ %.2f: %s", k, c, st.Reason)
	assert.Greater(t, k, 2.7, "K from what was carried, not the burst's 0.9 × 1.8")
	assert.GreaterOrEqual(t, c, k, "Ĉ at least K")
	st = r.periods(5, 100)
	assert.Greater(t, st.Brightness, 0.9, "the levels stay: %s", st.Reason)
}

// TestModelMeasuresAnOverloadOverWhatWasCarriedBefore: what the periods
// carried before K was known bounds a first measure taken within target
// (a burst: TestModelKeepsWhatWasCarriedBeforeKWasKnown), not one taken in
// an overload. A service that carried 3 s of work a second within target
// and then lost half its workers is measured by its first overload: K
// from what it does now (0.9 of 2 s a second), not from what it did
// before, and the levels dim at once.
func TestModelMeasuresAnOverloadOverWhatWasCarriedBefore(t *testing.T) {
	r := newModelRig(t)
	st := r.periods(60, 100)
	require.Equal(t, 1.0, st.Brightness, "all on within target: %s", st.Reason)
	r.c.mu.Lock()
	lb := r.c.mu.mdl.capacity.before(r.now)
	r.c.mu.Unlock()
	require.Greater(t, lb, 2.7, "the bound from what was carried")
	r.workers = 2
	st = r.periods(2, 100)
	k, _ := r.capOf()
	t.Logf("K %.2f: %s", k, st.Reason)
	assert.Less(t, k, 2.0, "K from the overload")
	assert.Less(t, st.Brightness, 0.6, "dimmed at once: %s", st.Reason)
}

// TestCarriedBeforeIsTheLastMinutes: the bound from what was carried
// before K was known is the last minute's mean less two of its standard
// errors — the periods before fade, so that a service that carried more
// before it lost capacity is bounded by what it carries now — and none
// once the last such period is over a minute old.
func TestCarriedBeforeIsTheLastMinutes(t *testing.T) {
	var e capacity
	now := time.Unix(1000, 0)
	for range 60 {
		now = now.Add(time.Second)
		e.carriedBefore(now, 3, 0.3)
	}
	assert.InDelta(t, 3, e.before(now), 0.2, "a minute at 3 s a second")
	for range 180 {
		now = now.Add(time.Second)
		e.carriedBefore(now, 1.5, 0.15)
	}
	assert.InDelta(t, 1.5, e.before(now), 0.1, "three minutes at 1.5 since")
	assert.Equal(t, 0.0, e.before(now.Add(61*time.Second)), "a minute without one")
}

// TestModelAllOffWorkStaysAWork: periods whose requests took less than
// the learned costs say their features alone take (a cost read high — as
// reviews' did, 9 ms for 5, on a square wave of the load before the
// contrasts of mixed ticks were skipped — or requests that got faster)
// say nothing of the all-off request's work: its estimate stays a work,
// in seconds, and K stays in seconds of service a second. (Folded in,
// the estimate went under zero; the law then counted in all-off
// requests, read 291 of them a second as carried, and held every feature
// on through an overload.)
func TestModelAllOffWorkStaysAWork(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400) // overloaded: K measured, the levels fractional
	r.periods(90, 200) // the costs contrasted and learned
	require.True(t, r.c.Costs()[0].Known() && r.c.Costs()[1].Known(), "costs learned")
	k0, _ := r.capOf()
	require.Greater(t, k0, 0.0)
	for range 10 {
		s := r.snap(200, r.c.State(), 5*time.Second)
		for i := range s.Tallies {
			// Every request a millisecond, whatever it rendered.
			for _, side := range []*signals.Moments{&s.Tallies[i].On, &s.Tallies[i].Off} {
				n := side.N
				*side = signals.Moments{}
				for range n {
					side.Add(0.001)
				}
			}
		}
		r.stepSnap(s)
		m := &r.c.mu.mdl
		require.Greater(t, m.w0, 0.0, "the all-off work")
		require.Less(t, m.w0, 0.1, "the all-off work, in seconds")
		k, _ := r.capOf()
		require.Less(t, k, 2*r.workers, "K in seconds of service a second: %s", r.c.State().Reason)
	}
}

// TestModelNotesWhichLevelsMoved: a step that publishes levels moved by
// minMove or more notes when, per feature, for the cost estimates (see
// costs.mixed); one that holds them, or moves one by less, does not.
func TestModelNotesWhichLevelsMoved(t *testing.T) {
	r := newModelRig(t)
	r.periods(3, 100)
	require.Equal(t, 1.0, r.c.State().Brightness)
	for _, at := range r.c.mu.costs.movedAt {
		require.True(t, at.IsZero(), "nothing moved yet")
	}
	old := r.c.State()
	var st *State
	for range 5 {
		if st = r.period(400); st.Brightness < 1 {
			break
		}
	}
	require.Less(t, st.Brightness, 1.0, "dimmed: %s", st.Reason)
	for i := range st.NumFeatures() {
		moved := math.Abs(st.LevelAt(i, -1)-old.LevelAt(i, -1)) >= minMove
		assert.Equal(t, moved, r.c.mu.costs.movedAt[i].Equal(r.now), "%s: %v → %v", st.FeatureName(i), old.LevelAt(i, -1), st.LevelAt(i, -1))
	}
}

// TestModelNotesMovesAcrossAReconfigure: a Reconfigure that reorders the
// ladder moves levels too, and the features are matched by name: a
// feature whose level moved is noted, whatever its index now.
func TestModelNotesMovesAcrossAReconfigure(t *testing.T) {
	r := newModelRig(t)
	r.periods(30, 400)
	st := r.periods(20, 200)
	require.Greater(t, st.Brightness, 0.0)
	require.Less(t, st.Brightness, 1.0, "fractional: %s", st.Reason)
	cfg := r.c.Config()
	cfg.Features[0].Rank, cfg.Features[1].Rank = 1, 0 // reviews dim first now
	at := r.now.Add(500 * time.Millisecond)
	require.NoError(t, r.c.ReconfigureAt(at, cfg))
	now := r.c.State()
	moved := 0
	for _, name := range []string{"recommendations", "reviews"} {
		was, _ := st.Level(name, "")
		is, _ := now.Level(name, "")
		j := r.c.mu.costs.index[name]
		if math.Abs(is-was) >= minMove {
			moved++
			assert.Equal(t, r.c.mu.at, r.c.mu.costs.movedAt[j], "%s: %v → %v, noted", name, was, is)
			assert.False(t, r.c.mu.costs.movedAt[j].IsZero(), name)
		}
	}
	require.Positive(t, moved, "the reordered ladder moved a level")
}

package dimmer

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// windowRig is modelRig as brownoutd sees a fleet without tallies (a
// scrape source, or instances that push no features): the latency's mean
// and the rates are the window's (the last `window` periods), the latest
// period's counts come in Recent.
type windowRig struct {
	*modelRig
	window   int
	n, sum   []float64 // per period: completions, their summed latency
	arrivals []float64
	stall    bool // nothing completes: the service hangs
	noGate   bool // no admission gate reports (no GateBusy, no GateLimit)
	noRoom   bool // the gate reports its limit but not its room this period
	standing bool // the gate says its queue stands (CoDel)
}

func newWindowRig(t *testing.T) *windowRig {
	return &windowRig{modelRig: newModelRig(t), window: 5}
}

func (r *windowRig) period(lam float64) *State {
	st := r.c.State()
	work := r.base
	var lv [2]float64
	for i, name := range []string{"recommendations", "reviews"} {
		lv[i], _ = st.Level(name, "")
		work += lv[i] * r.costs[i]
	}
	served := min(lam, r.workers/work)
	n := float64(int(served))
	sum := 0.0
	for range int(n) {
		s := r.base
		for i := range r.costs {
			if r.rng.Float64() < lv[i] {
				s += r.costs[i]
			}
		}
		sum += s * (0.8 + 0.4*r.rng.Float64())
	}
	if r.stall {
		n, sum, served = 0, 0, 0
	}
	r.n, r.sum, r.arrivals = append(r.n, n), append(r.sum, sum), append(r.arrivals, lam)
	if len(r.n) > r.window {
		r.n, r.sum, r.arrivals = r.n[1:], r.sum[1:], r.arrivals[1:]
	}
	var wn, ws, wa float64
	for i := range r.n {
		wn, ws, wa = wn+r.n[i], ws+r.sum[i], wa+r.arrivals[i]
	}
	w := float64(len(r.n))
	r.now = r.now.Add(time.Second)
	s := signals.Snapshot{Time: r.now, Window: time.Duration(r.window) * time.Second, RecentSpan: time.Second}
	s.Recent.Arrived, s.Recent.Completed = uint64(lam), uint64(n)
	s.Set(signals.ArrivalRate, wa/w)
	s.Set(signals.Throughput, wn/w)
	if wn > 0 {
		s.Set(signals.LatencyMean, ws/wn)
		u := lam * work / r.workers
		s.Set(signals.LatencyP99, 0.05+0.2*min(u, 1))
	}
	s.Set(signals.RejectRatio, max(lam-served, 0)/lam)
	busy := 0.0
	if lam*work/r.workers >= 1 || r.stall {
		busy = 1
	}
	s.Standing = r.standing
	if !r.noGate {
		s.Set(signals.GateLimit, r.workers)
		if !r.noRoom {
			s.Set(signals.GateBusy, busy)
		}
	}
	return r.c.Step(r.now, s)
}

func (r *windowRig) model() (k, scale float64, seconds bool) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.mu.mdl.capacity.k, r.c.mu.mdl.scale, r.c.mu.mdl.capacity.seconds
}

// TestModelWithoutTalliesKeepsKThroughAStall: without tallies, a window
// in which nothing completed (no mean latency, no throughput: the service
// hangs, the gate full and refusing) is no change of the unit of work: K
// stays, in its unit, and the levels, dimmed for an overload, stay down —
// they do not all come back on in the worst second. Behind a gate the
// unit is the all-off request (the latency holds the queue's wait: see
// observe); without one, the window's mean latency stands for the work,
// in seconds.
func TestModelWithoutTalliesKeepsKThroughAStall(t *testing.T) {
	for _, noGate := range []bool{false, true} {
		r := newWindowRig(t)
		r.window = 1 // the window is the period: no lag for teach to misread (see TestModelWithoutTalliesScaleHoldsWhenPriorsAreRight)
		r.noGate = noGate
		var st *State
		for range 30 {
			st = r.period(300)
		}
		k, _, seconds := r.model()
		require.Equal(t, noGate, seconds, "no gate %v: the unit of work is seconds only without a gate", noGate)
		require.Greater(t, k, 0.0)
		dimmed := st.Brightness
		require.Less(t, dimmed, 0.9, "no gate %v: dimmed for 300 req/s: %s", noGate, st.Reason)

		r.stall = true
		for i := range r.window + 1 {
			st = r.period(300)
			k2, _, sec2 := r.model()
			assert.Greater(t, k2, 0.0, "no gate %v, period %d of the stall: K forgotten (was %.3f)", noGate, i, k)
			assert.Equal(t, seconds, sec2, "no gate %v, period %d of the stall: the unit changed", noGate, i)
			assert.LessOrEqual(t, st.Brightness, dimmed+1e-9, "no gate %v, period %d of the stall: the levels brightened: %s", noGate, i, st.Reason)
		}
	}
}

// TestModelWithoutTalliesScaleHoldsWhenPriorsAreRight: without tallies,
// with every Feature.Cost exactly right (the priors' scale is 1), the
// moves of a load that steps up and down teach no scale far from 1 — the
// window's mean latency, which still holds the periods before a move,
// is not the first period after it.
func TestModelWithoutTalliesScaleHoldsWhenPriorsAreRight(t *testing.T) {
	r := newWindowRig(t)
	lo, hi := 1.0, 1.0
	for i := range 120 {
		lam := 150.0
		if i/20%2 == 1 {
			lam = 300
		}
		st := r.period(lam)
		_, s, _ := r.model()
		lo, hi = min(lo, s), max(hi, s)
		if i%5 == 0 || s < 0.5 || s > 2 {
			t.Logf("t=%3d λ=%3.0f b=%.2f scale=%.3g %s", i, lam, st.Brightness, s, st.Reason)
		}
	}
	assert.GreaterOrEqual(t, lo, 0.5, "the priors' scale, taught by the moves, fell to %.3g", lo)
	assert.LessOrEqual(t, hi, 2.0, "the priors' scale rose to %.3g", hi)
}

// TestModelColdKWithoutGateIsNotScaledByARefusalRatio: without an
// admission gate, a first overload read from the refusals (56 % against a
// 1 % target: pressure 56) sets K to about the work carried. The set
// point over the pressure is a latency's measure of how much slower a
// request got (model.go: "the latency is not its queue's, and is taken to
// scale with a request's work"); for a refusal ratio it set K to 1.4 % of
// the work carried (0.056 of 4 s of service a second), which every
// feature off cannot meet, and the reason says the service carries that.
func TestModelColdKWithoutGateIsNotScaledByARefusalRatio(t *testing.T) {
	r := newWindowRig(t)
	r.window, r.noGate = 1, true
	var st *State
	for range 2 {
		st = r.period(300) // all on: 30 ms a request, 4 workers carry 4 s a second
	}
	k, _, _ := r.model()
	assert.GreaterOrEqual(t, k, 0.5*r.workers, "K at the first overload: %s", st.Reason)
}

// settledBehindAGate is a windowRig after 40 periods at 300 req/s behind
// its gate, without tallies: K measured, in all-off requests.
func settledBehindAGate(t *testing.T) (*windowRig, *State) {
	t.Helper()
	r := newWindowRig(t)
	var st *State
	for range 40 {
		st = r.period(300)
	}
	_, _, seconds := r.model()
	require.False(t, seconds, "behind a gate: all-off requests")
	return r, st
}

// TestModelWithoutTalliesGateGoneForAPeriod: a source without tallies
// whose gate signal is missing for one period (a PromQL query that timed
// out, a scrape interval without arrivals) takes the window's latency for
// the work in that period, and the gate's all-off requests again after
// it. K is carried between the units by the all-off request's work, not
// forgotten: the levels do not go to full brightness in the middle of an
// overload, and the unit is the all-off request again once the gate is
// back. (Forgotten, K went from 371 all-off requests a second to nothing,
// and the levels to 1 at a refusal ratio of 56 %.)
func TestModelWithoutTalliesGateGoneForAPeriod(t *testing.T) {
	r, st := settledBehindAGate(t)
	k, _, _ := r.model()
	require.Greater(t, k, 0.0)
	dimmed := st.Brightness
	require.Less(t, dimmed, 0.9, "dimmed for 300 req/s: %s", st.Reason)

	r.noGate = true
	st = r.period(300)
	_, _, seconds := r.model()
	assert.True(t, seconds, "without the gate the window's latency is the work")
	assert.Less(t, st.Brightness, dimmed+0.1, "the period without the gate: %s", st.Reason)
	r.noGate = false
	for i := range 10 {
		st = r.period(300)
		assert.Less(t, st.Brightness, dimmed+0.1, "period %d after: %s", i, st.Reason)
	}
	k2, _, seconds2 := r.model()
	assert.False(t, seconds2, "the gate back: all-off requests again")
	assert.InDelta(t, k, k2, 0.1*k, "K carried over and back")
}

// TestModelWithoutTalliesGateRoomMissingForAPeriod: a period in which a
// gate reports its limit but not its room (a PromQL query for gate.busy
// that failed, a scrape interval without arrivals, the first snapshot) is
// still behind the gate: its latency holds the gate's wait (the latency
// runs from arrival), and is not taken for a request's work — the unit
// stays the all-off request and K stays.
func TestModelWithoutTalliesGateRoomMissingForAPeriod(t *testing.T) {
	r, st := settledBehindAGate(t)
	k, _, _ := r.model()
	dimmed := st.Brightness
	r.noRoom = true
	st = r.period(300)
	k2, _, seconds := r.model()
	assert.False(t, seconds, "the gate's limit still reported: no latency taken for the work: %s", st.Reason)
	assert.InDelta(t, k, k2, 0.05*k, "K stays, in its unit")
	assert.InDelta(t, dimmed, st.Brightness, 0.1, "the levels stay: %s", st.Reason)
}

// TestModelCutsKForAQueueThatStands: the service loses capacity, so that
// the load at the levels set exceeds it by 3 % — less than a saturated
// period's excess — every request waits, a few per cent are
// refused, and no period reads as saturated. Where the gate says its queue
// stands (CoDel) for a signal window while the pressure is over High, K
// goes to setShare of what the period carried, as at a first saturation;
// without that word from the gate, only the corrections move K, and
// slowly.
func TestModelCutsKForAQueueThatStands(t *testing.T) {
	var drop [2]float64
	for i, standing := range []bool{true, false} {
		r, _ := settledBehindAGate(t)
		k0, _, _ := r.model()
		// The workers the load at the levels now takes, less 3 %.
		work := r.base
		for i, name := range []string{"recommendations", "reviews"} {
			lv, _ := r.c.State().Level(name, "")
			work += lv * r.costs[i]
		}
		r.workers = 300 * work / 1.03
		var st *State
		for range 8 {
			r.standing = standing
			st = r.period(300)
		}
		k, _, _ := r.model()
		drop[i] = 1 - k/k0
		t.Logf("standing %v: K %.0f → %.0f (%.1f %% lower): %s", standing, k0, k, 100*drop[i], st.Reason)
	}
	assert.Greater(t, drop[0], 0.1, "a queue that stands: K to nine tenths of what was carried")
	assert.Less(t, drop[1], drop[0]/2, "without the gate's word, no cut")
}

// TestModelAdoptsACheckpointInSecondsBehindAGate: a checkpoint whose K is
// in seconds of service (written where the window's latency stood for the
// work: no gate, or before a gate counted in all-off requests) adopted by
// a controller whose source has a gate and no tallies: K is converted by
// the all-off request's work it was found at, and the levels are those
// the service carries — not every feature off for the twenty minutes K's
// corrections took to climb from a hundredth of its value.
func TestModelAdoptsACheckpointInSecondsBehindAGate(t *testing.T) {
	cp := secondsCheckpoint(t)
	require.True(t, cp.Seconds, "no gate: K in seconds")
	require.Greater(t, cp.CapacityWork, 0.0)

	ref := newWindowRig(t)
	var want float64
	for range 40 {
		want = ref.period(300).Brightness
	}

	r := adoptingRig(t, cp)
	var st *State
	for range 30 {
		st = r.period(300)
	}
	k, _, seconds := r.model()
	assert.False(t, seconds, "behind a gate: all-off requests")
	assert.Greater(t, k, 0.0)
	assert.InDelta(t, want, st.Brightness, 0.2, "the levels a gate's own controller sets (%.2f): %s", want, st.Reason)
}

// secondsCheckpoint is the checkpoint of a source with no gate and no
// tallies after 40 periods at 300 req/s: its K in seconds of service.
func secondsCheckpoint(t *testing.T) Checkpoint {
	src := newWindowRig(t)
	src.noGate = true
	for range 40 {
		src.period(300)
	}
	return src.c.Checkpoint()
}

// adoptingRig is a window rig behind a gate that has adopted cp.
func adoptingRig(t *testing.T, cp Checkpoint) *windowRig {
	r := newWindowRig(t)
	_, err := r.c.AdoptAt(r.now, cp)
	require.NoError(t, err)
	return r
}

// TestModelConvertsNoCheckpointToInfinity: a checkpoint whose K is in
// seconds and whose all-off work is a denormal (a corrupt or hostile
// store) adopted behind a gate without tallies: K is not converted to
// infinity (every feature on whatever the load) but is unknown again, and
// the next overload measures it.
func TestModelConvertsNoCheckpointToInfinity(t *testing.T) {
	cp := secondsCheckpoint(t)
	cp.Capacity, cp.CapacityWork = 1e10, 1e-300
	r := adoptingRig(t, cp)
	var st *State
	for range 30 {
		st = r.period(300)
		k, _, _ := r.model()
		require.False(t, math.IsInf(k, 0) || math.IsNaN(k), "K %v", k)
	}
	assert.Less(t, st.Brightness, 0.9, "an overload measured again: %s", st.Reason)
}

// TestModelModeSurvivesAdoption: a controller that adopts another's
// checkpoints reports the leader's mode — measured behind a gate, no-gate
// without one, whatever the saturated ceiling Ĉ says — from the moment it
// adopts, and keeps it adopting again and again without a step of its own
// (a replica that serves what it adopts never steps). A checkpoint written
// before the mode was kept is taken as gated when Ĉ was measured.
func TestModelModeSurvivesAdoption(t *testing.T) {
	for _, tc := range []struct {
		name string
		lead func(r *windowRig)
		want string
	}{
		{"gated", func(r *windowRig) {
			for range 30 {
				r.period(300)
			}
		}, ModelMeasured},
		{"no gate", func(r *windowRig) {
			r.noGate = true
			for range 30 {
				r.period(300)
			}
		}, ModelNoGate},
		{"no gate, Ĉ raised by what it carried", func(r *windowRig) {
			r.noGate = true
			for range 30 {
				r.period(300)
			}
			r.workers = 64
			for range 10 {
				r.period(1000)
			}
		}, ModelNoGate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newWindowRig(t)
			tc.lead(r)
			require.Equal(t, tc.want, r.c.Model().Mode, "the leader's mode")
			if tc.name == "no gate, Ĉ raised by what it carried" {
				require.Greater(t, r.c.Model().Saturated, 0.0, "(the case needs a Ĉ)")
			}
			f := newWindowRig(t)
			for range 3 {
				_, err := f.c.AdoptAt(r.now, roundTrip(t, r.c.Checkpoint()))
				require.NoError(t, err)
				assert.Equal(t, tc.want, f.c.Model().Mode, "adopted")
				r.period(300)
			}
		})
	}
	t.Run("a checkpoint without the mode", func(t *testing.T) {
		r := newWindowRig(t)
		for range 30 {
			r.period(300)
		}
		cp := r.c.Checkpoint()
		require.Positive(t, cp.Saturated)
		cp.Gated = nil
		f := newWindowRig(t)
		_, err := f.c.AdoptAt(r.now, cp)
		require.NoError(t, err)
		assert.Equal(t, ModelMeasured, f.c.Model().Mode, "Ĉ measured: gated")
	})
}

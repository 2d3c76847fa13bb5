package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestModelBrightensForAFallTwoPeriodsShow: a load that held at 300 req/s
// for half a minute after jumping there from 100 (the tracker still lets
// the level move then: one period of 150 pulls its estimate most of the
// way) falls to 150. The first period of 150 does not brighten the levels
// — the sale's capacity dip on brownoutd began so, the load falling a
// period before the work of a request doubled, and the levels brightened
// into it — and the second does.
func TestModelBrightensForAFallTwoPeriodsShow(t *testing.T) {
	r := newModelRig(t)
	r.periods(20, 100)
	st := r.periods(30, 300)
	b := st.Brightness
	assert.Less(t, b, 0.6, "dimmed for 300 req/s: %s", st.Reason)
	st = r.period(150)
	assert.LessOrEqual(t, st.Brightness, b, "one period of a fall brightened: %s", st.Reason)
	st = r.period(150)
	assert.Greater(t, st.Brightness, b+0.2, "the second period of the fall: %s", st.Reason)
}

// TestModelTeachesFromThePeriodThatShowsTheMove: an app that reads the
// levels from brownoutd renders a move a period after the daemon made it,
// so the first period the daemon reads after a move is of the levels
// before. With every prior 10× too high (the truth: 1.5 and 0.5 of the
// all-off request, configured 15 and 5) the moves of an overload teach
// the priors' scale with the period that shows them: within 20 periods it
// is under a third (the truth 0.1), where the period right after each move
// taught nothing, the scale stayed 1 and the levels stayed where the
// priors' costs said they fit.
func TestModelTeachesFromThePeriodThatShowsTheMove(t *testing.T) {
	r := newModelRigWith(t, func(cfg *Config) {
		cfg.Features[0].Cost, cfg.Features[1].Cost = 15, 5
	})
	shown := r.c.State() // the levels the app renders: a period late
	for i := range 40 {
		lam := 150.0
		if i >= 20 {
			lam = 300
		}
		s := r.snap(lam, shown, 5e9)
		shown = r.c.State()
		r.now = r.now.Add(1e9)
		s.Time = r.now
		r.c.Step(r.now, s)
	}
	scale := r.scaleOf()
	assert.Less(t, scale, 1/3.0, "the priors' scale after 20 periods of overload (truth 0.1)")
}

// TestModelBrightensAtTheSecondPeriodOfASettledFall: a load settled at
// 300 req/s falls to 150. The tracker takes a settled level's fall from
// two periods, and the levels brighten with the second, not a third.
func TestModelBrightensAtTheSecondPeriodOfASettledFall(t *testing.T) {
	r := newModelRig(t)
	r.periods(20, 100)
	b := r.periods(300, 300).Brightness
	st := r.period(150)
	assert.LessOrEqual(t, st.Brightness, b, "the first period of the fall: %s", st.Reason)
	st = r.period(150)
	assert.Greater(t, st.Brightness, b+0.2, "the second period of the fall: %s", st.Reason)
}

// TestModelCountsAnIntervalSeenFourTimesOnce: brownoutd ticking every
// 250 ms over an instance that pushes every second sees each interval
// four times (Snapshot.RecentAt the same). One interval of a fall, seen
// four times, is one period of it: the levels do not brighten for it,
// and the next interval of the fall brightens them.
func TestModelCountsAnIntervalSeenFourTimesOnce(t *testing.T) {
	tick := 250 * time.Millisecond
	r := newModelRigWith(t, func(cfg *Config) { cfg.Tick = tick })
	push := func(lam float64) (hi float64) {
		s := r.pushSnap(lam, r.c.State())
		s.RecentAt = r.now // the push's arrival, the interval's end
		for range 4 {
			r.now = r.now.Add(tick)
			s.Time = r.now
			hi = max(hi, r.c.Step(r.now, s).Brightness)
		}
		return hi
	}
	for range 20 {
		push(100)
	}
	for range 30 {
		push(300)
	}
	b := r.c.State().Brightness
	assert.Less(t, b, 0.6, "dimmed for 300 req/s")
	assert.LessOrEqual(t, push(150), b, "one interval of a fall, seen four times, brightened the levels")
	assert.Greater(t, push(150), b+0.2, "the second interval of the fall")
}

// TestModelHoldsWhileTheLoadIsUnknown: a period without a load (no
// per-period counts, no arrival rate) while dimmed for 300 req/s holds
// the levels: it does not brighten them to the ceiling.
func TestModelHoldsWhileTheLoadIsUnknown(t *testing.T) {
	r := newModelRig(t)
	r.periods(20, 100)
	b := r.periods(60, 300).Brightness
	s := r.snap(300, r.c.State(), 5*time.Second)
	u := signals.Snapshot{Window: s.Window, Tallies: s.Tallies}
	for _, k := range []signals.Key{signals.Throughput, signals.RejectRatio, signals.GateBusy, signals.LatencyP99} {
		if v, ok := s.Get(k); ok {
			u.Set(k, v)
		}
	}
	r.now = r.now.Add(time.Second)
	u.Time = r.now
	st := r.c.Step(r.now, u)
	assert.LessOrEqual(t, st.Brightness, b+minMove, "%s", st.Reason)
}

// TestModelTeachesWithAPinnedFeature: recommendations pinned on (the app
// renders the pin) and every prior 10× too high (the truth: a scale of
// 0.1). A move changes reviews alone; the pinned feature's share, all on
// in the tallies, is not the ladder's. The moves compare the shares the
// tallies measured before and after, and teach a scale near the truth —
// compared with the ladder's share before, they taught it down to its
// floor, 0.01.
func TestModelTeachesWithAPinnedFeature(t *testing.T) {
	r := newModelRigWith(t, func(cfg *Config) {
		cfg.Features[0].Cost, cfg.Features[1].Cost = 15, 5
	})
	_, err := r.c.PinAt(r.now, "recommendations", 1, time.Hour, "test")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		lam := 150.0
		if i >= 20 {
			lam = 300
		}
		r.period(lam)
	}
	scale := r.scaleOf()
	assert.Greater(t, scale, 0.05, "the priors' scale (truth 0.1)")
	assert.Less(t, scale, 0.3, "the priors' scale (truth 0.1)")
}

// TestModelTeachesNothingFromAMoveNoTallyCanShow: an app that renders
// the levels a period late and tallies reviews but not recommendations,
// every prior 3× too low, a load that swings. A move of recommendations
// alone cannot show in the tallies (its share is taken at the ladder's,
// which moves at once), so it teaches nothing — where it taught the scale
// down to its floor, 0.01, with the periods the app rendered before the
// move.
func TestModelTeachesNothingFromAMoveNoTallyCanShow(t *testing.T) {
	r := newModelRigWith(t, func(cfg *Config) {
		cfg.Features[0].Cost, cfg.Features[1].Cost = 0.5, 0.5/3 // the truth: 1.5 and 0.5
	})
	shown := r.c.State()
	for i := range 60 {
		lam := 200.0
		if i/10%2 == 1 {
			lam = 400
		}
		s := r.snap(lam, shown, 5*time.Second)
		s.Tallies = s.Tallies[1:] // reviews alone
		shown = r.c.State()
		r.now = r.now.Add(time.Second)
		s.Time = r.now
		r.c.Step(r.now, s)
	}
	scale := r.scaleOf()
	assert.GreaterOrEqual(t, scale, 0.5, "the priors' scale (truth 3)")
}

// TestReconfigureForgetsAPendingMove: a move not yet shown when the
// features are reconfigured (a prior changed) teaches nothing: its shares
// were of the costs before.
func TestReconfigureForgetsAPendingMove(t *testing.T) {
	r := newModelRig(t)
	r.periods(20, 100)
	r.periods(3, 300) // dims: a move
	r.c.mu.Lock()
	r.c.mu.mdl.moveAt = r.now // pending, as at an app one period late
	cfg := r.c.cfg
	r.c.mu.Unlock()
	cfg.Features = append([]Feature(nil), cfg.Features...)
	cfg.Features[1].Cost = 2
	require.NoError(t, r.c.ReconfigureAt(r.now, cfg))
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	assert.True(t, r.c.mu.mdl.moveAt.IsZero(), "the pending move after a Reconfigure")
	assert.False(t, r.c.mu.mdl.lastOK, "the last period's share after a Reconfigure")
}

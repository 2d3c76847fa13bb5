package dimmer

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dhaka is Asia/Dhaka's offset (no daylight saving there), fixed so that
// the test needs no zone database.
var dhaka = time.FixedZone("+06", 6*60*60)

// saleEve is 23:59:30 on 11 November in Dhaka: 17:59:30 UTC.
var saleEve = time.Date(2026, 11, 11, 23, 59, 30, 0, dhaka)

// capConfig is testConfig (recommendations dim first, on brightness
// 0.5–1; reviews on 0–0.5) with recommendations capped at 20 % for two
// minutes from saleEve.
func capConfig() Config {
	cfg := testConfig()
	cfg.Schedule = []Cap{{Feature: "recommendations", Max: 0.2, From: saleEve, For: 2 * time.Minute, Reason: "11.11 midnight: pre-dim"}}
	return cfg
}

// newScheduleRig is a rig on cfg whose first step is at saleEve.
func newScheduleRig(t *testing.T, cfg Config) *rig {
	r := newRig(t, cfg)
	r.now = saleEve.Add(-time.Second)
	return r
}

func TestScheduleCapsOnlyInsideTheWindow(t *testing.T) {
	r := newRig(t, capConfig())
	from := saleEve.UTC() // Step's now may be in any zone
	assert.Equal(t, time.Date(2026, 11, 11, 17, 59, 30, 0, time.UTC), from)

	r.now = from.Add(-11 * time.Second)
	st := r.steps(10, 0.1, -1) // quiet, before the window
	assert.Equal(t, 1.0, level(t, st, "recommendations"), "before the window: no cap")
	assert.Equal(t, Auto, mode(t, st, "recommendations"))
	gen := st.Generation

	st = r.step(0.1, -1)
	require.Equal(t, from, r.now)
	assert.Equal(t, gen+1, st.Generation, "the window opening publishes a state; the signals did not change")
	assert.Equal(t, 0.2, level(t, st, "recommendations"), "inside the window: at most the cap")
	vip, _ := st.Level("recommendations", "vip")
	assert.Equal(t, 0.2, vip, "a cap applies to every segment")
	assert.Equal(t, 1.0, level(t, st, "reviews"), "other features are not capped")
	assert.Equal(t, Scheduled, mode(t, st, "recommendations"))
	assert.Equal(t, "scheduled", mode(t, st, "recommendations").String())
	assert.Equal(t, Auto, mode(t, st, "reviews"))
	f, _ := st.Feature("recommendations")
	require.NotNil(t, f.Cap)
	assert.Equal(t, "11.11 midnight: pre-dim", f.Cap.Reason)
	i, _ := st.FeatureIndex("recommendations")
	why, ok := st.CapReason(i)
	assert.True(t, ok)
	assert.Equal(t, "11.11 midnight: pre-dim", why)
	assert.Contains(t, st.Why(), "recommendations capped at 20% until Nov 12 00:01:30 +06 by schedule: 11.11 midnight: pre-dim")
	assert.InDelta(t, 0.6, st.Brightness, 1e-9, "anti-windup: the brightness sits at the cap, not above it")
	assert.False(t, st.Tampered())

	// Quiet all through the window: nothing changes, nothing is published,
	// and the integrator does not wind up.
	gen = st.Generation
	st = r.steps(119, 0.1, -1)
	assert.Equal(t, gen, st.Generation)
	assert.InDelta(t, 0.6, st.Brightness, 1e-9)
	assert.Contains(t, r.c.Status().Reason, "at the scheduled cap")

	// The window closes: a new state, and the levels the load allows —
	// here, under target at a load that fits every feature, all on at
	// once.
	var rec []float64
	for i := range 5 {
		st = r.step(0.1, -1)
		if i == 0 {
			require.Equal(t, from.Add(2*time.Minute), r.now)
			assert.Equal(t, gen+1, st.Generation, "the window closing publishes a state")
			assert.Contains(t, st.Reason, "scheduled cap ended (11.11 midnight: pre-dim)")
			assert.Equal(t, Auto, mode(t, st, "recommendations"))
		}
		rec = append(rec, level(t, st, "recommendations"))
	}
	assert.InDeltaSlice(t, []float64{1, 1, 1, 1, 1}, rec, 1e-9, "0.2 → 1 at the window's close")
}

func TestScheduleFeedbackDimsBelowTheCap(t *testing.T) {
	r := newScheduleRig(t, capConfig())
	st := r.step(0.1, -1)
	require.Equal(t, 0.2, level(t, st, "recommendations"))

	// Latency over CascadeAt: the law's first dim goes from the cap (no
	// dead band between the law's level and the cap), and further than
	// the cap.
	st = r.dim(1.6)
	assert.Less(t, level(t, st, "recommendations"), 0.2, "feedback dims below the cap in its first move")
	assert.Equal(t, Auto, mode(t, st, "recommendations"), "the law decides, not the cap")
	f, _ := st.Feature("recommendations")
	assert.Nil(t, f.Cap)
	assert.Contains(t, st.Reason, "scheduled cap of recommendations at 20% until Nov 12 00:01:30 +06 not binding")
	assert.Contains(t, st.Reason, "dimming recommendations")
	st = r.steps(3, 3, -1)
	assert.Equal(t, 0.0, level(t, st, "recommendations"))
	assert.Equal(t, 0.0, level(t, st, "reviews"), "far over target: the next feature dims too")

	// The overload ends (and its load with it): the law brightens back,
	// but not past the cap while the window lasts.
	r.load = 10
	st = r.steps(15, 0.1, -1)
	assert.Equal(t, 1.0, level(t, st, "reviews"))
	assert.Equal(t, 0.2, level(t, st, "recommendations"))
	assert.Equal(t, Scheduled, mode(t, st, "recommendations"))
	assert.InDelta(t, 0.6, st.Brightness, 1e-9)
}

// Without the anti-windup the first steps of an overload would only move
// the law's brightness through the stretch the cap hides.
func TestScheduleDimsAsFastAsWithoutIt(t *testing.T) {
	run := func(cfg Config) (level, brightness float64, n int) {
		r := newScheduleRig(t, cfg)
		r.step(0.78, -1) // in the band
		st, n := r.dimN(1.6)
		l, _ := st.Level("recommendations", "")
		return l, st.Brightness, n
	}
	free, freeB, freeN := run(testConfig())
	capped, cappedB, cappedN := run(capConfig())
	assert.LessOrEqual(t, cappedN, freeN, "as fast: the capped law's first dim comes no later than the free one's")
	assert.Less(t, free, 1.0)
	assert.Less(t, capped, 0.2)
	assert.Less(t, cappedB, freeB, "the cap starts the law lower")
}

func TestSchedulePinBeatsCap(t *testing.T) {
	r := newScheduleRig(t, capConfig())
	st := r.step(0.1, -1)
	require.Equal(t, Scheduled, mode(t, st, "recommendations"))

	st, err := r.c.PinAt(saleEve.Add(time.Second), "recommendations", 0.8, time.Minute, "marketing wants them on")
	require.NoError(t, err)
	assert.Equal(t, 0.8, level(t, st, "recommendations"), "a pin beats the schedule")
	assert.Equal(t, Override, mode(t, st, "recommendations"))
	f, _ := st.Feature("recommendations")
	assert.Nil(t, f.Cap)
	r.now = saleEve.Add(time.Second)
	st = r.step(0.1, -1)
	assert.Equal(t, 0.8, level(t, st, "recommendations"))
	assert.Equal(t, Override, mode(t, st, "recommendations"))
	assert.Less(t, st.Features[0].Computed, 0.8, "Computed is the law under the cap")

	st, err = r.c.UnpinAt(saleEve.Add(3*time.Second), "recommendations")
	require.NoError(t, err)
	assert.Equal(t, 0.2, level(t, st, "recommendations"), "unpinned: the schedule again")
	assert.Equal(t, Scheduled, mode(t, st, "recommendations"))
}

func TestScheduleEveryFeatureAndOverlaps(t *testing.T) {
	cfg := testConfig()
	cfg.Schedule = []Cap{
		{Max: 0.5, From: saleEve, For: time.Minute, Reason: "sale: everything at half"},
		{Feature: "reviews", Max: 0.3, From: saleEve.Add(10 * time.Second), For: time.Minute, Reason: "reviews DB migration"},
	}
	r := newScheduleRig(t, cfg)
	st := r.step(0.1, -1)
	assert.Equal(t, 0.5, level(t, st, "recommendations"))
	assert.Equal(t, 0.5, level(t, st, "reviews"), "an entry without a feature caps every feature")
	assert.Equal(t, Scheduled, mode(t, st, "reviews"))
	assert.InDelta(t, 0.75, st.Brightness, 1e-9, "the first feature's cap sets the ceiling")

	r.now = saleEve.Add(9 * time.Second)
	st = r.step(0.1, -1)
	assert.Equal(t, 0.3, level(t, st, "reviews"), "the lowest cap wins")
	f, _ := st.Feature("reviews")
	require.NotNil(t, f.Cap)
	assert.Equal(t, "reviews DB migration", f.Cap.Reason)
	assert.Contains(t, st.Reason, "reviews capped at 30%")
	assert.Contains(t, st.Reason, "recommendations capped at 50%")
}

func TestScheduleStartAndEndPublishEvenWhenNotBinding(t *testing.T) {
	cfg := testConfig()
	cfg.Schedule = []Cap{{Feature: "recommendations", Max: 0.9, From: saleEve.Add(10 * time.Second), For: 5 * time.Second, Reason: "rehearsal"}}
	r := newScheduleRig(t, cfg)
	var gens []uint64
	for i := range 20 {
		p99 := 0.78 // in the band: the law holds
		if i < 3 {
			p99 = 3 // dim hard first
		}
		st := r.step(p99, -1)
		gens = append(gens, st.Generation)
		if i == 10 {
			assert.Contains(t, st.Reason, "scheduled cap of recommendations at 90% until Nov 11 23:59:45 +06 not binding (rehearsal)")
			assert.Equal(t, Auto, mode(t, st, "recommendations"))
		}
		if i == 15 {
			assert.Contains(t, st.Reason, "scheduled cap ended (rehearsal)")
		}
	}
	assert.Equal(t, gens[4], gens[9], "holding in the band: nothing published")
	assert.Equal(t, gens[9]+1, gens[10], "the window opened")
	assert.Equal(t, gens[10], gens[14])
	assert.Equal(t, gens[14]+1, gens[15], "the window closed")
	assert.Equal(t, gens[15], gens[19])
}

func TestScheduleWhileStaleOrFrozen(t *testing.T) {
	cfg := capConfig()
	cfg.Schedule[0].From = saleEve.Add(10 * time.Second)
	cfg.Schedule[0].For = 10 * time.Second
	r := newScheduleRig(t, cfg)
	r.step(0.1, -1)
	for i := 1; i < 25; i++ { // no signal from here on
		st := r.silent()
		switch {
		case i == 9:
			require.Equal(t, Stale, st.Mode)
			assert.Equal(t, 1.0, level(t, st, "recommendations"))
		case i == 10:
			assert.Equal(t, 0.2, level(t, st, "recommendations"), "stale: the cap still applies (it only lowers)")
			assert.Equal(t, Scheduled, mode(t, st, "recommendations"))
			assert.Equal(t, Stale, st.StateMode())
		case i == 20:
			assert.Equal(t, 0.2, level(t, st, "recommendations"), "stale: the window's end does not brighten blind")
			assert.Equal(t, Stale, mode(t, st, "recommendations"))
		}
	}

	r = newRig(t, cfg)
	st := r.c.FreezeAt(saleEve, "hands off")
	gen := st.Generation
	r.now = saleEve.Add(9 * time.Second)
	st = r.step(0.1, -1)
	assert.Equal(t, gen+1, st.Generation, "the window opening is published")
	assert.Equal(t, 1.0, level(t, st, "recommendations"), "a freeze holds levels as published")
	assert.Equal(t, Frozen, mode(t, st, "recommendations"))
	st = r.c.UnfreezeAt(saleEve.Add(11 * time.Second))
	assert.Equal(t, 0.2, level(t, st, "recommendations"), "unfrozen inside the window: capped")
}

func TestScheduleConfigErrors(t *testing.T) {
	ok := Cap{Feature: "reviews", Max: 0.5, From: saleEve, For: time.Minute, Reason: "fine"}
	cases := map[string]Cap{
		`schedule[1]: unknown feature "nope"`:                              {Feature: "nope", Max: 0.5, From: saleEve, For: time.Minute, Reason: "x"},
		"schedule[1] (reviews): max 1.5: want 0 ≤ max ≤ 1":                 {Feature: "reviews", Max: 1.5, From: saleEve, For: time.Minute, Reason: "x"},
		"schedule[1] (every feature): max -0.1":                            {Max: -0.1, From: saleEve, For: time.Minute, Reason: "x"},
		"schedule[1] (reviews): max NaN":                                   {Feature: "reviews", Max: math.NaN(), From: saleEve, For: time.Minute, Reason: "x"},
		"schedule[1] (reviews): for 0s: want a positive duration":          {Feature: "reviews", Max: 0.5, From: saleEve, Reason: "x"},
		"schedule[1] (reviews): for -1m0s: want a positive duration":       {Feature: "reviews", Max: 0.5, From: saleEve, For: -time.Minute, Reason: "x"},
		"schedule[1] (reviews): no start":                                  {Feature: "reviews", Max: 0.5, For: time.Minute, Reason: "x"},
		"schedule[1] (recommendations): a reason is required":              {Feature: "recommendations", Max: 0.5, From: saleEve, For: time.Minute, Reason: "  "},
		"schedule[1] (reviews): the reason is 501 bytes long: at most 500": {Feature: "reviews", Max: 0.5, From: saleEve, For: time.Minute, Reason: strings.Repeat("x", MaxReason+1)},
	}
	for want, bad := range cases {
		cfg := testConfig()
		cfg.Schedule = []Cap{ok, bad}
		_, err := New(cfg)
		assert.ErrorContains(t, err, "dimmer: "+want)
	}
	cfg := testConfig()
	cfg.Schedule = []Cap{ok}
	_, err := New(cfg)
	assert.NoError(t, err)
	cfg.Schedule = slices.Repeat([]Cap{ok}, MaxSchedule+1)
	_, err = New(cfg)
	assert.ErrorContains(t, err, "dimmer: 1001 scheduled caps: at most 1000")
}

func TestCapWindow(t *testing.T) {
	p := Cap{From: saleEve, For: time.Minute}
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{saleEve.Add(-time.Nanosecond), false},
		{saleEve, true},
		{saleEve.UTC(), true},
		{saleEve.Add(time.Minute - time.Nanosecond), true},
		{saleEve.Add(time.Minute), false},
	} {
		assert.Equal(t, tc.want, p.ActiveAt(tc.at), "at %s", tc.at)
	}
	assert.Equal(t, saleEve.Add(time.Minute), p.Until())
}

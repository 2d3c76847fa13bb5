package dimmer

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrip is cp through JSON, as a store keeps it.
func roundTrip(t *testing.T, cp Checkpoint) Checkpoint {
	t.Helper()
	b, err := json.Marshal(cp)
	require.NoError(t, err)
	var out Checkpoint
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestAdoptServesTheLeadersState: a controller that adopts another's
// checkpoint publishes the same generation and levels, says the same in
// its status, and knows the same costs and pins.
func TestAdoptServesTheLeadersState(t *testing.T) {
	leader := newRig(t, testConfig())
	leader.steps(10, 3, -1) // an overload: dimmed
	_, err := leader.c.PinAt(leader.now, "reviews", 0.4, time.Hour, "incident 7")
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"reviews", "recommendations"}
	for range 5 {
		leader.now = leader.now.Add(time.Second)
		s := snap(leader.now, 3, 100)
		s.Tallies = tickTallies(rng, 200, 0.01, names, []float64{0.004, 0.003}, []float64{0.5, 0.5})
		leader.c.Step(leader.now, s)
	}
	want := leader.c.State()
	require.Less(t, level(t, want, "recommendations"), 1.0, "the leader dimmed")

	f := newRig(t, testConfig())
	got, err := f.c.AdoptAt(leader.now, roundTrip(t, leader.c.Checkpoint()))
	require.NoError(t, err)
	assert.Equal(t, want.Generation, got.Generation, "generation")
	assert.Equal(t, want.Mode, got.Mode, "mode")
	assert.Equal(t, want.Reason, got.Reason, "reason")
	assert.Equal(t, want.Shed, got.Shed, "shed")
	for i := range want.NumFeatures() {
		for j := -1; j < want.NumSegments(); j++ {
			assert.Equal(t, want.LevelAt(i, j), got.LevelAt(i, j), "%s segment %d: got … want", want.FeatureName(i), j)
		}
		assert.Equal(t, want.FeatureMode(i), got.FeatureMode(i), "%s mode", want.FeatureName(i))
		wr, wp := want.PinReason(i)
		gr, gp := got.PinReason(i)
		assert.Equal(t, [2]any{wr, wp}, [2]any{gr, gp}, "%s pin", want.FeatureName(i))
	}
	ws, gs := leader.c.Status(), f.c.Status()
	assert.Equal(t, ws.Reason, gs.Reason, "status reason")
	assert.Equal(t, ws.Action, gs.Action, "status action")
	assert.Equal(t, ws.Pressure, gs.Pressure, "status pressure")
	assert.Equal(t, leader.c.Costs(), f.c.Costs(), "learned costs")
	assert.False(t, got.Tampered())
}

// TestAdoptContinuesWithoutAJump: the controller that took over keeps
// dimming from the adopted levels in the same overload — no step to full
// brightness, generations only forward.
func TestAdoptContinuesWithoutAJump(t *testing.T) {
	leader := newRig(t, testConfig())
	leader.steps(15, 3, -1)
	before := leader.c.State()
	require.Less(t, level(t, before, "recommendations"), 1.0)

	f := newRig(t, testConfig())
	f.now = leader.now
	_, err := f.c.AdoptAt(f.now, roundTrip(t, leader.c.Checkpoint()))
	require.NoError(t, err)
	for range 5 {
		st := f.step(3, -1)
		assert.GreaterOrEqual(t, st.Generation, before.Generation, "generation never goes back")
		for _, name := range []string{"recommendations", "reviews"} {
			assert.LessOrEqual(t, level(t, st, name), level(t, before, name)+1e-9, "%s: still overloaded, never brighter than adopted", name)
		}
	}
	// And calm again, it brightens by steps, not at once.
	st := f.step(0.1, -1)
	assert.Less(t, level(t, st, "reviews"), 1.0, "one calm period does not restore full brightness")
}

// TestAdoptAcrossConfigurations: a checkpoint of another configuration
// (a replica with another file) is adopted by feature name; what it lacks
// follows the adopted brightness.
func TestAdoptAcrossConfigurations(t *testing.T) {
	leader := newRig(t, testConfig())
	leader.steps(10, 3, -1)
	_, err := leader.c.PinAt(leader.now, "reviews", 0.25, time.Hour, "incident")
	require.NoError(t, err)

	cfg := testConfig()
	cfg.Features = append(cfg.Features[1:], Feature{Name: "gallery", Rank: 2, Cost: 1}) // no reviews; gallery
	cfg.Segments = []Segment{{Name: "staff", Offset: 0.5}, {Name: "vip", Offset: 0.3}}
	f := newRig(t, cfg)
	st, err := f.c.AdoptAt(leader.now, roundTrip(t, leader.c.Checkpoint()))
	require.NoError(t, err)
	require.Equal(t, 2, st.NumFeatures())
	want := leader.c.State()
	got, _ := st.Level("recommendations", "vip")
	exp, _ := want.Level("recommendations", "vip")
	assert.Equal(t, exp, got, "a shared feature and segment keep the leader's level")
	_, ok := st.Feature("reviews")
	assert.False(t, ok, "a feature this configuration lacks is dropped, with its pin")
	_, ok = st.Feature("gallery")
	assert.True(t, ok)
	f.step(3, -1) // and it steps on its own layout
}

// TestAdoptRefusesAnotherVersion: a checkpoint of another version, or
// none, is refused and changes nothing.
func TestAdoptRefusesAnotherVersion(t *testing.T) {
	r := newRig(t, testConfig())
	before := r.c.State()
	for _, cp := range []Checkpoint{{}, {V: CheckpointVersion + 1}, {V: CheckpointVersion, Published: CheckpointState{Mode: "bright"}}} {
		_, err := r.c.AdoptAt(t0, cp)
		assert.ErrorIs(t, err, ErrCheckpoint, "v %d", cp.V)
	}
	assert.Same(t, before, r.c.State())
}

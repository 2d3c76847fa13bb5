package sim

import (
	"strconv"
	"testing"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partsLabConfig is a light constant load with fixed service times: every
// request is served in time, so the optional share is the levels'.
func partsLabConfig(parts []Part, d Dimmer, optional float64) Config {
	return Config{
		Seed: 7, Duration: 20 * time.Second, Load: Constant(40), Dimmer: d, Parts: parts,
		Mix: []ClassMix{{Class: signals.Critical, Share: 0.3, Optional: optional}, {Class: signals.Default, Share: 0.7, Optional: optional}},
	}
}

var twoParts = []Part{{Name: "recommendations", Cost: 0.5}, {Name: "reviews", Cost: 0.25}}

// TestPartsAllOffIsMandatoryOnly: parts all off do no extra work, so the
// run is the run without optional work, draw for draw.
func TestPartsAllOffIsMandatoryOnly(t *testing.T) {
	with := Run(partsLabConfig(twoParts, Fixed{0, 0}, 0))
	without := Run(partsLabConfig(nil, Static(0), 0))
	assert.Equal(t, without.Summary, with.Summary)
	assert.Equal(t, []float64{0, 0}, with.Seconds[3].Levels)
}

// TestPartsAllOnIsOneBlock: parts all on are the single optional block of
// their summed cost (with mandatory cost 1), draw for draw.
func TestPartsAllOnIsOneBlock(t *testing.T) {
	with := Run(partsLabConfig(twoParts, Static(1), 0))
	without := Run(partsLabConfig(nil, Static(1), 0.75))
	want := without.Summary
	want.OptionalShare = 1
	assert.Equal(t, want, with.Summary)
	assert.Equal(t, []float64{1, 1}, with.Seconds[3].Levels)
}

// TestPartsFractionalLevels: each part reaches its level's share of users,
// and the optional share is the true-cost-weighted mean of the levels.
func TestPartsFractionalLevels(t *testing.T) {
	r := Run(partsLabConfig(twoParts, Fixed{0.2, 0.8}, 0))
	require.InDelta(t, 1.0, r.Summary.InTime, 1e-9)
	want := (0.5*0.2 + 0.25*0.8) / 0.75
	assert.InDelta(t, want, r.Summary.OptionalShare, 0.03)
	assert.InDelta(t, want, r.Seconds[5].Level, 1e-12, "Level is the true-cost-weighted mean")
	// Users with either part: 1 − 0.8·0.2 if the two are independent.
	assert.InDelta(t, 1-0.8*0.2, r.Summary.OptionalServed, 0.03)
}

// TestDecidePartsIsTheProvidersBucketing: a user gets a part exactly when
// the provider would serve them the flag of that name at that level.
func TestDecidePartsIsTheProvidersBucketing(t *testing.T) {
	e := newEngine(Config{Load: Constant(1), Parts: twoParts, Dimmer: Fixed{0.3, 0.6}})
	for key := uint32(0); key < 5000; key += 7 {
		on := e.decideParts(key * 858993)
		user := strconv.FormatUint(uint64(key*858993), 10)
		assert.Equal(t, provider.On("recommendations", user, 0.3), on&1 != 0, key)
		assert.Equal(t, provider.On("reviews", user, 0.6), on&2 != 0, key)
	}
}

// namedDim returns levels by feature name, in another order than the
// parts, and one name the config does not have.
type namedDim struct{}

func (namedDim) Step(time.Time, signals.Snapshot) Dim {
	return Dim{Level: 0.5, Names: []string{"other", "reviews"}, Levels: []float64{0.1, 1.5}}
}

func TestResolveLevelsByName(t *testing.T) {
	e := newEngine(Config{Load: Constant(1), Parts: twoParts, Dimmer: namedDim{}})
	// recommendations has no level: Level's 0.5; reviews' is clamped to 1.
	assert.Equal(t, []float64{0.5, 1}, e.partLevel)
	assert.InDelta(t, (0.5*0.5+0.25)/0.75, e.dim.Level, 1e-12)
}

func TestLadder(t *testing.T) {
	for _, tc := range []struct {
		share float64
		want  []float64
	}{
		{0, []float64{0, 0}},
		{1, []float64{1, 1}},
		{1.0 / 3, []float64{0, 1}},   // reviews (a third of the cost) come on first
		{1.0 / 6, []float64{0, 0.5}}, // half of reviews
		{2.0 / 3, []float64{0.5, 1}}, // then recommendations
		{-1, []float64{0, 0}},
		{2, []float64{1, 1}},
	} {
		got := Ladder(twoParts, tc.share)
		assert.InDeltaSlice(t, tc.want, got, 1e-12, "share %v", tc.share)
		assert.InDelta(t, min(max(tc.share, 0), 1), WeightedLevel(twoParts, got), 1e-12)
	}
}

// tallyRecorder keeps a copy of every snapshot's tallies.
type tallyRecorder struct {
	levels Fixed
	got    [][]signals.Tally
}

func (r *tallyRecorder) Step(now time.Time, s signals.Snapshot) Dim {
	r.got = append(r.got, append([]signals.Tally(nil), s.Tallies...))
	return r.levels.Step(now, s)
}

// TestPartsTallies: each tick the Dimmer gets one tally per part of the
// requests completed in that tick, split by whether they got the part, and
// with fixed service times the on/off means differ by the part's cost.
func TestPartsTallies(t *testing.T) {
	rec := &tallyRecorder{levels: Fixed{0.5, 0.5}}
	cfg := partsLabConfig(twoParts, rec, 0)
	cfg.Server.Fixed = true
	r := Run(cfg)
	require.Len(t, rec.got, 20) // the first Step, then a tick a second
	assert.Empty(t, rec.got[0], "the first Step, before any tick, has none")
	var done int64
	var recs, revs signals.Tally
	for _, ts := range rec.got[1:] {
		require.Len(t, ts, 2)
		assert.Equal(t, "recommendations", ts[0].Feature)
		assert.Equal(t, "reviews", ts[1].Feature)
		assert.Equal(t, ts[0].On.N+ts[0].Off.N, ts[1].On.N+ts[1].Off.N, "every completion counts once per part")
		done += ts[0].On.N + ts[0].Off.N
		recs.Merge(ts[0])
		revs.Merge(ts[1])
	}
	// Ticks at 1 … 19 s: the completions before the last tick.
	served := 0
	for _, s := range r.Seconds[:19] {
		served += s.Served
	}
	assert.Equal(t, int64(served), done)
	// Mandatory work 10 ms; the other part on or off half the time each.
	ms := 0.010
	assert.InDelta(t, ms*0.5, recs.On.Mean()-recs.Off.Mean(), 1e-9+ms*0.25*0.1, "recommendations cost half the mandatory work")
	assert.InDelta(t, ms*0.25, revs.On.Mean()-revs.Off.Mean(), 1e-9+ms*0.5*0.1, "reviews a quarter")
}

// TestNoPartsOneTally: without Parts the snapshot has one tally, under no
// feature's name, of every request served "off" — the service times a
// Recorder tallies although no feature marked the requests.
func TestNoPartsOneTally(t *testing.T) {
	rec := &tallyRecorder{}
	Run(partsLabConfig(nil, rec, 0.5))
	served := int64(0)
	for _, ts := range rec.got[1:] {
		require.Len(t, ts, 1)
		assert.Empty(t, ts[0].Feature)
		assert.Zero(t, ts[0].On.N)
		served += ts[0].Off.N
	}
	assert.Positive(t, served)
}

// TestControllerPassesLevelsByName: with Parts, the dimmer's feature levels
// reach the parts of the same name, whatever the order, and Level is their
// mean weighted by the TRUE costs, not the configured ones.
func TestControllerPassesLevelsByName(t *testing.T) {
	c, err := dimmer.New(BrownoutConfig(BrownoutTarget))
	require.NoError(t, err)
	_, err = c.PinAt(epoch, "recommendations", 0.9, time.Hour, "test")
	require.NoError(t, err)
	_, err = c.PinAt(epoch, "reviews", 0.3, time.Hour, "test")
	require.NoError(t, err)
	parts := []Part{{Name: "reviews", Cost: 1}, {Name: "recommendations", Cost: 0.2}}
	cfg := partsLabConfig(parts, Controller{C: c}, 0)
	r := Run(cfg)
	s := r.Seconds[5]
	assert.Equal(t, []float64{0.3, 0.9}, s.Levels)
	assert.InDelta(t, (0.3*1+0.9*0.2)/1.2, s.Level, 1e-12)
	assert.InDelta(t, (0.3*1+0.9*0.2)/1.2, r.Summary.OptionalShare, 0.03)
}

package sim

import (
	"testing"
	"time"

	"github.com/brownout/brownout/signals"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMandatoryCapacity(t *testing.T) {
	assert.InDelta(t, 100.0, MandatoryCapacity(Config{}), 1e-9, "1 worker, 10 ms, cost 1")
	cfg := Config{Server: Server{Workers: 4, ServiceMean: 20 * time.Millisecond}, Mix: BrownoutMix()}
	assert.InDelta(t, 4/(0.6*0.02), MandatoryCapacity(cfg), 1e-9)
}

// TestReferenceHoldsTheSetPoint: below capacity the levels put the
// predicted utilisation at Rho; above it with every part off, the shed
// level refuses the excess of default users (the mix has no sheddable).
func TestReferenceHoldsTheSetPoint(t *testing.T) {
	parts := []Part{{Name: "recommendations", Cost: 1}, {Name: "reviews", Cost: 0.5}} // Σc = 1.5
	for _, tc := range []struct {
		load, share, shed float64
	}{
		{30, 1, 0},                          // u = 0.3·2.5 < 0.9: all on
		{40, (0.9*100/40 - 1) / 1.5, 0},     // dims: reviews on, recommendations partly
		{60, (0.9*100/60 - 1) / 1.5, 0},     // dims: reviews partly
		{90, 0, 0},                          // 1 + Σℓc = 1: exactly all off
		{120, 0, 1 + (1-0.9*100/120.0)/0.7}, // sheds default users
		{1000, 0, 2},                        // every default user
		{0, 1, 0},                           // no load
	} {
		ref := NewReference(Config{Load: Constant(tc.load), Parts: parts}, 0.9)
		d := ref.Step(epoch, signals.Snapshot{})
		lv := WeightedLevel(parts, d.Levels)
		assert.InDelta(t, tc.share, lv, 1e-9, "load %v", tc.load)
		assert.InDelta(t, tc.shed, d.Shed, 1e-9, "load %v", tc.load)
		if tc.load > 0 && tc.shed == 0 && tc.share < 1 {
			assert.InDelta(t, 0.9, tc.load*(1+lv*1.5)/100, 1e-9, "u at the set point")
		}
	}
}

// TestReferenceShedsSheddableFirst: shed levels 0–1 take sheddable work.
func TestReferenceShedsSheddableFirst(t *testing.T) {
	mix := []ClassMix{{Class: signals.Critical, Share: 0.2}, {Class: signals.Default, Share: 0.4}, {Class: signals.Sheddable, Share: 0.4}}
	ref := NewReference(Config{Load: Constant(125), Mix: mix, Parts: BrownoutParts()}, 1)
	assert.InDelta(t, 0.2/0.4, ref.Step(epoch, signals.Snapshot{}).Shed, 1e-9) // refuse 20 % of work
	ref = NewReference(Config{Load: Constant(200), Mix: mix, Parts: BrownoutParts()}, 1)
	assert.InDelta(t, 1+0.1/0.4, ref.Step(epoch, signals.Snapshot{}).Shed, 1e-9) // 50 %: all sheddable, a quarter of default
}

// TestReferenceFollowsTheLoad: on a sine the reference's levels move
// against the load, predicted over the coming tick.
func TestReferenceFollowsTheLoad(t *testing.T) {
	cfg := BrownoutPartsLab(Sine{Mean: 50, Amplitude: 0.5, Period: 30 * time.Second}, nil, 1)
	cfg.Duration = 30 * time.Second
	cfg.Dimmer = NewReference(cfg, 0.7)
	r := Run(cfg)
	require.NotNil(t, r.Seconds[7].Levels)
	assert.Less(t, r.Seconds[7].Level, r.Seconds[22].Level, "dimmer at the crest than in the trough")
	assert.GreaterOrEqual(t, r.Summary.InTime, 0.98)
}

// TestReferenceLag: told the load a tick late, the reference sets the
// levels at a square's edge for the half before it — bright into a
// crest, dim into a trough; told it a tick ahead, for the half after.
func TestReferenceLag(t *testing.T) {
	cfg := BrownoutPartsLab(Square{Mean: 50, Amplitude: 0.6, Period: 10 * time.Second}, nil, 1)
	ahead := NewReference(cfg, 0.8)
	late := NewReference(cfg, 0.8)
	late.Lag = time.Second
	crest, trough := epoch, epoch.Add(5*time.Second) // the crest is the first half
	assert.Less(t, ahead.Step(crest.Add(10*time.Second), signals.Snapshot{}).Level, late.Step(crest.Add(10*time.Second), signals.Snapshot{}).Level, "into a crest")
	assert.Greater(t, ahead.Step(trough, signals.Snapshot{}).Level, late.Step(trough, signals.Snapshot{}).Level, "into a trough")
	assert.Equal(t, ahead.Step(trough.Add(time.Second), signals.Snapshot{}).Level, late.Step(trough.Add(time.Second), signals.Snapshot{}).Level, "a tick after the edge")
}

// TestReferenceCounted: told the load as it is counted, the reference
// sets the levels for the snapshot's last interval — its arrivals over its
// span, whatever the profile says — and for the run's first tick until
// an interval is counted; run on a load, it follows it.
func TestReferenceCounted(t *testing.T) {
	cfg := BrownoutPartsLab(Sine{Mean: 50, Amplitude: 0.5, Period: 30 * time.Second}, nil, 1)
	counted := NewReference(cfg, 0.8)
	counted.Counted = true
	told := func(load float64) *Reference {
		c := cfg
		c.Load = Constant(load)
		return NewReference(c, 0.8)
	}
	at := epoch.Add(7 * time.Second)
	var snap signals.Snapshot
	snap.Recent.Arrived, snap.RecentSpan = 150, 2*time.Second
	assert.InDeltaSlice(t, told(75).Step(at, signals.Snapshot{}).Levels, counted.Step(at, snap).Levels, 1e-9, "75 a second counted")
	snap.Recent.Arrived = 40
	assert.InDeltaSlice(t, told(20).Step(at, signals.Snapshot{}).Levels, counted.Step(at, snap).Levels, 1e-9, "20 a second counted")
	assert.InDeltaSlice(t, told(meanRate(cfg.Load, 0, time.Second)).Step(at, signals.Snapshot{}).Levels, counted.Step(at, signals.Snapshot{}).Levels, 1e-9, "nothing counted yet")

	build := func() Config { // (a fresh gate each run)
		c := BrownoutPartsLab(Sine{Mean: 50, Amplitude: 0.5, Period: 30 * time.Second}, nil, 1)
		c.Duration = 60 * time.Second
		return c
	}
	b, _ := SweepRhoCounted(build, []float64{0.7, 0.8})
	c := build()
	r := NewReference(c, b.Setting)
	r.Counted = true
	c.Dimmer = r
	res := Run(c)
	assert.Less(t, res.Seconds[7].Level, res.Seconds[22].Level, "dimmer at the crest than in the trough")
}

func TestSweepRho(t *testing.T) {
	build := func() Config {
		cfg := BrownoutPartsLab(Sine{Mean: 50, Amplitude: 0.5, Period: 30 * time.Second}, nil, 1)
		cfg.Duration = 30 * time.Second
		return cfg
	}
	b, all := SweepRho(build, []float64{0.5, 0.8, 1.2})
	require.Len(t, all, 3)
	assert.Less(t, all[0].OptionalShare, all[1].OptionalShare, "a higher set point serves more")
	assert.Less(t, all[2].InTime, all[1].InTime-inTimeSlack, "over capacity users wait too long")
	assert.Equal(t, 0.8, b.Setting)
}

func TestBest(t *testing.T) {
	b := best([]Outcome{{1, 0.99, 0.2}, {2, 0.988, 0.5}, {3, 0.97, 0.9}, {4, 0.992, 0.1}})
	assert.Equal(t, 2.0, b.Setting, "most content within half a point of 99.2 %")
}

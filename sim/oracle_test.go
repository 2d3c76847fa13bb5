package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coarseGrid returns n loads from lo to hi and optional shares in tenths.
func coarseGrid(lo, hi float64, n int) OracleGrid {
	g := OracleGrid{Duration: 20 * time.Second}
	for i := range n {
		g.Loads = append(g.Loads, lo+(hi-lo)*float64(i)/float64(n-1))
	}
	for i := range 11 {
		g.Shares = append(g.Shares, float64(i)/10)
	}
	return g
}

// TestOracleTracksTheLoad: on a square wave the oracle serves everything
// in the trough and less at the crest, and each second is judged at the
// grid load just above its rate.
func TestOracleTracksTheLoad(t *testing.T) {
	build := func(load Profile, d Dimmer) Config { return BrownoutPartsLab(load, d, 1) }
	shape := Square{Mean: 60, Amplitude: 0.5, Period: 20 * time.Second}
	o := NewOracle(build, shape, 20*time.Second, coarseGrid(20, 100, 5))
	require.Len(t, o.Seconds, 20)
	crest, trough := o.Seconds[3], o.Seconds[13]
	assert.Equal(t, 100.0, crest.Load, "90/s is judged at 100/s")
	assert.Equal(t, 40.0, trough.Load, "30/s at 40/s")
	assert.Len(t, o.ByLoad, 2, "only the loads the shape needs are run")
	// With one worker and the gate's 250 ms waits, users start missing
	// their time from u ≈ 0.7: at 40/s that is a share of 0.4 (u = 40·(1 +
	// 1.5·0.4)/100 = 0.64); at 100/s even all off is u = 1: nothing.
	assert.Greater(t, trough.Best.OptionalShare, 0.3)
	assert.Less(t, crest.Best.OptionalShare, 0.1)
	assert.Greater(t, trough.Best.InTime, 0.98)
	mean := o.OptionalShare(0, 20)
	assert.InDelta(t, (90*crest.Best.OptionalShare+30*trough.Best.OptionalShare)/120, mean, 1e-9)
}

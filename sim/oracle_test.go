package sim

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// coarseGrid returns n loads from lo to hi and optional shares in steps
// of 1/shares.
func coarseGrid(lo, hi float64, n, shares int) OracleGrid {
	g := OracleGrid{Duration: 20 * time.Second}
	for i := range n {
		g.Loads = append(g.Loads, lo+(hi-lo)*float64(i)/float64(n-1))
	}
	for i := range shares + 1 {
		g.Shares = append(g.Shares, float64(i)/float64(shares))
	}
	return g
}

// TestOracleTracksTheLoad: on a square wave the oracle serves more in the
// trough than at the crest, each second judged between the grid loads
// around its rate.
func TestOracleTracksTheLoad(t *testing.T) {
	build := func(load Profile, d Dimmer) Config { return BrownoutPartsLab(load, d, 1) }
	shape := Square{Mean: 60, Amplitude: 0.5, Period: 20 * time.Second}
	o := NewOracle(build, shape, 20*time.Second, coarseGrid(20, 100, 5, 10))
	require.Len(t, o.Seconds, 20)
	crest, trough := o.Seconds[3], o.Seconds[13]
	assert.Equal(t, [2]float64{80, 100}, [2]float64{crest.Below, crest.Above}, "90/s")
	assert.Equal(t, [2]float64{20, 40}, [2]float64{trough.Below, trough.Above}, "30/s")
	assert.Len(t, o.ByLoad, 4, "only the loads the shape needs are run")
	mid := func(a, b Outcome) float64 { return (a.OptionalShare + b.OptionalShare) / 2 }
	assert.InDelta(t, mid(o.ByLoad[80], o.ByLoad[100]), crest.Best.OptionalShare, 1e-9, "interpolated half way")
	// With one worker and the gate's 250 ms waits, users start missing
	// their time from u ≈ 0.7: at 30/s that is a share above 0.4 (u = 30·(1
	// + 2·0.4)/100 = 0.54); at 90/s all off is u = 0.9 already: nothing.
	assert.Greater(t, trough.Best.OptionalShare, 0.3)
	assert.Less(t, crest.Best.OptionalShare, 0.1)
	assert.Greater(t, trough.Best.InTime, 0.98)
	mean := o.OptionalShare(0, 20)
	assert.InDelta(t, (90*crest.Best.OptionalShare+30*trough.Best.OptionalShare)/120, mean, 1e-9)
}

// TestOracleTableSharesTheGridLoads: oracles of two shapes that share a
// table measure each grid load once, and read what an oracle of their
// own would have measured; two built at once on a new table agree too.
func TestOracleTableSharesTheGridLoads(t *testing.T) {
	var runs atomic.Int64
	build := func(load Profile, d Dimmer) Config {
		runs.Add(1)
		return BrownoutPartsLab(load, d, 1)
	}
	grid := coarseGrid(20, 100, 5, 4)
	grid.Duration = 10 * time.Second
	sq := Square{Mean: 60, Amplitude: 0.5, Period: 20 * time.Second}
	sine := Sine{Mean: 50, Amplitude: 0.5, Period: 20 * time.Second}
	own := NewOracle(build, sine, 20*time.Second, grid)
	ownRuns := runs.Load()

	grid.Table = &OracleTable{}
	NewOracle(build, sq, 20*time.Second, grid) // 30 and 90/s: loads 20, 40, 80, 100
	runs.Store(0)
	shared := NewOracle(build, sine, 20*time.Second, grid) // 25 … 75/s: loads 20, 40, 60, 80
	assert.Equal(t, own.Seconds, shared.Seconds, "the same oracle")
	assert.Equal(t, own.ByLoad, shared.ByLoad)
	assert.Equal(t, ownRuns/4, runs.Load(), "of its four loads only 60/s, which the square did not need, is run")

	grid.Table = &OracleTable{}
	var a, b Oracle
	var wg sync.WaitGroup
	wg.Go(func() { a = NewOracle(build, sine, 20*time.Second, grid) })
	wg.Go(func() { b = NewOracle(build, sine, 20*time.Second, grid) })
	wg.Wait()
	assert.Equal(t, own.Seconds, a.Seconds)
	assert.Equal(t, own.Seconds, b.Seconds)

	// A grid of other runs does not read the table's outcomes.
	other := grid
	other.Duration = 20 * time.Second
	assert.Panics(t, func() { NewOracle(build, sine, 20*time.Second, other) })
}

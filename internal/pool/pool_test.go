package pool

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

func TestPoolBoundsConcurrencyAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(2)
		start := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { assert.NoError(t, p.Do(context.Background(), 10*time.Millisecond)) })
		}
		synctest.Wait()
		assert.Equal(t, int64(2), p.Busy())
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, p.Do(ctx, time.Millisecond), ErrGone, "no worker within the caller's deadline")
		wg.Wait()
		assert.Equal(t, 20*time.Millisecond, time.Since(start), "4 jobs of 10 ms on 2 workers")
		assert.Equal(t, 40*time.Millisecond, p.Worked(), "the work held, all workers")
		assert.Equal(t, int64(0), p.Busy())
	})
}

func TestContentionScalesWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(4)
		p.SetContention(0.5, 0)
		var wg sync.WaitGroup
		start := time.Now()
		for range 2 {
			wg.Go(func() { p.Do(context.Background(), 10*time.Millisecond) })
		}
		wg.Wait()
		// The first starts alone (×1), the second with two in service (×1.5).
		assert.Equal(t, 15*time.Millisecond, time.Since(start))
	})
}

func TestSlowdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(1)
		assert.Equal(t, 1.0, p.Slowdown())
		p.SetSlowdown(2)
		start := time.Now()
		p.Do(context.Background(), 10*time.Millisecond)
		assert.Equal(t, 20*time.Millisecond, time.Since(start))
		p.SetSlowdown(-3) // nonsense: back to 1
		assert.Equal(t, 1.0, p.Slowdown())
	})
}

// TestDoReportsTheTimeHeld: a request whose context carries a tally gets
// the time it held a worker counted in the tally, not its wall time — the
// wait for the worker left out — unless the pool counts wall time
// (SetWallTime).
func TestDoReportsTheTimeHeld(t *testing.T) {
	for _, wall := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			rec := signals.NewRecorder(signals.Config{})
			require.NoError(t, rec.Features("recs"))
			p := New(1)
			p.SetWallTime(wall)
			go p.Do(context.Background(), 30*time.Millisecond) // holds the only worker first
			synctest.Wait()
			var tl signals.RequestTally
			require.True(t, rec.BeginTally(&tl, context.Background()))
			signals.Evaluated(&tl, "recs", true)
			start := time.Now()
			require.NoError(t, p.Do(&tl, 10*time.Millisecond))
			rec.EndTally(&tl, time.Since(start)) // 40 ms: 30 waiting, 10 held
			want := 0.010
			if wall {
				want = 0.040
			}
			assert.InDelta(t, want, rec.Tallies()[0].On.Sum, 1e-9, "wall time %v", wall)
		})
	}
}

// TestDoThatGivesUpHeldNothing: a request that gives up waiting for a
// worker took nothing from the pool, and its tally says so (0, not the
// time it waited) — else a queue of requests that time out counts their
// waits as work, and the pool reads busier than it can be.
func TestDoThatGivesUpHeldNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := signals.NewRecorder(signals.Config{})
		require.NoError(t, rec.Features("recs"))
		p := New(1)
		go p.Do(context.Background(), time.Second) // holds the only worker
		synctest.Wait()
		var tl signals.RequestTally
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.True(t, rec.BeginTally(&tl, ctx))
		signals.Evaluated(&tl, "recs", true)
		start := time.Now()
		require.ErrorIs(t, p.Do(&tl, 10*time.Millisecond), ErrGone)
		rec.EndTally(&tl, time.Since(start)) // 100 ms waiting, nothing held
		assert.Equal(t, int64(1), rec.Tallies()[0].On.N)
		assert.Zero(t, rec.Tallies()[0].On.Sum, "the wait is not work")
		time.Sleep(time.Second) // the holder's work ends
		synctest.Wait()
	})
}

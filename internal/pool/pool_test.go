package pool

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
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

package brownout_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
)

// TestRunSaysWhyItDoesNotRun: a Brownout runs once, and Run's refusal
// says which case it is — running, ran (its context ended), closed —
// never "running or closed" for one that is neither.
func TestRunSaysWhyItDoesNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := brownout.New(brownout.Options{Features: features()})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- b.Run(ctx) }()
		synctest.Wait() // it runs
		assert.ErrorIs(t, b.Run(t.Context()), brownout.ErrRunning)
		cancel()
		require.NoError(t, <-done)

		err = b.Run(context.Background())
		assert.ErrorIs(t, err, brownout.ErrRan)
		assert.EqualError(t, err, "brownout: Run: it ran and returned when its context ended, and a Brownout runs once: make another with New")
		require.NoError(t, b.Close())
		assert.ErrorIs(t, b.Run(context.Background()), brownout.ErrClosed)
	})
}

package provider_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
)

// TestRemoteAfterRunReturns: once Run has returned nothing follows the
// daemon: Connected is false and the state it last had is served stale,
// the reason saying why — not as one a Run still follows.
func TestRemoteAfterRunReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1)
		c.publish(0.4)
		r := c.remote(t, provider.RemoteOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		step(2 * time.Second)
		require.True(t, r.Connected())
		require.Equal(t, dimmer.Auto, r.State().StateMode())
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
		assert.False(t, r.Connected(), "Run returned")
		st := r.State()
		assert.Equal(t, dimmer.Stale, st.StateMode())
		assert.Contains(t, st.Why(), "Run returned")
		assert.Equal(t, 0.4, level(r, "recommendations"), "the last levels, stale")
	})
}

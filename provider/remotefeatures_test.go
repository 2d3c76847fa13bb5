package provider_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
)

// TestRemoteListedFeaturesAreDefaultsUntilTheDaemonIsHeard: with the
// daemon down from the start, the features RemoteOptions.Features lists
// answer at once and after 2.5 s of failed attempts with their default —
// on (fail open), or Defaults' word — marked stale, the reason saying
// they are defaults; none is FLAG_NOT_FOUND. Once the daemon is heard
// its features replace them.
func TestRemoteListedFeaturesAreDefaultsUntilTheDaemonIsHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 1)
		u := c.urls()[0]
		c.at(u).kill() // down at the start
		r := c.remote(t, provider.RemoteOptions{Features: []string{"recs", "reviews", "gallery"},
			Defaults: map[string]bool{"gallery": false, "extra": true}})
		p, err := provider.New(r, provider.Options{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		step(2500 * time.Millisecond)
		require.False(t, r.Connected())
		require.Positive(t, c.dials.Load(), "it tried")

		st := r.State()
		assert.Equal(t, dimmer.Stale, st.StateMode())
		assert.Contains(t, st.Why(), "features at their defaults")
		var names []string
		for i := range st.NumFeatures() {
			names = append(names, st.FeatureName(i))
		}
		assert.Equal(t, []string{"recs", "reviews", "gallery", "extra"}, names, "the listed ones in their order, then Defaults' others")
		fc := openfeature.FlattenedContext{openfeature.TargetingKey: "u1"}
		for flag, want := range map[string]bool{"recs": true, "reviews": true, "gallery": false, "extra": true} {
			d := p.BooleanEvaluation(ctx, flag, !want, fc)
			require.NoError(t, d.Error(), flag)
			assert.Equal(t, want, d.Value, flag)
			assert.Equal(t, openfeature.SplitReason, d.Reason, flag)
			assert.Contains(t, d.FlagMetadata["reason"], "features at their defaults", flag)
			assert.Equal(t, "stale", d.FlagMetadata["mode"], flag)
		}

		c.at(u).restart()
		c.publish(0.4)
		step(15 * time.Second) // the backoff is at most MaxBackoff, 10 s
		require.True(t, r.Connected())
		st = r.State()
		assert.Equal(t, 1, st.NumFeatures(), "the daemon's features replace the listed ones")
		assert.Equal(t, 0.4, level(r, "recommendations"))
		d := p.BooleanEvaluation(ctx, "recs", true, fc)
		assert.Equal(t, openfeature.FlagNotFoundCode, d.ResolutionDetail().ErrorCode, "a feature the daemon does not have")
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

package brownout_test

import (
	"net"
	"net/http/httptest"
	"testing"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
)

// TestFleetColdStartAnswersTheListedFeaturesWithTheirDefaults: in fleet
// mode with the daemon down from the start, the features listed in
// Options are answered at once with their default — on, failing open —
// not FLAG_NOT_FOUND, the reason saying they are defaults; the app's
// GET /v1/state lists them.
func TestFleetColdStartAnswersTheListedFeaturesWithTheirDefaults(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String()
	ln.Close() // nobody there
	b, err := brownout.New(brownout.Options{Daemon: down, DaemonToken: "t", Domain: domain(), NoPush: true,
		Features: []brownout.Feature{{Name: "recs"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}}})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.RegisterProvider())
	ec := openfeature.NewEvaluationContext("u1", nil)
	for _, f := range []string{"recs", "reviews", "gallery"} {
		d, err := b.Client().BooleanValueDetails(t.Context(), f, false, ec)
		require.NoError(t, err, f)
		assert.True(t, d.Value, "%s: on, its default", f)
		assert.Equal(t, openfeature.SplitReason, d.Reason, f)
		reason, _ := d.FlagMetadata.GetString("reason")
		assert.Contains(t, reason, "features at their defaults", f)
	}
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()
	st := fleetState(t, ops.URL)
	assert.Equal(t, "stale", st.Mode)
	assert.Contains(t, st.Reason, "features at their defaults")
	assert.Equal(t, []brownout.FleetFeature{{Name: "recs", Level: 1, Mode: "stale"}, {Name: "reviews", Level: 1, Mode: "stale"},
		{Name: "gallery", Level: 1, Mode: "stale"}}, st.Features)
}

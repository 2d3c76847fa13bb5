package testapp

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/load"
)

// TestRealHTTPKnee: the knee tool against the unprotected test app, whose
// capacity is known (W workers over the page and its parts): it finds the
// capacity within 15 %, and its fixed-limit suggestion (Little's law, μ ×
// the unloaded service time) within half a worker of W.
func TestRealHTTPKnee(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	cfg := Config{Workers: 4, Page: 8 * time.Millisecond, Parts: []Part{{Name: "recommendations", Cost: 3 * time.Millisecond}, {Name: "reviews", Cost: 2 * time.Millisecond}}}
	on, _ := cfg.Capacity()
	app := httptest.NewServer(New(cfg))
	defer app.Close()
	k, err := load.FindKnee(context.Background(), load.KneeConfig{URL: app.URL + "/", From: 0.25 * on, Step: 0.25 * on, Steps: 7, Hold: 3 * time.Second})
	require.NoError(t, err)
	t.Logf("all-on capacity %.0f/s: knee at step %d, μ ≈ %.0f/s, base %v, concurrency %.2f, collapsed at %d", on, k.At, k.Capacity, k.Base, k.Suggest.Concurrency, k.Collapsed)
	assert.GreaterOrEqual(t, k.At, 0, "a knee within 1.75× the capacity")
	assert.InEpsilon(t, on, k.Capacity, 0.15, "μ")
	assert.InDelta(t, float64(cfg.Workers), k.Suggest.Concurrency, 0.5+0.15*float64(cfg.Workers), "Little's law at the knee")
}

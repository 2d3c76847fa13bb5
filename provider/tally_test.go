package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// Through the SDK and signals' middleware: each request's evaluations
// mark its tally, per the value each user got; the app's Skipped wins;
// evaluations outside a request are unattributed, never off.
func TestEvaluationsMarkTheRequestsTally(t *testing.T) {
	c := newController(t)
	dimmed(t, c, t0.Add(1e9)) // recommendations at a fractional level
	rec := signals.NewRecorder(signals.Config{})
	require.NoError(t, rec.Features("recommendations", "reviews"))
	p, err := New(c, Options{Recorder: rec})
	require.NoError(t, err)
	api := isolated.NewAPI()
	require.NoError(t, api.SetProviderAndWait(context.Background(), p))
	defer api.Shutdown(context.Background())
	client := api.NewClient()

	ons := 0
	h := signals.Middleware(rec, signals.MiddlewareConfig{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ec := openfeature.NewEvaluationContext(r.URL.Query().Get("user"), nil)
		on, err := client.BooleanValue(r.Context(), "recommendations", false, ec)
		require.NoError(t, err)
		if on {
			ons++
		}
		_, err = client.BooleanValue(r.Context(), "reviews", false, ec)
		require.NoError(t, err)
		signals.Skipped(r.Context(), "reviews") // evaluated, not rendered
	}))
	const n = 400
	for i := range n {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/?user=u"+strconv.Itoa(i), nil))
	}
	require.Greater(t, ons, 0)
	require.Less(t, ons, n, "a fractional level: both arms")
	tl := rec.Snapshot(t0).Tallies
	require.Len(t, tl, 2)
	assert.Equal(t, int64(ons), tl[0].On.N)
	assert.Equal(t, int64(n-ons), tl[0].Off.N)
	assert.Equal(t, int64(0), tl[1].On.N)
	assert.Equal(t, int64(n), tl[1].Off.N, "skipped, whatever the provider said")

	// Outside a request: unattributed, for registered features only.
	_, err = client.BooleanValue(context.Background(), "recommendations", false, openfeature.NewEvaluationContext("u1", nil))
	require.NoError(t, err)
	p.ObjectEvaluation(context.Background(), FeaturesFlag, nil, fc("u1"))
	tl = rec.Snapshot(t0).Tallies
	assert.Equal(t, int64(2), tl[0].Unattributed)
	assert.Equal(t, int64(1), tl[1].Unattributed)
	assert.Zero(t, tl[0].On.N+tl[0].Off.N+tl[1].On.N+tl[1].Off.N, "never counted as off")
}

// FeaturesFlag marks every feature; a failed evaluation marks nothing.
func TestObjectEvaluationMarks(t *testing.T) {
	c := newController(t)
	rec := signals.NewRecorder(signals.Config{})
	require.NoError(t, rec.Features("recommendations", "reviews"))
	p, err := New(c, Options{Recorder: rec, RequireTargetingKey: true})
	require.NoError(t, err)
	var rt signals.RequestTally
	require.True(t, rec.BeginTally(&rt, context.Background()))
	r := p.ObjectEvaluation(&rt, FeaturesFlag, nil, fc("u1"))
	require.Equal(t, openfeature.SplitReason, r.Reason)
	for _, f := range []string{"recommendations", "reviews"} {
		on, marked := signals.FeatureMarked(&rt, f)
		assert.True(t, marked, f)
		assert.Equal(t, r.Value.(map[string]any)[f], on, f)
	}
	var rt2 signals.RequestTally
	require.True(t, rec.BeginTally(&rt2, context.Background()))
	b := p.BooleanEvaluation(&rt2, "recommendations", true, fc(""))
	require.Equal(t, openfeature.ErrorReason, b.Reason)
	_, marked := signals.FeatureMarked(&rt2, "recommendations")
	assert.False(t, marked)
	assert.Zero(t, rec.Tallies()[0].Unattributed)
}

func BenchmarkBooleanEvaluationTally(b *testing.B) {
	c := newController(b)
	dimmed(b, c, t0.Add(1e9))
	rec := signals.NewRecorder(signals.Config{})
	if err := rec.Features("recommendations", "reviews"); err != nil {
		b.Fatal(err)
	}
	p, _ := New(c, Options{Recorder: rec})
	var rt signals.RequestTally
	rec.BeginTally(&rt, context.Background())
	flat := fc("user-123456", "segment", "vip")
	b.ReportAllocs()
	for b.Loop() {
		p.BooleanEvaluation(&rt, "recommendations", false, flat)
	}
}

package testapp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseParts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Part
		err  string
	}{
		{"", []Part{}, ""},
		{"reviews=1.5ms", []Part{{Name: "reviews", Cost: 1500 * time.Microsecond}}, ""},
		{"recommendations=3ms@remote, reviews=1.5ms", []Part{{Name: "recommendations", Cost: 3 * time.Millisecond, Remote: true}, {Name: "reviews", Cost: 1500 * time.Microsecond}}, ""},
		{"reviews", nil, `part "reviews": want name=duration or name=duration@remote`},
		{"reviews=1.5ms@far", nil, `part "reviews=1.5ms@far"`},
		{"reviews=@remote", nil, `part "reviews=@remote"`},
		{"=1ms", nil, `part "=1ms"`},
		{"reviews=-1ms", nil, `part "reviews=-1ms"`},
		{"reviews=1ms,reviews=2ms", nil, `part "reviews" twice`},
	} {
		got, err := ParseParts(c.in)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "%q", c.in)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.want, got, "%q", c.in)
	}
}

func TestParsePriors(t *testing.T) {
	got, err := ParsePriors("recommendations=0.4, reviews=0.25")
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"recommendations": 0.4, "reviews": 0.25}, got)
	for _, in := range []string{"reviews", "reviews=0", "reviews=-1", "reviews=x", "=0.2", "reviews=Inf", "reviews=NaN", "reviews=1,reviews=2"} {
		_, err := ParsePriors(in)
		assert.Error(t, err, "%q", in)
	}
}

// FuzzParseParts: what ParseParts accepts, Part.String writes back the
// same way.
func FuzzParseParts(f *testing.F) {
	for _, s := range []string{"recommendations=2.5ms,reviews=1.5ms", "recommendations=3ms@remote", "", "a=1h@remote,b=0s", "x=@remote"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseParts(s)
		if err != nil {
			return
		}
		var back []string
		for _, p := range ps {
			require.GreaterOrEqual(t, p.Cost, time.Duration(0))
			back = append(back, p.String())
		}
		again, err := ParseParts(strings.Join(back, ","))
		if len(ps) == 0 {
			return
		}
		require.NoError(t, err, "%q → %q", s, back)
		assert.Equal(t, ps, again)
	})
}

func FuzzParsePriors(f *testing.F) {
	for _, s := range []string{"recommendations=0.4,reviews=0.25", "", "a=1e300", "a=0x1p-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePriors(s)
		if err != nil {
			return
		}
		for name, v := range ps {
			assert.NotEmpty(t, name)
			assert.Greater(t, v, 0.0, "%q", s)
		}
	})
}

// TestRemotePartHoldsNoWorker: with one worker, a page of 10 ms and a part
// of 50 ms, four pages at once take 4 × 10 + 50 ms when the part is a
// remote call (the four calls wait side by side, holding no worker), and
// 4 × 60 ms when it is pool work.
func TestRemotePartHoldsNoWorker(t *testing.T) {
	for _, c := range []struct {
		remote bool
		want   time.Duration
	}{
		{true, 90 * time.Millisecond},
		{false, 240 * time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			app := New(Config{Workers: 1, Page: 10 * time.Millisecond, Parts: []Part{{Name: "recommendations", Cost: 50 * time.Millisecond, Remote: c.remote}}})
			start := time.Now()
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					w := httptest.NewRecorder()
					app.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/page", nil))
					assert.Equal(t, http.StatusOK, w.Code)
					assert.Contains(t, w.Body.String(), `"sections":["recommendations"]`)
				})
			}
			wg.Wait()
			assert.Equal(t, c.want, time.Since(start), "remote %v: four pages on one worker", c.remote)
			assert.Equal(t, uint64(4), app.Stats().Served)
		})
	}
}

// TestRemotePartGivesUpWithItsClient: a client that leaves during the
// remote call gets no page, and the app counts it as given up.
func TestRemotePartGivesUpWithItsClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		app := New(Config{Workers: 1, Page: 10 * time.Millisecond, Parts: []Part{{Name: "recommendations", Cost: time.Second, Remote: true}}})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		w := httptest.NewRecorder()
		app.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/page", nil).WithContext(ctx))
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "it stops waiting when its client goes")
		assert.Equal(t, Stats{Served: 0, GaveUp: 1, PartsOn: map[string]uint64{"recommendations": 1}}, app.Stats())
	})
}

func TestCapacityLeavesRemotePartsOut(t *testing.T) {
	cfg := Config{Workers: 4, Page: 6 * time.Millisecond, Parts: []Part{{Name: "recommendations", Cost: 3 * time.Millisecond, Remote: true}, {Name: "reviews", Cost: 2 * time.Millisecond}}}
	on, off := cfg.Capacity()
	assert.InDelta(t, 500, on, 1e-9, "all on: the page and reviews")
	assert.InDelta(t, 4/0.006, off, 1e-9)
	pool, wall := cfg.PoolShare(cfg.Parts[0])
	assert.Equal(t, [2]float64{0, 0.5}, [2]float64{pool, wall}, "remote: no pool work, half a page of wall time")
	pool, wall = cfg.PoolShare(cfg.Parts[1])
	assert.InDelta(t, 1.0/3, pool, 1e-9)
	assert.InDelta(t, 1.0/3, wall, 1e-9)
}

// TestPriorsSetTheControllersCosts: Config.Priors reach the stack's
// controller, and the served state reports them beside what it learned.
func TestPriorsSetTheControllersCosts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Build(ctx, Config{Priors: map[string]float64{"reviews": 0.25}}, Brownout)
	require.NoError(t, err)
	dc := p.Controller.Config()
	costs := map[string]float64{}
	for _, f := range dc.Features {
		costs[f.Name] = f.Cost
	}
	assert.Equal(t, map[string]float64{"recommendations": 1, "reviews": 0.25}, costs, "reviews told, recommendations the default")
	live := p.Read().Costs
	require.Len(t, live, 2)
	assert.Equal(t, LearnedCost{Feature: "reviews", Prior: 0.25}, live[1], "nothing learned yet")

	_, err = Build(ctx, Config{Priors: map[string]float64{"ads": 0.1}}, Brownout)
	assert.ErrorContains(t, err, `prior for "ads": the stack has no such feature`)
}

func TestAppFlagsCarryRemotePartsAndPriors(t *testing.T) {
	cfg := Config{Parts: []Part{{Name: "recommendations", Cost: 3 * time.Millisecond, Remote: true}, {Name: "reviews", Cost: 1500 * time.Microsecond}},
		Priors: map[string]float64{"reviews": 0.25, "recommendations": 0.5}}
	args := strings.Join(AppFlags(cfg, Brownout), " ")
	assert.Contains(t, args, "--parts recommendations=3ms@remote,reviews=1.5ms")
	assert.Contains(t, args, "--priors recommendations=0.5,reviews=0.25")
}

package provider_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// TestEmbeddedModeUnderOverload wires the whole in-process stack: shed in
// front of a net/http app, the app's own recorder feeding the dimmer, and
// handlers asking OpenFeature, per user, whether to render the optional
// sections. The server has 4 workers; a page costs 6 ms, plus 2.5 ms with
// recommendations and 1.5 ms with reviews: 400 pages/s with everything on,
// 667 with everything off. Load steps from 300/s to 600/s and back.
func TestEmbeddedModeUnderOverload(t *testing.T) {
	dimmed := runEmbedded(t, false)
	frozen := runEmbedded(t, true)
	t.Logf("served at 1.5× capacity: %.1f %% with the dimmer, %.1f %% with it frozen at full brightness", 100*dimmed, 100*frozen)
	assert.GreaterOrEqual(t, dimmed, 0.95, "dimmer, not dark: nearly every page served")
	assert.Less(t, frozen, 0.8, "the control: without dimming, the same load loses pages")
}

func runEmbedded(t *testing.T, freeze bool) (share float64) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rec := signals.NewRecorder(signals.Config{Latency: signals.WindowConfig{Slices: 5}})
		ctl, err := dimmer.New(dimmer.Config{
			Targets: []dimmer.Target{
				{Signal: signals.LatencyP99, Target: 0.3},
				{Signal: signals.RejectRatio, Target: 0.01, DimOnly: true},
			},
			Features: []dimmer.Feature{{Name: "recommendations", Cost: 0.25}, {Name: "reviews", Rank: 1, Cost: 0.15}},
		})
		require.NoError(t, err)
		if freeze {
			ctl.Freeze("control run: no dimming")
		}
		done := make(chan struct{})
		go func() { ctl.Run(ctx, dimmer.Local(rec)); close(done) }()

		p, err := provider.New(ctl, provider.Options{})
		require.NoError(t, err)
		api := isolated.NewAPI()
		require.NoError(t, api.SetProviderAndWait(ctx, p))
		flags := api.NewClient()

		// The package defaults (the gate is not told the 4 workers), the
		// README's X-Priority trusted: the load below is our own.
		s, err := shed.New(shed.Config{Recorder: rec, ShedLevel: ctl.ShedLevel, TrustPriority: true})
		require.NoError(t, err)

		var mu sync.Mutex
		workers := make(chan struct{}, 4)
		rnd := rand.New(rand.NewPCG(7, 8))
		work := func(mean time.Duration) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return time.Duration(rnd.ExpFloat64() * float64(mean))
		}
		app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ec := openfeature.NewEvaluationContext(r.Header.Get("X-User"), nil)
			d := work(6 * time.Millisecond)
			if on, _ := flags.BooleanValue(r.Context(), "recommendations", true, ec); on {
				d += work(2500 * time.Microsecond)
			}
			if on, _ := flags.BooleanValue(r.Context(), "reviews", true, ec); on {
				d += work(1500 * time.Microsecond)
			}
			select { // one of 4 workers, given up when the client goes
			case workers <- struct{}{}:
			case <-r.Context().Done():
				return
			}
			time.Sleep(d)
			<-workers
		})
		h := s.Middleware(app)

		type result struct {
			at     time.Duration
			class  signals.Class
			status int
		}
		var results []result
		var wg sync.WaitGroup
		start := time.Now()
		rate := func(at time.Duration) float64 {
			if at >= 10*time.Second && at < 30*time.Second {
				return 600
			}
			return 300
		}
		levels := map[int]float64{}
		for i := 0; time.Since(start) < 50*time.Second; i++ {
			at := time.Since(start)
			levels[int(at/time.Second)] = ctl.State().Features[0].Level
			c := signals.Default
			if i%10 < 3 {
				c = signals.Critical
			}
			wg.Go(func() {
				req := httptest.NewRequest(http.MethodGet, "/product", nil)
				req.Header.Set(signals.PriorityHeader, c.String())
				req.Header.Set("X-User", "user-"+strconv.Itoa(i%5000))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				mu.Lock()
				results = append(results, result{at, c, w.Code})
				mu.Unlock()
			})
			time.Sleep(time.Duration(work(time.Duration(float64(time.Second) / rate(at)))))
		}
		wg.Wait()
		cancel()
		<-done
		api.Shutdown(context.Background())

		var okOver, allOver, critOK, crit int
		for _, r := range results {
			if r.at >= 15*time.Second && r.at < 30*time.Second {
				allOver++
				if r.status == http.StatusOK {
					okOver++
				}
			}
			if r.class == signals.Critical {
				crit++
				if r.status == http.StatusOK {
					critOK++
				}
			}
		}
		share = float64(okOver) / float64(allOver)
		t.Logf("frozen=%v, at 1.5× capacity (15–30 s): %.1f %% served; critical %.2f %%; recommendations level at 20 s %.2f, at 29 s %.2f, at 49 s %.2f",
			freeze, 100*share, 100*float64(critOK)/float64(crit), levels[20], levels[29], levels[49])
		assert.GreaterOrEqual(t, float64(critOK)/float64(crit), 0.99, "critical requests served")
		if freeze {
			return
		}
		assert.Less(t, levels[20], 0.5, "recommendations dimmed under overload")
		assert.Equal(t, 1.0, levels[49], "and back once the load is gone")
		ev := p.Evaluations()
		assert.Greater(t, ev["recommendations"]["off"], uint64(0), "optional content was withheld for some users")
	})
	return share
}

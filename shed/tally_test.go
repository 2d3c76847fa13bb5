package shed

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
)

// An admitted request's context carries its class and a tally; its
// service time runs from admission, its wait at the gate left out.
func TestMiddlewareTallies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := signals.NewRecorder(signals.Config{})
		require.NoError(t, rec.Features("recs"))
		s, err := New(Config{Recorder: rec, TrustPriority: true,
			Gate: GateConfig{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true}}})
		require.NoError(t, err)
		h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, ok := ClassFrom(r.Context())
			assert.True(t, ok)
			assert.Equal(t, signals.Critical, c)
			on := r.URL.Path == "/on"
			assert.True(t, signals.Evaluated(r.Context(), "recs", on))
			time.Sleep(40 * time.Millisecond)
		}))
		serve := func(path string) chan int {
			done := make(chan int, 1)
			go func() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodGet, path, nil)
				r.Header.Set(signals.PriorityHeader, "critical")
				h.ServeHTTP(w, r)
				done <- w.Code
			}()
			return done
		}
		first := serve("/on")
		synctest.Wait()
		second := serve("/off") // waits 40 ms behind the first
		assert.Equal(t, http.StatusOK, <-first)
		assert.Equal(t, http.StatusOK, <-second)
		tl := rec.Snapshot(time.Now()).Tallies
		require.Len(t, tl, 1)
		assert.Equal(t, int64(1), tl[0].On.N)
		assert.Equal(t, int64(1), tl[0].Off.N)
		assert.InDelta(t, 0.04, tl[0].On.Mean(), 1e-9)
		assert.InDelta(t, 0.04, tl[0].Off.Mean(), 1e-9, "the wait is not service")
		snap := rec.Snapshot(time.Now())
		assert.Equal(t, int64(0), snap.Tallies[0].On.N+snap.Tallies[0].Off.N)
	})
}

// Without features no tally; with them, no allocation more.
func TestMiddlewareTallyAllocs(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates")
	}
	allocs := func(features ...string) float64 {
		rec := signals.NewRecorder(signals.Config{})
		if len(features) > 0 {
			require.NoError(t, rec.Features(features...))
		}
		s, _ := New(Config{Recorder: rec})
		h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, tallied := signals.FeatureMarked(r.Context(), "recs")
			signals.Evaluated(r.Context(), "recs", true)
			on, marked := signals.FeatureMarked(r.Context(), "recs")
			assert.Equal(t, len(features) > 0, on && marked && !tallied)
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		w := httptest.NewRecorder()
		return testing.AllocsPerRun(100, func() { h.ServeHTTP(w, req) })
	}
	assert.Equal(t, allocs(), allocs("recs", "reviews"))
}

// BenchmarkMiddlewareTally is BenchmarkMiddleware with four features
// registered, the handler marking none or two of them.
func BenchmarkMiddlewareTally(b *testing.B) {
	for _, marks := range []int{0, 2} {
		b.Run(fmt.Sprint("marks=", marks), func(b *testing.B) {
			rec := signals.NewRecorder(signals.Config{})
			if err := rec.Features("recs", "reviews", "related", "ads"); err != nil {
				b.Fatal(err)
			}
			s, _ := New(Config{Recorder: rec})
			h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if marks > 0 {
					signals.Evaluated(r.Context(), "recs", true)
					signals.Evaluated(r.Context(), "reviews", false)
				}
			}))
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(signals.PriorityHeader, "critical")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

// The latency a Shedder records is the one its client sees: from arrival,
// the wait at the gate included (the sojourn is that wait, the tally's
// service time the work after it) — through the middleware and Acquire.
// A standing queue at the gate then shows in the latency targets, as
// users feel it, not only in the refusals it ends in.
func TestLatencyIsWhatTheClientSees(t *testing.T) {
	for _, via := range []string{"middleware", "acquire"} {
		t.Run(via, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := signals.NewRecorder(signals.Config{})
				require.NoError(t, rec.Features("recs"))
				s, err := New(Config{Recorder: rec, TrustPriority: true,
					Gate: GateConfig{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true}}})
				require.NoError(t, err)
				work := func() { time.Sleep(40 * time.Millisecond) }
				serve := func() chan struct{} {
					done := make(chan struct{})
					go func() {
						defer close(done)
						if via == "acquire" {
							release, err := s.Acquire(t.Context(), Request{Class: signals.Critical})
							if assert.NoError(t, err) {
								work()
								release(false)
							}
							return
						}
						h := s.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { work() }))
						r := httptest.NewRequest(http.MethodGet, "/", nil)
						r.Header.Set(signals.PriorityHeader, "critical")
						h.ServeHTTP(httptest.NewRecorder(), r)
					}()
					return done
				}
				first := serve()
				synctest.Wait()
				second := serve() // waits 40 ms behind the first, then works 40 ms
				<-first
				<-second
				snap := rec.Snapshot(time.Now())
				lmax, ok := snap.Get(signals.LatencyMax)
				require.True(t, ok)
				assert.InDelta(t, 0.080, lmax, 1e-9, "the second request's latency: its wait and its work")
				smax, ok := snap.Get(signals.SojournMax)
				require.True(t, ok)
				assert.InDelta(t, 0.040, smax, 1e-9, "its wait")
			})
		})
	}
}

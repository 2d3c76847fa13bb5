package shed

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

type arrivalKey struct{}

// cpu is a server with a fixed number of workers and exponential service
// times: its capacity is workers / mean.
type cpu struct {
	slots chan struct{}
	mu    sync.Mutex
	rnd   *rand.Rand
	mean  time.Duration
	// sojourn of each admitted request by class: arrival to handler start
	sojourn [signals.NumClasses][]time.Duration
}

func newCPU(workers int, mean time.Duration) *cpu {
	return &cpu{slots: make(chan struct{}, workers), rnd: rand.New(rand.NewPCG(1, 2)), mean: mean}
}

func (c *cpu) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := r.Context().Value(arrivalKey{}).(time.Time)
	cl, _ := ClassFrom(r.Context())
	c.mu.Lock()
	c.sojourn[cl] = append(c.sojourn[cl], time.Since(arrived))
	d := time.Duration(c.rnd.ExpFloat64() * float64(c.mean))
	c.mu.Unlock()
	c.slots <- struct{}{}
	time.Sleep(d)
	<-c.slots
	w.WriteHeader(http.StatusOK)
}

type outcome struct {
	class   signals.Class
	status  int
	latency time.Duration
}

// openLoop sends rate requests per second for d, classes in the given
// shares, and returns every outcome once all requests have finished.
func openLoop(h http.Handler, rate float64, d time.Duration, shares [signals.NumClasses]float64) []outcome {
	var mu sync.Mutex
	var out []outcome
	var wg sync.WaitGroup
	rnd := rand.New(rand.NewPCG(3, 4))
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		u := rnd.Float64()
		c := signals.Sheddable
		if u < shares[0] {
			c = signals.Critical
		} else if u < shares[0]+shares[1] {
			c = signals.Default
		}
		wg.Go(func() {
			start := time.Now()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(signals.PriorityHeader, c.String())
			req = req.WithContext(context.WithValue(req.Context(), arrivalKey{}, start))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			mu.Lock()
			out = append(out, outcome{c, rec.Code, time.Since(start)})
			mu.Unlock()
		})
		time.Sleep(time.Duration(rnd.ExpFloat64() / rate * float64(time.Second)))
	}
	wg.Wait()
	return out
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(math.Ceil(0.99*float64(len(s))))-1]
}

// TestTwiceCapacity: at 2× capacity, critical requests keep ≥ 99 %
// success while sheddable ones take the refusals; admitted requests never
// wait longer than their class allows, and their p99 stays within max wait
// plus service time. synctest fails the test if a goroutine leaks.
func TestTwiceCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mean = 10 * time.Millisecond
		server := newCPU(4, mean) // 400 req/s
		// The defaults (the gate is not told the 4 workers); the load's
		// classes come in X-Priority, as from our own services.
		s, err := New(Config{TrustPriority: true})
		require.NoError(t, err)
		outs := openLoop(s.Middleware(server), 800, 5*time.Second, [3]float64{0.3, 0.4, 0.3})

		var ok, total [signals.NumClasses]int
		var lat [signals.NumClasses][]time.Duration
		for _, o := range outs {
			total[o.class]++
			switch o.status {
			case http.StatusOK:
				ok[o.class]++
				lat[o.class] = append(lat[o.class], o.latency)
			case http.StatusServiceUnavailable:
			default:
				t.Fatalf("status %d", o.status)
			}
		}
		rate := func(c signals.Class) float64 { return float64(ok[c]) / float64(total[c]) }
		t.Logf("success: critical %.3f default %.3f sheddable %.3f of %d requests", rate(0), rate(1), rate(2), len(outs))
		assert.GreaterOrEqual(t, rate(signals.Critical), 0.99, "critical keeps its success")
		assert.Less(t, rate(signals.Sheddable), rate(signals.Default), "sheddable takes the refusals first")
		assert.Less(t, rate(signals.Default), rate(signals.Critical))

		cfg := s.gate.Config()
		service99 := time.Duration(math.Log(100) * float64(mean)) // p99 of the exponential service
		for c := range signals.Class(signals.NumClasses) {
			for _, w := range server.sojourn[c] {
				assert.LessOrEqual(t, w, cfg.MaxWait[c], "%s waited %v: over its time bound", c, w)
			}
			p := p99(lat[c])
			t.Logf("%s: p99 of admitted %v (bound %v + %v)", c, p, cfg.MaxWait[c], service99)
			assert.LessOrEqual(t, p, cfg.MaxWait[c]+service99, "%s p99", c)
		}
		snap := s.Recorder().Snapshot(time.Now())
		assert.Greater(t, snap.Classes[signals.Sheddable].RejectedTotal(), snap.Classes[signals.Critical].RejectedTotal())
		_, ok2 := snap.Get(signals.SojournP99)
		assert.True(t, ok2, "sojourn reaches the recorder")
	})
}

func TestRefusalIsProblemJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := New(Config{Gate: GateConfig{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true}},
			ShedLevel: func() float64 { return 1 }})
		h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(signals.PriorityHeader, "sheddable")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		assert.Equal(t, "1", rec.Header().Get("Retry-After"))
		var p struct {
			Type, Title, Detail, Reason string
			Status                      int
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		assert.Equal(t, 503, p.Status)
		assert.Equal(t, "shed_level", p.Reason)
		assert.Equal(t, "urn:brownout:shed:shed_level", p.Type)

		req.Header.Set(signals.PriorityHeader, "critical")
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code, "the cascade never sheds critical")
	})
}

func TestDeadlineAndClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := New(Config{Gate: GateConfig{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true}}})
		block := make(chan struct{})
		var ran int
		h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran++
			d, ok := r.Context().Deadline()
			if ok && r.Header.Get("X-Test") == "deadline" {
				assert.Equal(t, time.Now().Add(time.Second), d, "the header's deadline is the context's")
			}
			<-block
		}))
		// Past deadline: refused before any work.
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(signals.DeadlineHeader, signals.FormatDeadline(time.Now().Add(-time.Second)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
		assert.Equal(t, 0, ran)

		// One request holds the only slot; a queued one whose client
		// leaves is dropped without a response being written.
		go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
			done <- rec.Code
		}()
		synctest.Wait()
		cancel()
		assert.Equal(t, http.StatusOK, <-done, "nothing written for a client that left (recorder default)")
		c := s.Recorder().Counters().Load()
		assert.Equal(t, uint64(1), c[signals.Default].Rejected[signals.ReasonCanceled])
		close(block)
		synctest.Wait()
	})
}

func TestRateLimitHeaders(t *testing.T) {
	for _, tc := range []struct{ window, quiet bool }{{false, false}, {true, false}, {false, true}} {
		window := tc.window
		synctest.Test(t, func(t *testing.T) {
			s, err := New(Config{RateLimit: &RateLimitConfig{SlidingWindow: window, HeadersOnRefusal: tc.quiet}})
			require.NoError(t, err)
			h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			do := func(user string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("X-User-ID", user)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			for i := range 10 {
				rec := do("alice")
				require.Equal(t, 200, rec.Code, "burst request %d", i)
				if tc.quiet {
					assert.Empty(t, rec.Header().Get("X-RateLimit-Limit"), "only with refusals")
				} else {
					assert.Equal(t, "10", rec.Header().Get("X-RateLimit-Limit"))
				}
			}
			rec := do("alice")
			assert.Equal(t, http.StatusTooManyRequests, rec.Code)
			assert.NotEmpty(t, rec.Header().Get("Retry-After"))
			assert.Equal(t, "0", rec.Header().Get("X-RateLimit-Remaining"))
			assert.Equal(t, "10", rec.Header().Get("X-RateLimit-Limit"))
			assert.NotEmpty(t, rec.Header().Get("X-RateLimit-Reset"))
			assert.Equal(t, 200, do("bob").Code, "limits are per client")
			// The bucket refills at 2/s; the window's previous 10 requests
			// weigh 80 % a fifth into the next window.
			time.Sleep(6 * time.Second)
			assert.Equal(t, 200, do("alice").Code, "refilled")
		})
	}
	_, err := New(Config{RateLimit: &RateLimitConfig{Rate: -1}})
	assert.ErrorContains(t, err, "rate must be positive")
}

// BenchmarkMiddleware: one admitted request through the middleware around
// an empty handler (clock reads, classification, deadline parsing, context
// values and the outcome recording included).
func BenchmarkMiddleware(b *testing.B) {
	s, _ := New(Config{})
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(signals.PriorityHeader, "critical")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

// BenchmarkMiddlewareParallel measures the middleware's cost under
// contention, so the limit is fixed: an adaptive one reads a handler of
// nanoseconds, preempted mid-request, as a bottleneck and queues (see the
// slack in internal/gate's limit).
func BenchmarkMiddlewareParallel(b *testing.B) {
	s, _ := New(Config{Gate: GateConfig{Limit: LimitConfig{Initial: 1000, Max: 1000, Fixed: true}}})
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		w := httptest.NewRecorder()
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}

func TestStrayClassIsContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := New(Config{Classify: func(*http.Request) signals.Class { return 200 },
			Gate: GateConfig{Limit: LimitConfig{Initial: 1, Min: 1, Max: 1, Fixed: true}}})
		block := make(chan struct{})
		h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
		go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
		synctest.Wait()
		done := make(chan int)
		go func() { // queues behind the first: the path that indexes by class
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			done <- rec.Code
		}()
		synctest.Wait()
		close(block)
		assert.Equal(t, http.StatusOK, <-done)
	})
}

// The gate's CoDel decision is what the recorder reports as standing (and
// brownout_queue_standing exports): one source of truth.
func TestStandingReachesTheRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		server := newCPU(4, 10*time.Millisecond)
		s, err := New(Config{})
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			openLoop(s.Middleware(server), 800, 4*time.Second, [3]float64{0.3, 0.4, 0.3})
		}()
		seen := 0
		for range 40 {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait() // everyone blocked: nothing moves between the two reads
			st := s.Stats()
			standing := st.Standing[0] || st.Standing[1] || st.Standing[2]
			assert.Equal(t, standing, s.Recorder().Snapshot(time.Now()).Standing)
			if standing {
				seen++
			}
		}
		<-done
		assert.Positive(t, seen, "2× capacity makes a queue stand")
	})
}

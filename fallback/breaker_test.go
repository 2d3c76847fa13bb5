package fallback

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakerOpensBehindAFullBulkhead is the package's incident with a
// small bulkhead: the provider hangs, 20 request goroutines call it with
// MaxConcurrent 2. The two calls that get in time out; the others are
// refused by the bulkhead, which is not a call of the dependency: counted
// as successes, the refusals kept the breaker closed for ever (395
// timeouts, 0 successes, ~107 000 rejections in 60 s).
func TestBreakerOpensBehindAFullBulkhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := New(Config{Name: "sms", MaxConcurrent: 2, Timeout: 300 * time.Millisecond, MaxAttempts: 1})
		require.NoError(t, err)
		start := time.Now()
		var opened time.Duration
		g.OnTransition(func(tr Transition) {
			if tr.To == "open" && opened == 0 {
				opened = time.Since(start)
			}
		})
		hang := sleepCall(time.Hour, nil)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for time.Since(start) < 10*time.Second {
					if _, err := Call(context.Background(), g, hang); !errors.Is(err, ErrTimeout) {
						time.Sleep(time.Millisecond) // the next request
					}
				}
			})
		}
		wg.Wait()
		st := g.Status()
		t.Logf("10 s: %d timeouts, %d ok, %d bulkhead rejections, %d breaker rejections, state %s",
			st.Timeouts, st.OK, st.Rejected["bulkhead"], st.Rejected["breaker"], st.State)
		require.NotZero(t, opened, "the breaker opened")
		// 10 timeouts, two at a time, 300 ms each.
		assert.Equal(t, 1500*time.Millisecond, opened)
		assert.Zero(t, st.OK)
	})
}

// TestBreakerHalfOpenClosesOnlyOnRealTrials: trial callers that cancel
// say nothing about the dependency; the breaker stays half-open until
// three trials succeed.
func TestBreakerHalfOpenClosesOnlyOnRealTrials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "sms", MaxAttempts: 1, Timeout: 300 * time.Millisecond})
		for g.Allows() {
			Call(context.Background(), g, sleepCall(time.Hour, nil))
		}
		time.Sleep(30 * time.Second)
		require.True(t, g.Allows())
		for range 3 { // three trials whose callers go away
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(10*time.Millisecond, cancel)
			_, err := Call(ctx, g, sleepCall(100*time.Millisecond, nil))
			require.ErrorIs(t, err, context.Canceled)
			cancel()
		}
		assert.Equal(t, "half-open", g.Status().State, "no trial succeeded")
		assert.True(t, g.Allows(), "the cancelled trials gave their places back")
		for range 3 {
			_, err := Call(context.Background(), g, sleepCall(100*time.Millisecond, nil))
			require.NoError(t, err)
		}
		assert.Equal(t, "closed", g.Status().State)
	})
}

// TestBreakerIgnoresCallersDeadlines: callers with 50 ms left call a
// healthy dependency answering in 200 ms, within the guard's 1 s timeout.
// The calls end with the callers' deadlines, which says nothing about the
// dependency: the breaker stays closed, and no attempt timed out.
func TestBreakerIgnoresCallersDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "search", MaxAttempts: 1, Timeout: time.Second})
		for range 40 {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err := Call(ctx, g, sleepCall(200*time.Millisecond, nil))
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		st := g.Status()
		assert.Equal(t, "closed", st.State)
		assert.Zero(t, st.Timeouts)
		assert.Zero(t, st.Rejected["breaker"])
	})
}

// TestBreakerCountsDependencyErrors: an error the dependency's client
// returns — a broken answer, an internal error — is a failure even when
// it is not worth a retry; an answer that refuses the request (400, 404)
// is the dependency working.
func TestBreakerCountsDependencyErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		open bool
	}{
		{io.ErrUnexpectedEOF, true},
		{errors.New("provider: internal error"), true},
		{&StatusError{Status: 500}, true},
		{&StatusError{Status: 503}, true},
		{&StatusError{Status: 429}, true},
		{&StatusError{Status: 400}, false},
		{&StatusError{Status: 404}, false},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			g, _ := New(Config{Name: "api", MaxAttempts: 1, Timeout: time.Second})
			for range 20 {
				Call(context.Background(), g, func(context.Context) (int, error) { return 0, c.err })
			}
			assert.Equal(t, c.open, g.Status().State == "open", "state %s", g.Status().State)
		})
	}
}

// TestBreakerPanickingTrialGivesItsPlaceBack: a half-open trial whose fn
// panics proves nothing; its place goes to the next trial, and the bulkhead
// place is freed.
func TestBreakerPanickingTrialGivesItsPlaceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "sms", MaxAttempts: 1, MaxConcurrent: 3, Timeout: 300 * time.Millisecond})
		for g.Allows() {
			Call(context.Background(), g, sleepCall(time.Hour, nil))
		}
		time.Sleep(30 * time.Second)
		for range 3 {
			func() {
				defer func() { _ = recover() }()
				Call(context.Background(), g, func(context.Context) (int, error) { panic("bug") })
			}()
		}
		for range 3 {
			_, err := Call(context.Background(), g, sleepCall(10*time.Millisecond, nil))
			require.NoError(t, err)
		}
		assert.Equal(t, "closed", g.Status().State)
	})
}

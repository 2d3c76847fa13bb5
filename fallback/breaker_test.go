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

// TestBreakerOpensWhenCallersGiveUpAfterTheDependencysTime: callers with
// 800-ms deadlines; a dependency that answered in 200 ms (the guard's
// timeout about 300 ms) hangs. Each attempt ends with its caller's
// deadline once the timeout has gone back to MaxTimeout (1 s, no success
// for 30 s); the caller waited longer than the dependency takes to
// answer, which is a failure: the breaker opens, and its trials fail
// and reopen it — it does not sit half-open with trials given back (it
// did for the remaining minutes, each trial waiting its caller's 800 ms).
func TestBreakerOpensWhenCallersGiveUpAfterTheDependencysTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "sms", MaxAttempts: 1})
		call := func(fn func(context.Context) (string, error)) error {
			ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
			defer cancel()
			_, err := Call(ctx, g, fn)
			return err
		}
		for range 50 {
			require.NoError(t, call(sleepCall(200*time.Millisecond, nil)))
		}
		hang := sleepCall(time.Hour, nil)
		start := time.Now()
		for time.Since(start) < 3*time.Minute {
			if errors.Is(call(hang), ErrOpen) {
				time.Sleep(100 * time.Millisecond)
			}
		}
		st := g.Status()
		t.Logf("3 min hung: %v, state %s", st.TransitionTotals, st.State)
		assert.GreaterOrEqual(t, st.TransitionTotals[[2]string{"half-open", "open"}], uint64(3), "each half-open's trials fail")
	})
}

// TestBreakerAnswerAfterTheTimeoutIsATimeout: a dependency whose client
// ignores its context and answers after the guard's timeout did not
// answer in its time: a timeout, a failure (counted a success, a trial
// that came back an hour late closed a half-open breaker).
func TestBreakerAnswerAfterTheTimeoutIsATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "sms", MaxAttempts: 1, Timeout: 300 * time.Millisecond})
		late := func(context.Context) (string, error) { time.Sleep(time.Second); return "ok", nil }
		for range 10 {
			_, err := Call(context.Background(), g, late)
			require.ErrorIs(t, err, ErrTimeout)
		}
		st := g.Status()
		assert.Equal(t, uint64(10), st.Timeouts)
		assert.Zero(t, st.OK)
		assert.Equal(t, "open", st.State)
	})
}

// TestBreakerListenerPanicGivesThePlaceBack: a listener that panics on
// open → half-open (recovered by the caller, as net/http recovers a
// handler's) does not keep the trial's place: three good trials close
// the breaker (it stayed half-open, refusing every call, for ever).
func TestBreakerListenerPanicGivesThePlaceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "sms", MaxAttempts: 1, Timeout: 300 * time.Millisecond})
		once := false
		g.OnTransition(func(tr Transition) {
			if tr.To == "half-open" && !once {
				once = true
				panic("a listener's bug")
			}
		})
		for range 10 {
			Call(context.Background(), g, sleepCall(time.Hour, nil))
		}
		require.Equal(t, "open", g.Status().State)
		time.Sleep(30 * time.Second)
		func() {
			defer func() { _ = recover() }()
			Call(context.Background(), g, sleepCall(10*time.Millisecond, nil))
		}()
		for range 3 {
			_, err := Call(context.Background(), g, sleepCall(10*time.Millisecond, nil))
			require.NoError(t, err)
		}
		assert.Equal(t, "closed", g.Status().State)
	})
}

package fallback

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sleepCall(d time.Duration, err error) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		select {
		case <-time.After(d):
			return "ok", err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

func TestTimeoutFromMeasuredP99(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := New(Config{Name: "inventory", MaxTimeout: 5 * time.Second})
		require.NoError(t, err)
		assert.Equal(t, 5*time.Second, g.Timeout(), "before any measurement: MaxTimeout")
		for range 50 {
			_, err := Call(context.Background(), g, sleepCall(200*time.Millisecond, nil))
			require.NoError(t, err)
		}
		assert.InDelta(t, float64(300*time.Millisecond), float64(g.Timeout()), float64(10*time.Millisecond), "p99 200 ms × 1.5")

		// Never beyond the caller's remaining deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = Call(ctx, g, sleepCall(time.Second, nil))
		assert.Error(t, err)
		assert.LessOrEqual(t, time.Since(start), 100*time.Millisecond)
	})
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "sms", MaxAttempts: 1, Timeout: 300 * time.Millisecond})
		var transitions []string
		g.OnTransition(func(tr Transition) { transitions = append(transitions, tr.From+"→"+tr.To) })
		slow := sleepCall(30*time.Second, nil)
		start := time.Now()
		calls := 0
		for ; calls < 100 && g.Allows(); calls++ {
			_, err := Call(context.Background(), g, slow)
			require.ErrorIs(t, err, ErrTimeout)
		}
		assert.Equal(t, 10, calls, "10 failures of the last 20 open it")
		assert.Equal(t, 3*time.Second, time.Since(start), "10 × the 300 ms timeout")
		begin := time.Now()
		_, err := Call(context.Background(), g, slow)
		assert.ErrorIs(t, err, ErrOpen)
		assert.Zero(t, time.Since(begin), "open: refused at once")

		time.Sleep(29 * time.Second)
		assert.False(t, g.Allows(), "open, within its delay")
		time.Sleep(time.Second)
		// The delay is over: a caller that asks before calling (an outbox
		// drain, with nothing else calling) must be let through to make the
		// trial — the breaker itself moves to half-open only on a call.
		assert.True(t, g.Allows(), "the delay is over: a trial may go")
		for range 3 { // half-open: 3 trials
			_, err := Call(context.Background(), g, sleepCall(10*time.Millisecond, nil))
			require.NoError(t, err)
		}
		assert.Equal(t, "closed", g.Status().State)
		assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed"}, transitions)
		assert.Equal(t, uint64(1), g.Status().Rejected["breaker"])
	})
}

func TestBulkheadOverflowFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "payment", MaxConcurrent: 2, MaxAttempts: 1, Timeout: time.Minute})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { Call(context.Background(), g, sleepCall(time.Second, nil)) })
		}
		synctest.Wait()
		start := time.Now()
		_, err := Call(context.Background(), g, sleepCall(time.Second, nil))
		assert.ErrorIs(t, err, ErrFull)
		assert.Zero(t, time.Since(start))
		wg.Wait()
		assert.Equal(t, uint64(1), g.Status().Rejected["bulkhead"])
	})
}

func TestRetryOnlyRetryableWithBackoffAndRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "api", MaxAttempts: 3, Timeout: time.Second})
		n := 0
		_, err := Call(context.Background(), g, func(context.Context) (int, error) {
			n++
			return 0, &StatusError{Status: 400}
		})
		assert.Error(t, err)
		assert.Equal(t, 1, n, "400 is never retried")

		n = 0
		start := time.Now()
		v, err := Call(context.Background(), g, func(context.Context) (int, error) {
			n++
			if n < 3 {
				return 0, &StatusError{Status: 503, RetryAfter: 700 * time.Millisecond}
			}
			return 42, nil
		})
		require.NoError(t, err)
		assert.Equal(t, 42, v)
		assert.Equal(t, 3, n)
		assert.GreaterOrEqual(t, time.Since(start), 1400*time.Millisecond, "Retry-After honoured twice")
	})
}

func TestRetryBudgetCapsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewRetryBudget(0.1, 2)
		g, _ := New(Config{Name: "flaky", MaxAttempts: 4, Budget: b, Timeout: time.Second, BreakerWindow: 1000, BreakerFailures: 1000})
		attempts := 0
		fail := func(context.Context) (int, error) { attempts++; return 0, &StatusError{Status: 503} }
		const calls = 100
		for range calls {
			Call(context.Background(), g, fail)
		}
		retries := attempts - calls
		assert.LessOrEqual(t, float64(retries), 0.1*calls+2+1, "retries stay within 10 %% of calls (+ the burst)")
		assert.Greater(t, g.Status().Rejected["budget"], uint64(50))
		_, err := Call(context.Background(), g, fail)
		var se *StatusError
		assert.True(t, errors.As(err, &se), "the dependency's last error comes back: %v", err)
	})
}

func TestSourcesSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := New(Config{Name: "s", MaxAttempts: 6, Backoff: SourcesSchedule, Cap: time.Minute, Timeout: time.Second,
			Budget: NewRetryBudget(1, 100), BreakerWindow: 100, BreakerFailures: 100})
		var at []time.Time
		Call(context.Background(), g, func(context.Context) (int, error) {
			at = append(at, time.Now())
			return 0, &StatusError{Status: 503}
		})
		require.Len(t, at, 6)
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			base := time.Duration(1<<(i-1)) * time.Second
			assert.GreaterOrEqual(t, gap, base, "retry %d", i)
			assert.Less(t, gap, base+time.Second, "retry %d: 2^n s + under 1 s", i)
		}
	})
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&StatusError{Status: 503}, true}, {&StatusError{Status: 429}, true}, {&StatusError{Status: 400}, false},
		{&StatusError{Status: 401}, false}, {&StatusError{Status: 404}, false}, {ErrTimeout, true},
		{context.DeadlineExceeded, true}, {context.Canceled, false}, {ErrOpen, false}, {ErrFull, false}, {nil, false},
	} {
		assert.Equal(t, c.want, Retryable(c.err), "%v", c.err)
	}
}

// BenchmarkGuardOverhead: the success path through the guard against the
// bare call, in the same run.
func BenchmarkGuardOverhead(b *testing.B) {
	work := func(context.Context) (int, error) { return 1, nil }
	b.Run("bare", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			work(ctx)
		}
	})
	b.Run("guard", func(b *testing.B) {
		g, _ := New(Config{Name: "bench", Timeout: time.Second})
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Call(ctx, g, work); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestTimeoutDoesNotRatchetOnHangs: 5 % of calls hang. The timeout comes
// from the successes' p99 (200 ms × 1.5), and the hangs show up as the
// timeout rate; recording a timed-out call's duration as if it were a
// latency would push the p99 to the timeout itself, and so the timeout up
// by 1.5 × a second until MaxTimeout.
func TestTimeoutDoesNotRatchetOnHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, err := New(Config{Name: "inventory", MaxAttempts: 1, MaxTimeout: 5 * time.Second})
		require.NoError(t, err)
		var timeouts, highest time.Duration
		for i := range 2000 { // about 7 minutes of virtual time
			call := sleepCall(200*time.Millisecond, nil)
			if i%20 == 19 {
				call = sleepCall(time.Hour, nil) // hangs
			}
			_, err := Call(context.Background(), g, call)
			if errors.Is(err, ErrTimeout) {
				timeouts++
			}
			if i >= 100 {
				highest = max(highest, g.Timeout())
			}
		}
		assert.Equal(t, time.Duration(100), timeouts, "every hang timed out, nothing else did")
		assert.InDelta(t, float64(300*time.Millisecond), float64(highest), float64(15*time.Millisecond),
			"the timeout stays at p99 of successes × 1.5; got up to %v", highest)
		st := g.Status()
		assert.InDelta(t, 0.05, st.TimeoutRate, 0.01, "the hangs are the timeout rate")
		assert.Equal(t, uint64(100), st.Timeouts)
		t.Logf("5 %% hangs: timeout at most %v, timeout rate %.3f", highest, st.TimeoutRate)
	})
}

// TestRetryAfterOverflowIsCapped: a Retry-After too long for an int is
// the longest wait, not none.
func TestRetryAfterOverflowIsCapped(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"99999999999999999999": time.Minute, "120": time.Minute, "7": 7 * time.Second, "0": 0, "-3": 0, "soon": 0,
	} {
		resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}}
		var se *StatusError
		require.ErrorAs(t, CheckResponse(resp), &se)
		assert.Equal(t, want, se.RetryAfter, "Retry-After: %s", v)
	}
}

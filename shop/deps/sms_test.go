package deps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/fallback"
)

func smsBody(to, body string) string {
	b, _ := json.Marshal(SMSRequest{To: to, Body: body})
	return string(b)
}

// TestSMSContractRate offers 1000 messages/s for a second, from many
// clients, to the 500/s contract (burst 50): about 550 pass, the rest get
// 429 with Retry-After.
func TestSMSContractRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSMSProvider(Options{})
		var mu sync.Mutex
		codes := map[int]int{}
		var last429 http.Header
		var wg sync.WaitGroup
		for i := range 1000 {
			wg.Go(func() {
				r := serveRecordedFrom(s, fmt.Sprintf("10.0.%d.%d:1234", i/250, i%250),
					smsBody("+8613800000000", "hi"), fmt.Sprintf("k%d", i))
				mu.Lock()
				codes[r.Code]++
				if r.Code == http.StatusTooManyRequests {
					last429 = r.Header()
				}
				mu.Unlock()
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		assert.InDelta(t, 550, codes[http.StatusCreated], 2, "%v", codes)
		assert.Equal(t, 1000, codes[http.StatusCreated]+codes[http.StatusTooManyRequests], "%v", codes)
		st := s.Stats()
		assert.Equal(t, int64(codes[http.StatusTooManyRequests]), st.Rejected429)
		assert.Equal(t, int64(codes[http.StatusCreated]), st.Accepted)
		assert.Equal(t, st.Accepted, st.Delivered)
		require.NotNil(t, last429)
		assert.Equal(t, "1", last429.Get("Retry-After"))
		assert.Equal(t, "application/problem+json", last429.Get("Content-Type"))

		// A second later the bucket is full again: 50 pass at once.
		time.Sleep(time.Second)
		burst := map[int]int{}
		var p problem
		for i := range 51 {
			wg.Go(func() {
				r := serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", fmt.Sprintf("b%d", i))
				mu.Lock()
				defer mu.Unlock()
				burst[r.Code]++
				if r.Code == http.StatusTooManyRequests {
					assert.NoError(t, json.Unmarshal(r.Body.Bytes(), &p))
				}
			})
		}
		wg.Wait()
		assert.Equal(t, map[int]int{http.StatusCreated: 50, http.StatusTooManyRequests: 1}, burst)
		assert.Equal(t, int64(2), p.RetryAfterMS, "one token every 2 ms")
		assert.Contains(t, p.Detail, "500 messages per second")

		// The contract is a knob.
		require.NoError(t, s.UpdateFault(func(f *SMSFault) { f.Rate, f.Burst = 1, 1 }))
		time.Sleep(time.Second)
		assert.Equal(t, http.StatusCreated, serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", "c1").Code)
		r := serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", "c2")
		assert.Equal(t, http.StatusTooManyRequests, r.Code)
		assert.Equal(t, "1", r.Header().Get("Retry-After"))
	})
}

// serveRecordedFrom sends an SMS from a client address, without a network.
func serveRecordedFrom(h http.Handler, remote, body, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
	r.Host = "127.0.0.1"
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = remote
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestSMSClientDisconnects is the sources' incident: the provider goes to
// 30 s, the client times out after 1 s and retries with the same key. The
// provider delivers the first request's message at 30 s anyway, once; the
// retries are absorbed.
func TestSMSClientDisconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSMSProvider(Options{})
		srv := servePipe(s, s.Close)
		defer srv.close()
		require.NoError(t, s.UpdateFault(func(f *SMSFault) { f.Slow = true }))
		c := SMSClient{BaseURL: srv.URL, HTTP: srv.client(time.Second)}
		const to, text, key = "+8613800000000", "Order 42 confirmed", "order-42"
		ctx := context.Background()
		start := time.Now()

		for range 4 { // the first try and 3 retries, all timing out
			err := c.Send(ctx, to, text, key)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			assert.True(t, ne.Timeout(), "%v", err)
			assert.True(t, fallback.Retryable(err))
			var se *StatusError
			assert.False(t, errors.As(err, &se))
		}
		synctest.Wait()
		assert.Equal(t, 4*time.Second, time.Since(start))
		st := s.Stats()
		assert.Equal(t, SMSStats{Requests: 4, Accepted: 4, DuplicatesAbsorbed: 3, Pending: 1}, st)
		assert.Equal(t, 0, s.Delivered(key))

		// Delivered at the end of the first request's latency, not before.
		time.Sleep(30*time.Second - time.Since(start) - time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 0, s.Delivered(key))
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 1, s.Delivered(key))

		// The provider recovers; the outbox's next retry is answered 200,
		// and still not delivered again.
		s.ResetFault()
		before := time.Now()
		require.NoError(t, c.Send(ctx, to, text, key))
		assert.Equal(t, 200*time.Millisecond, time.Since(before))
		time.Sleep(time.Minute) // every timer has fired
		synctest.Wait()
		assert.Equal(t, 1, s.Delivered(key))
		assert.Equal(t, 1, s.DeliveredContent(to, text))
		st = s.Stats()
		assert.Equal(t, SMSStats{Requests: 5, Accepted: 5, Delivered: 1, DuplicatesAbsorbed: 4}, st)

		// Over HTTP, the duplicate says so.
		r := serveRecorded(s, "POST", "/v1/messages", smsBody(to, text), "Idempotency-Key", key)
		require.Equal(t, http.StatusOK, r.Code)
		var m SMSMessage
		require.NoError(t, json.Unmarshal(r.Body.Bytes(), &m))
		assert.True(t, m.Duplicate)
		assert.Equal(t, "delivered", m.Status)

		// A client that retries with a fresh key is what a handset shows
		// as a duplicate.
		require.NoError(t, c.Send(ctx, to, text, "order-42-again"))
		assert.Equal(t, 2, s.DeliveredContent(to, text))
		w := serveRecorded(s, "GET", "/admin/stats", "")
		var got map[string]int64
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
		assert.Equal(t, map[string]int64{
			"requests": 7, "accepted": 7, "delivered": 2, "duplicates_absorbed": 5, "pending": 0,
			"rejected_429": 0, "failed": 0, "invalid": 0, "conflicts": 0, "aborted": 0,
			"delivered_twice": 0, "repeated_content": 1,
		}, got)
	})
}

// TestSMSDuplicateWhileSending: a retry that arrives while the first
// request is still being delivered is answered "sending", and absorbed.
func TestSMSDuplicateWhileSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSMSProvider(Options{})
		require.NoError(t, s.UpdateFault(func(f *SMSFault) { f.Slow = true }))
		go serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", "k")
		time.Sleep(time.Second)
		s.ResetFault() // the first request keeps its 30 s; the retry takes 200 ms
		r := serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", "k")
		assert.Equal(t, http.StatusOK, r.Code)
		assert.Contains(t, r.Body.String(), `"status":"sending"`)
		assert.Equal(t, 0, s.Delivered("k"))
		time.Sleep(time.Minute)
		assert.Equal(t, 1, s.Delivered("k"))
		assert.Equal(t, int64(1), s.Stats().DuplicatesAbsorbed)
		r = serveRecorded(s, "GET", "/admin/deliveries", "")
		assert.JSONEq(t, `{"k":1}`, r.Body.String(), "the per-key counts")
	})
}

func TestSMSBadRequests(t *testing.T) {
	s := NewSMSProvider(Options{Sleep: func(context.Context, time.Duration) error { return nil }})
	for _, c := range []struct {
		name, body, key string
		status          int
		detail          string
	}{
		{"no key", smsBody("+1", "x"), "", 400, "the Idempotency-Key header is required"},
		{"no number", smsBody("", "x"), "k", 400, "to: required"},
		{"no text", smsBody("+1", ""), "k", 400, "body: required"},
		{"unknown field", `{"to":"+1","body":"x","from":"shop"}`, "k", 400, `unknown field "from"`},
		{"not an object", `"x"`, "k", 400, "want a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := serveRecorded(s, "POST", "/v1/messages", c.body, "Idempotency-Key", c.key)
			assert.Equal(t, c.status, r.Code)
			assert.Equal(t, "application/problem+json", r.Header().Get("Content-Type"))
			var p problem
			require.NoError(t, json.Unmarshal(r.Body.Bytes(), &p))
			assert.Contains(t, p.Detail, c.detail)
		})
	}
	// A key reused for another text is a conflict, not a duplicate.
	require.Equal(t, http.StatusCreated, serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", "k").Code)
	r := serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "y"), "Idempotency-Key", "k")
	assert.Equal(t, http.StatusConflict, r.Code)
	st := s.Stats()
	assert.Equal(t, int64(5), st.Invalid)
	assert.Equal(t, int64(1), st.Conflicts)
	assert.Equal(t, int64(0), st.DuplicatesAbsorbed)

	// The client refuses to send without a key, before any request.
	err := SMSClient{BaseURL: "http://127.0.0.1:1"}.Send(context.Background(), "+1", "x", "")
	require.ErrorContains(t, err, "idempotency key is required")
}

// TestSMSShutdown: Shutdown waits for the messages accepted, even those
// whose client left; Close abandons them.
func TestSMSShutdown(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(fmt.Sprint("graceful=", graceful), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := NewSMSProvider(Options{})
				srv := servePipe(s, s.Close)
				defer srv.close()
				require.NoError(t, s.UpdateFault(func(f *SMSFault) { f.Slow = true }))
				c := SMSClient{BaseURL: srv.URL, HTTP: srv.client(time.Second)}
				start := time.Now()
				require.Error(t, c.Send(context.Background(), "+1", "x", "k"))
				if graceful {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					require.NoError(t, srv.Shutdown(ctx))
					assert.GreaterOrEqual(t, time.Since(start), 30*time.Second)
					assert.Equal(t, 1, s.Delivered("k"))
				} else {
					require.NoError(t, srv.Server.Close())
					synctest.Wait()
					assert.Equal(t, 0, s.Delivered("k"))
					assert.Equal(t, int64(1), s.Stats().Aborted)
					assert.Equal(t, int64(0), s.Stats().Pending)
				}
				r := serveRecorded(s, "POST", "/v1/messages", smsBody("+1", "x"), "Idempotency-Key", "k2")
				assert.Equal(t, http.StatusServiceUnavailable, r.Code, "closed")
			})
		})
	}
}

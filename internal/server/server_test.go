package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

// start serves h as New builds it, with the body deadline d instead of
// BodyTimeout (a test waits for it).
func start(t *testing.T, h http.Handler, d time.Duration) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = New(h)
	srv.Config.Handler = BodyDeadline(h, d)
	srv.Listener = Limit(srv.Listener)
	srv.Start()
	t.Cleanup(srv.Close)
	return hostile.Addr(t, srv.URL)
}

// TestBodyDeadlineHolds: a handler that reads its body with no deadline
// of its own (the push source's io.ReadAll), and one that answers
// without reading it at all: a body that stalls ends both with a closed
// connection at the deadline.
func TestBodyDeadlineHolds(t *testing.T) {
	const d = 300 * time.Millisecond
	reads := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "the body stalled", http.StatusRequestTimeout)
		}
	}), d)
	ignores := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused", http.StatusForbidden)
	}), d)
	for name, addr := range map[string]string{"reads": reads, "ignores": ignores} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := hostile.StalledBody(t, addr, "POST", "/", nil, "{", 100)
			resp, err := hostile.ReadResponse(t, c, d+hostile.Slack)
			require.NoError(t, err)
			assert.True(t, resp.Close, "the connection closes after the answer")
			hostile.RequireClosed(t, c, hostile.Slack, "a stalled body")
		})
	}
}

// TestAWholeBodyClearsTheDeadline: a body read to its end leaves no
// deadline behind: a handler that works on after it, and the next request
// on the connection, are not cut.
func TestAWholeBodyClearsTheDeadline(t *testing.T) {
	const d = 200 * time.Millisecond
	addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(2 * d):
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}), d)
	c := hostile.Dial(t, addr)
	for range 2 {
		hostile.Send(t, c, "POST / HTTP/1.1\r\nHost: "+addr+"\r\nContent-Length: 2\r\n\r\n{}")
		resp, err := hostile.ReadResponse(t, c, 2*d+hostile.Slack)
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.False(t, resp.Close)
	}
}

// TestHeaderBounds: headers over MaxHeaderBytes are refused (431) and
// the connection closed; headers that never end are cut.
func TestHeaderBounds(t *testing.T) {
	addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), BodyTimeout)
	resp, c := hostile.HugeHeader(t, addr, "/", 2*MaxHeaderBytes)
	require.NotNil(t, resp, "an answer")
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	hostile.RequireClosed(t, c, hostile.Slack, "huge header")
	resp, _ = hostile.HugeHeader(t, addr, "/", MaxHeaderBytes/2)
	require.NotNil(t, resp)
	assert.Equal(t, 200, resp.StatusCode, "half the cap passes")

	start := time.Now()
	hostile.RequireClosed(t, hostile.SlowHeaders(t, addr), ReadHeaderTimeout+hostile.Slack, "headers that never end")
	assert.GreaterOrEqual(t, time.Since(start), ReadHeaderTimeout-100*time.Millisecond)
}

// TestAbandonClosesAtOnce: a handler that refuses a request without
// reading its body ends the connection right after its answer, not at
// the body deadline.
func TestAbandonClosesAtOnce(t *testing.T) {
	addr := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Abandon(w, r)
		http.Error(w, "refused", http.StatusForbidden)
	}), time.Minute)
	c := hostile.StalledBody(t, addr, "POST", "/", nil, "{", 100)
	resp, err := hostile.ReadResponse(t, c, hostile.Slack)
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.True(t, resp.Close)
	hostile.RequireClosed(t, c, hostile.Slack, "a refused body")
}

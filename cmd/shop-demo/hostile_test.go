package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/shop"
)

// TestHostileClients runs `shop-demo serve` on its defaults over
// 127.0.0.1 in this process (its embedded controller's operator API
// takes the local operator's writes without a token) and attacks it as a
// page in the operator's browser, a slow client and a noisy neighbour
// would.
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the servers' timeouts")
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, errs := newOutput(), newOutput()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--state", t.TempDir()}, out, errs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the shop did not stop")
		}
	})
	select {
	case <-out.first:
	case err := <-done:
		t.Fatalf("the shop exited: %v\n%s", err, errs.buf.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the shop printed no URL")
	}
	out.mu.Lock()
	line, _, _ := strings.Cut(out.buf.String(), "\n")
	out.mu.Unlock()
	base, ok := strings.CutPrefix(line, "shop-demo: serving ")
	base, _, _ = strings.Cut(base, " ")
	base = strings.TrimSuffix(base, "/")
	require.True(t, ok && strings.HasPrefix(base, "http://127.0.0.1:"), "first line %q", line)

	get := func(tb testing.TB, path string) string {
		resp, err := http.Get(base + path)
		require.NoError(tb, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(tb, 200, resp.StatusCode, "%s: %s", path, b)
		return string(b)
	}
	state := func(tb testing.TB) string {
		var st struct {
			Frozen, Shadow bool
			Features       []struct {
				Name     string
				Override any
			}
		}
		require.NoError(tb, json.Unmarshal([]byte(get(tb, "/v1/state")), &st))
		var ev struct{ Events []struct{ Who, Kind string } }
		require.NoError(tb, json.Unmarshal([]byte(get(tb, "/v1/events")), &ev))
		var audited []string // the operators' changes (the controller's own events come and go)
		for _, e := range ev.Events {
			if e.Who != "" {
				audited = append(audited, e.Who+" "+e.Kind)
			}
		}
		b, _ := json.Marshal([]any{st, audited})
		return string(b)
	}
	user := http.Header{"X-User-Id": {"u1"}}
	alive := func(tb testing.TB) { get(tb, "/v1/state") }
	// The shop's rate-limited routes, each keyed by the user (and the
	// flash deal by the address too).
	routes := []struct{ method, path, body string }{
		{"GET", "/api/deals/flash", ""},
		{"POST", "/api/beacon", `{"e":"view"}`},
		{"GET", "/api/products/1", ""},
	}
	hostile.Target{
		Base: base,
		Writes: []hostile.Write{
			{Method: "POST", Path: "/v1/freeze", Body: `{"reason":"pwned"}`},
			{Method: "PUT", Path: "/v1/features/recommendations/override", Body: `{"level":0,"ttl":"168h","reason":"pwned"}`},
			{Method: "PUT", Path: "/v1/shadow", Body: `{"on":true}`},
		},
		State: state,
		Stalls: []hostile.Stall{
			{Method: "POST", Path: "/v1/freeze", Sent: "{", Length: 100, Want: http.StatusRequestTimeout},
			{Method: "POST", Path: "/ofrep/v1/evaluate/flags", Sent: `{"context":`, Length: 1000, Want: http.StatusRequestTimeout, OFREP: true},
			{Method: "POST", Path: "/api/cart", Header: user, Sent: `{"product":`, Length: 1000, Want: http.StatusRequestTimeout},
			{Method: "POST", Path: "/v1/freeze", Header: http.Header{"Origin": {"https://evil.example"}}, Sent: "{", Length: 100, Want: http.StatusForbidden},
		},
		BodyTimeout:    server.BodyTimeout,
		HeaderTimeout:  server.ReadHeaderTimeout,
		MaxHeaderBytes: server.MaxHeaderBytes,
		Stream:         "/v1/stream",
		Streams:        200,
		Alive:          alive,
		Reads:          append(apiReads(), hostile.Read{Method: "GET", Path: "/metrics"}, hostile.Read{Method: "GET", Path: "/dial/"}),

		GC: runtime.GC,
		Floods: []hostile.Flood{
			{
				Name: "distinct user ids near the header cap",
				N:    300,
				Request: func(tb testing.TB, i int) *http.Request {
					r := routes[i%len(routes)]
					req := newRequest(tb, r.method, base+r.path, r.body)
					req.Header.Set(shop.UserHeader, hostile.Key(i, keyBytes))
					return req
				},
				// 429: the flash deal's per-address limit; 503: shed.
				Allow: []int{http.StatusOK, http.StatusNoContent, http.StatusTooManyRequests, http.StatusServiceUnavailable},
				Keep:  2 << 10,
				Why:   "a digest of the key (not the key) in each rate limiter that saw it, the shedder's and the flash deal's per user: a few hundred bytes each",
			},
			{
				Name: "rotating forwarded addresses",
				N:    40,
				Request: func(tb testing.TB, i int) *http.Request {
					req := newRequest(tb, "GET", base+"/api/deals/flash", "")
					req.Header.Set(shop.UserHeader, fmt.Sprintf("bot-%d", i)) // and a new user each time
					req.Header.Set("X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
					return req
				},
				Allow: []int{http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable},
				Keep:  2 << 10,
				Why:   "a digest per user in the per-user limits; the claimed addresses are not kept",
				Check: func(tb testing.TB, statuses []int, elapsed time.Duration) {
					// The shop trusts no proxy: every lookup is 127.0.0.1's,
					// which the per-address limit holds to its burst and rate.
					served, most := hostile.Count(statuses, http.StatusOK), dealAddrBurst+int(dealAddrRate*elapsed.Seconds())+1
					assert.LessOrEqual(tb, served, most, "lookups served in %v with rotating X-Forwarded-For", elapsed)
					tb.Logf("%d of %d served, %d refused by the limit, %d shed", served, len(statuses),
						hostile.Count(statuses, http.StatusTooManyRequests), hostile.Count(statuses, http.StatusServiceUnavailable))
				},
			},
			{
				Name: "rotating addresses",
				N:    500,
				From: hostile.Loopback,
				Request: func(tb testing.TB, i int) *http.Request {
					req := newRequest(tb, "GET", base+"/api/deals/flash", "")
					req.Header.Set(shop.UserHeader, fmt.Sprintf("visitor-%d", i))
					return req
				},
				Allow: []int{http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable},
				Keep:  2 << 10,
				Why:   "an entry per address and per user in the limits (digests): a few hundred bytes each",
				Check: func(tb testing.TB, statuses []int, _ time.Duration) {
					assert.Zero(tb, hostile.Count(statuses, http.StatusTooManyRequests), "each address (and user) has its own allowance")
					tb.Logf("%d of %d served, %d shed", hostile.Count(statuses, http.StatusOK), len(statuses), hostile.Count(statuses, http.StatusServiceUnavailable))
				},
			},
		},
		FloodStreams: []hostile.StreamPath{{Path: "/v1/stream"}, {Path: "/ofrep/v1/events", OFREP: true}},
		MaxStreams:   api.DefaultMaxStreams,
		PerClient:    server.DefaultPerClient,
		StreamKeep:   streamKeep,
		StreamWhy:    streamWhy,
	}.Run(t)
}

// The flash deal's per-address limit (shop.New: burst 10, 2 a second).
const (
	dealAddrBurst = 10
	dealAddrRate  = 2.0
)

// keyBytes is the size of a hostile client key: near the servers' header
// cap (server.MaxHeaderBytes, which net/http enforces with 4 KiB of
// slack).
const keyBytes = 60 << 10

// streamKeep is what an unread stream may keep in the server's heap, and
// streamWhy says why: net/http's buffers for its connection (4 KiB read,
// 4 KiB write, 2 KiB chunking), its request and response (~4 KiB), the
// stream's first state event (~3 KiB), subscriber and timers, and the
// test's own end of the connection (the server runs in the test's
// process): about 19 KiB measured against brownoutd.
const (
	streamKeep = 24 << 10
	streamWhy  = "a connection's buffers (10 KiB), request and response, the stream's state event, subscriber and timers, and the test's end: ~19 KiB measured"
)

// apiReads are the embedded controller's reads, which a loopback shop
// without tokens must refuse to a rebound page or another site's.
func apiReads() []hostile.Read {
	ctx := `{"context":{"targetingKey":"u1"}}`
	return []hostile.Read{
		{Method: "GET", Path: "/v1/state"},
		{Method: "GET", Path: "/v1/history"},
		{Method: "GET", Path: "/v1/events"},
		{Method: "GET", Path: "/v1/stream"},
		{Method: "POST", Path: "/v1/stream/token"},
		{Method: "GET", Path: "/ofrep/v1/events", OFREP: true},
		{Method: "POST", Path: "/ofrep/v1/evaluate/flags", Body: ctx, OFREP: true},
		{Method: "POST", Path: "/ofrep/v1/evaluate/flags/recommendations", Body: ctx, OFREP: true},
	}
}

func newRequest(tb testing.TB, method, url, body string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(tb, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

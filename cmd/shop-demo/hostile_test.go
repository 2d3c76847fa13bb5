package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/server"
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
		Alive:          func(tb testing.TB) { get(tb, "/v1/state") },
	}.Run(t)
}

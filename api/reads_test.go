package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

// reads are the API's reads; ofrep ones answer in OFREP's error shape.
var reads = []struct {
	method, path, body string
	ofrep              bool
}{
	{"GET", "/v1/state", "", false},
	{"GET", "/v1/history", "", false},
	{"GET", "/v1/events", "", false},
	{"GET", "/v1/stream", "", false},
	{"POST", "/v1/stream/token", "", false},
	{"GET", "/ofrep/v1/events", "", true},
	{"POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u1"}}`, true},
	{"POST", "/ofrep/v1/evaluate/flags/recommendations", `{"context":{"targetingKey":"u1"}}`, true},
}

// read sends one read and returns its status and body: the first bytes of
// a stream (the connection is then dropped), or the whole answer.
func read(t *testing.T, base, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hostile.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		if !strings.HasPrefix(path, "/v1/stream") {
			return resp.StatusCode, "" // OFREP's stream says nothing until a change
		}
		sc := bufio.NewScanner(resp.Body) // up to the state event's data
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				return resp.StatusCode, sc.Text()
			}
		}
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTokenlessReadsRefuseRebinding: on a loopback listener without
// tokens, a read from a page whose name was re-pointed at 127.0.0.1 (DNS
// rebinding: a foreign Host) or from a page of another site is refused —
// 403 problem+json, OFREP's shape on OFREP's routes — and the stream's
// shed seed is not in the answer; curl, the dial (same origin), a link the
// operator follows, localhost and [::1] read as before. Before, every
// read answered a rebound page: the state, and the seed on the stream.
func TestTokenlessReadsRefuseRebinding(t *testing.T) {
	f := newFixture(t, Config{Loopback: true})
	_, port, _ := net.SplitHostPort(hostile.Addr(t, f.srv.URL))
	evil := "evil.example:" + port
	for _, r := range reads {
		for _, tc := range []struct {
			name string
			hdr  []string
		}{
			{"rebound page", []string{"Host", evil, "Origin", "http://" + evil, "Sec-Fetch-Site", "same-origin"}},
			{"rebound name, no browser headers", []string{"Host", evil}},
			{"rebound name through a proxy's headers", []string{"Host", evil, "X-Forwarded-For", "127.0.0.1"}},
			{"page of another site", []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors"}},
			{"page of another local port", []string{"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "no-cors"}},
		} {
			what := tc.name + ": " + r.method + " " + r.path
			status, body := read(t, f.srv.URL, r.method, r.path, r.body, tc.hdr...)
			require.Equal(t, http.StatusForbidden, status, "%s: %s", what, body)
			assert.NotContains(t, body, "shed_seed", what)
			if r.ofrep {
				var e struct{ ErrorCode, ErrorDetails string }
				require.NoError(t, json.Unmarshal([]byte(body), &e), what)
				assert.Equal(t, "GENERAL", e.ErrorCode, what)
				assert.NotEmpty(t, e.ErrorDetails, what)
				continue
			}
			var p struct{ Type, Detail string }
			require.NoError(t, json.Unmarshal([]byte(body), &p), what)
			assert.Equal(t, "urn:brownout:api:cross-site", p.Type, what)
			assert.NotEmpty(t, p.Detail, what)
		}
		for _, tc := range []struct {
			name string
			hdr  []string
		}{
			{"curl", nil},
			{"the dial (same origin)", []string{"Origin", f.srv.URL, "Sec-Fetch-Site", "same-origin"}},
			{"a link the operator follows", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}},
			{"typed in", []string{"Sec-Fetch-Site", "none"}},
			{"localhost", []string{"Host", "localhost:" + port}},
			{"[::1]", []string{"Host", "[::1]:" + port}},
		} {
			status, body := read(t, f.srv.URL, r.method, r.path, r.body, tc.hdr...)
			assert.Equal(t, http.StatusOK, status, "%s: %s %s: %s", tc.name, r.method, r.path, body)
		}
	}
	status, body := read(t, f.srv.URL, "GET", "/v1/stream", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "shed_seed", "the local operator's stream carries the seed")
}

// TestTokenedReadsNeedNoHostCheck: where a read carries a token (or the
// listener is not loopback, where tokens are the only guard), the token
// decides, whatever the Host: a proxy that keeps its client's Host in
// front of a loopback daemon with evaluation tokens still serves its
// readers.
func TestTokenedReadsNeedNoHostCheck(t *testing.T) {
	const tok = "eval-token-0123456789"
	f := newFixture(t, Config{Loopback: true, EvalTokens: map[string]string{"shop": tok}})
	for _, r := range reads {
		status, body := read(t, f.srv.URL, r.method, r.path, r.body, "Host", "brownoutd.example", "Authorization", "Bearer "+tok)
		assert.Equal(t, http.StatusOK, status, "%s %s with a token: %s", r.method, r.path, body)
		status, _ = read(t, f.srv.URL, r.method, r.path, r.body, "Host", "brownoutd.example")
		assert.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, status, "%s %s without one", r.method, r.path)
	}
	_, body := read(t, f.srv.URL, "POST", "/v1/stream/token", "", "Authorization", "Bearer "+tok)
	var st struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	status, body := read(t, f.srv.URL, "GET", "/v1/stream?token="+st.Token, "", "Host", "brownoutd.example")
	assert.Equal(t, http.StatusOK, status, "a stream token in the URL (the dial's EventSource): %s", body)

	open := newFixture(t, Config{})
	for _, r := range reads {
		status, body := read(t, open.srv.URL, r.method, r.path, r.body, "Host", "brownoutd.example")
		assert.Equal(t, http.StatusOK, status, "not loopback: %s %s: %s", r.method, r.path, body)
	}
}

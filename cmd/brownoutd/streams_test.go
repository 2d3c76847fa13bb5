package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openEvents opens a stream of the daemon at url and returns its
// response (200 required).
func openEvents(t *testing.T, ctx context.Context, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	return resp
}

// TestStreamsEndOnShutdown: the daemon's streams own their connections
// (api.Config.OwnStreamConns: chunked, Connection: close), and a
// shutdown still gives each one its last "shutdown" event and ends its
// body cleanly — in a daemon of one service and in one of several.
func TestStreamsEndOnShutdown(t *testing.T) {
	dir := t.TempDir()
	services := writeFiles(t, dir, map[string]string{"s.yaml": `
services:
  - name: shop
    features: [{name: recommendations}]
  - name: search
    features: [{name: suggestions}]
`})["s.yaml"]
	for _, tc := range []struct {
		name  string
		args  []string
		paths []string
	}{
		{"one service", nil, []string{"/v1/stream", "/ofrep/v1/events"}},
		{"services", []string{"--config", services}, []string{"/services/shop/v1/stream", "/services/search/ofrep/v1/events"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, append([]string{"--listen", "127.0.0.1:0", "--state-dir", t.TempDir()}, tc.args...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var bodies []*bufio.Reader
			for _, p := range tc.paths {
				resp := openEvents(t, ctx, d.base+p)
				assert.True(t, resp.Close, "%s: Connection: close (the stream owns its connection)", p)
				assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, p)
				bodies = append(bodies, bufio.NewReader(resp.Body))
			}
			d.stop(t)
			for i, br := range bodies {
				rest, err := io.ReadAll(br)
				require.NoError(t, err, "%s: the body ends with its last chunk", tc.paths[i])
				assert.True(t, strings.Contains(string(rest), "event: shutdown\n"), "%s: a last shutdown event: %q", tc.paths[i], rest)
			}
		})
	}
}

// TestMaxStreams: max_streams caps the daemon's streams — past it a
// stream is refused (503, Retry-After) until one ends; in a daemon of
// several services the cap is the daemon's, every service's streams
// counted together.
func TestMaxStreams(t *testing.T) {
	dir := t.TempDir()
	services := writeFiles(t, dir, map[string]string{"s.yaml": `
max_streams: 2
services:
  - name: shop
    features: [{name: recommendations}]
  - name: search
    features: [{name: suggestions}]
`})["s.yaml"]
	for _, tc := range []struct {
		name       string
		args       []string
		open, past []string
	}{
		{"one service", []string{"--max-streams", "2"}, []string{"/v1/stream", "/ofrep/v1/events"}, []string{"/v1/stream", "/ofrep/v1/events"}},
		{"services", []string{"--config", services}, []string{"/services/shop/v1/stream", "/services/search/ofrep/v1/events"},
			[]string{"/services/shop/ofrep/v1/events", "/services/search/v1/stream"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, append([]string{"--listen", "127.0.0.1:0", "--state-dir", t.TempDir()}, tc.args...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			first, cancelFirst := context.WithCancel(ctx)
			openEvents(t, first, d.base+tc.open[0])
			openEvents(t, ctx, d.base+tc.open[1])
			for _, p := range tc.past {
				resp, err := http.Get(d.base + p)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s past the cap: %s", p, body)
				assert.NotEmpty(t, resp.Header.Get("Retry-After"), p)
				assert.Contains(t, string(body), "follows 2 streams already", p)
			}
			cancelFirst()
			require.Eventually(t, func() bool {
				resp, err := http.Get(d.base + tc.past[0])
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 5*time.Second, 20*time.Millisecond, "a place freed is taken")
		})
	}
}

// TestMaxConns: max_conns is the listener's cap, which /metrics says:
// with 64, from 56 open connections on (an eighth under it) each new one
// closes the connection idle the longest, where the default cap (4 096)
// would keep them all.
func TestMaxConns(t *testing.T) {
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--max-conns", "64")
	resp, err := http.Get(d.base + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(metrics), "# HELP brownout_http_connections_open Connections open on the server's listener (at most 64, 1024 from one client).")
	addr := strings.TrimPrefix(d.base, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 64 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode) // the connection is idle now
	}
	closed := false // the oldest first: they were idle the longest
	for _, c := range conns[:16] {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closed = true
			break
		}
	}
	assert.True(t, closed, "idle connections closed near max_conns 64")
}

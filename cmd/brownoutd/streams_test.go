package main

import (
	"bufio"
	"context"
	"io"
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

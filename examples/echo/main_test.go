package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRun: the echo example serves its page with every section at full
// brightness, and the dial on its own listener.
func TestRun(t *testing.T) {
	app, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dial, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, app, dial) }()

	body := func(url string) string {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, url)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "product page\nrecommendations: …\nreviews: …\n", body("http://"+app.Addr().String()+"/?user=alice"))
	assert.Contains(t, body("http://"+dial.Addr().String()+"/v1/state"), `"reviews"`)
	cancel()
	require.NoError(t, <-done)
}

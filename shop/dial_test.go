package shop

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDialMounted: in embedded mode the shop serves the operator dial at
// /dial/ (its files relative to it, the API at /v1/ beside it).
func TestDialMounted(t *testing.T) {
	_, srv := newShop(t, Brownout)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(srv.URL + "/dial")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	assert.Equal(t, "/dial/", resp.Header.Get("Location"))
	for _, p := range []string{"/dial/", "/dial/dial.js", "/dial/vendor/uPlot-1.6.32.iife.min.js"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode, p)
		assert.NotEmpty(t, b, p)
	}
	resp, err = http.Get(srv.URL + "/dial/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
}

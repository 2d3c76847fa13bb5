package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDialFront: the page at /dial/; /v1/ says what runs until the
// brownout run's shop is followed, then reaches it, and says so again
// when the run is over.
func TestDialFront(t *testing.T) {
	f, err := startDialFront("127.0.0.1:0")
	require.NoError(t, err)
	defer f.close()
	base := strings.SplitN(f.url, "/dial/", 2)[0]
	assert.Contains(t, f.url, "/dial/?label=11.11+sale%2C+brownout+run")
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/dial/")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "brownout")
	detail := func() string {
		code, body := get("/v1/state")
		assert.Equal(t, 503, code)
		var p struct{ Detail string }
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		return p.Detail
	}
	f.running("shed")
	assert.Equal(t, "this dial follows the brownout run; now running the shed run", detail())

	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "shop "+r.URL.Path) }))
	defer shop.Close()
	f.running("brownout")
	f.follow(shop.URL)
	code, body = get("/v1/state")
	assert.Equal(t, 200, code)
	assert.Equal(t, "shop /v1/state", body)
	f.follow("")
	assert.Contains(t, detail(), "the brownout run is over")
}

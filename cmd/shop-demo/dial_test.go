package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/signals"
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

// TestDialFrontKeepsTheBrowsersOrigin: behind the front, an API that
// takes tokenless writes on loopback sees what the browser sent to the
// front: the dial's own same-origin write passes, a cross-site or
// rebound one is refused.
func TestDialFrontKeepsTheBrowsersOrigin(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}}})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl, Loopback: true})
	require.NoError(t, err)
	shop := httptest.NewServer(a.Handler())
	defer shop.Close()
	f, err := startDialFront("127.0.0.1:0")
	require.NoError(t, err)
	defer f.close()
	f.follow(shop.URL)
	base := strings.SplitN(f.url, "/dial/", 2)[0]
	_, port, _ := net.SplitHostPort(hostile.Addr(t, base))
	c := hostile.Client()
	for _, at := range hostile.Attacks(port) {
		if at.Header["X-Forwarded-For"] != "" {
			continue // a local client's own claim: the front is the proxy, and drops it
		}
		resp, err := c.Do(at.Request(t, "POST", base+"/v1/freeze", `{}`))
		require.NoError(t, err)
		hostile.RequireProblem(t, resp, http.StatusForbidden, "through the front: "+at.Name)
	}
	// A client of the front that is not on this machine.
	f.mu.Lock()
	p := f.mu.proxy
	f.mu.Unlock()
	req := httptest.NewRequest("POST", base+"/v1/freeze", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "203.0.113.7:40000"
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	hostile.RequireProblem(t, rec.Result(), http.StatusForbidden, "a remote client of the front")
	assert.NotEqual(t, dimmer.Frozen, ctl.State().Mode)
	req = hostile.Attack{Header: map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin"}}.Request(t, "POST", base+"/v1/freeze", `{"reason":"from the dial"}`)
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "the dial's own write, through the front")
	assert.Equal(t, dimmer.Frozen, ctl.State().Mode)
}

// TestDialFrontRefusesRebinding: the sale's shop behind the front takes
// any Host (it is not told it listens on loopback), so the front, on
// loopback, refuses a page whose name was re-pointed at it, as a loopback
// daemon does: the state and the stream (with its shed seed) are not
// read through it; the dial's own reads are.
func TestDialFrontRefusesRebinding(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}}})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl})
	require.NoError(t, err)
	shop := httptest.NewServer(a.Handler())
	defer shop.Close()
	f, err := startDialFront("127.0.0.1:0")
	require.NoError(t, err)
	defer f.close()
	f.follow(shop.URL)
	base := strings.SplitN(f.url, "/dial/", 2)[0]
	_, port, _ := net.SplitHostPort(hostile.Addr(t, base))
	c := hostile.Client()
	for _, path := range []string{"/v1/state", "/v1/stream", "/dial/"} {
		req, err := http.NewRequest("GET", base+path, nil)
		require.NoError(t, err)
		req.Host = "evil.example:" + port
		resp, err := c.Do(req)
		require.NoError(t, err)
		hostile.RequireProblem(t, resp, http.StatusForbidden, "a rebound page: "+path)
	}
	req, err := http.NewRequest("GET", base+"/v1/state", nil)
	require.NoError(t, err)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "the dial's own read")
}

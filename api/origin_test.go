package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/local"
)

// writes are the operators' writes, each with a valid body.
var writes = []struct{ method, path, body string }{
	{"POST", "/v1/freeze", `{"reason":"pwned"}`},
	{"POST", "/v1/unfreeze", `{}`},
	{"PUT", "/v1/features/reviews/override", `{"level":0,"ttl":"168h","reason":"pwned"}`},
	{"DELETE", "/v1/features/recommendations/override", `{}`},
	{"PUT", "/v1/shadow", `{"on":true}`},
}

// TestTokenlessWritesRefuseBrowsers: on a loopback listener without
// tokens, a write that a page in the operator's browser could send —
// cross-site, from another local port, a form or text/plain post, an
// untyped body, a rebound name — is refused (403 problem+json), changes
// nothing, saves nothing and audits nothing; curl's and the dial's own
// writes pass.
func TestTokenlessWritesRefuseBrowsers(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Config{Loopback: true, StateDir: dir})
	_, err := f.ctl.PinAt(f.now, "recommendations", 0.5, 3600e9, "standing")
	require.NoError(t, err)
	f.api.Save()
	saved, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	gen := f.ctl.State().Generation
	_, port, _ := net.SplitHostPort(hostile.Addr(t, f.srv.URL))
	c := hostile.Client()
	for _, a := range hostile.Attacks(port) {
		for _, w := range writes {
			resp, err := c.Do(a.Request(t, w.method, f.srv.URL+w.path, w.body))
			require.NoError(t, err)
			p := hostile.RequireProblem(t, resp, http.StatusForbidden, a.Name+": "+w.method+" "+w.path)
			assert.Regexp(t, "cross-site|json-required|proxied", p.Type, a.Name)
		}
	}
	assert.Equal(t, gen, f.ctl.State().Generation, "nothing changed")
	assert.False(t, f.api.Frozen())
	_, m := f.do(t, "GET", "/v1/events", "")
	assert.Empty(t, m["events"], "nothing audited")
	now, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Equal(t, string(saved), string(now), "nothing saved")

	origin := f.srv.URL
	local := strings.Replace(f.srv.URL, "127.0.0.1", "localhost", 1)
	for _, tc := range []struct {
		name string
		hdr  []string
	}{
		{"curl", nil},
		{"the dial (same origin)", []string{"Origin", origin, "Sec-Fetch-Site", "same-origin"}},
		{"typed in by the user", []string{"Sec-Fetch-Site", "none"}},
		{"localhost", []string{"Host", strings.TrimPrefix(local, "http://"), "Origin", local}},
		{"a charset", []string{"Content-Type", "application/json; charset=utf-8"}},
		{"IPv6 loopback Host", []string{"Host", "[::1]:" + port}},
	} {
		resp, m := f.do(t, "POST", "/v1/freeze", `{"reason":"ok"}`, tc.hdr...)
		assert.Equal(t, 200, resp.StatusCode, "%s: %v", tc.name, m)
	}
}

// TestTokenlessWritesRefuseProxies: a write that came through a proxy is
// not the local operator's, whatever Host the proxy sent.
func TestTokenlessWritesRefuseProxies(t *testing.T) {
	f := newFixture(t, Config{Loopback: true})
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP"} {
		resp, m := f.do(t, "POST", "/v1/freeze", `{}`, h, "203.0.113.7")
		assert.Equal(t, 403, resp.StatusCode, h)
		assert.Equal(t, "urn:brownout:api:proxied", m["type"], h)
	}
	assert.False(t, f.api.Frozen())
}

// TestTokenedWritesNeedNoBrowserCheck: with an operator token, the token
// is the check (a page cannot send it cross-site without a preflight this
// server never grants): a token-bearing write from curl behind a proxy
// with another Host passes.
func TestTokenedWritesNeedNoBrowserCheck(t *testing.T) {
	tok := "operator-token-0123456789"
	f := newFixture(t, Config{OperatorTokens: map[string]string{"alice": tok}})
	resp, m := f.do(t, "POST", "/v1/freeze", `{}`, "Authorization", "Bearer "+tok, "Host", "brownoutd.internal:8080")
	assert.Equal(t, 200, resp.StatusCode, "%v", m)
	resp, _ = f.do(t, "POST", "/v1/freeze", `{}`, "Origin", "https://evil.example")
	assert.Equal(t, 401, resp.StatusCode, "no token: refused as ever")
}

// TestPushesRefuseBrowsers: the push route guards as the writes do: a
// tokenless push on loopback must pass the same check, a push token is
// required off loopback, and every push declares its JSON body.
func TestPushesRefuseBrowsers(t *testing.T) {
	var pushed atomic.Int64
	push := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { pushed.Add(1) })
	body := `{"v":1,"instance":"x"}`
	f := newFixture(t, Config{Loopback: true, Push: push})
	_, port, _ := net.SplitHostPort(hostile.Addr(t, f.srv.URL))
	c := hostile.Client()
	for _, a := range hostile.Attacks(port) {
		resp, err := c.Do(a.Request(t, "POST", f.srv.URL+"/v1/signals", body))
		require.NoError(t, err)
		hostile.RequireProblem(t, resp, http.StatusForbidden, "push: "+a.Name)
	}
	assert.Zero(t, pushed.Load(), "no refused push reached the source")
	resp, _ := f.do(t, "POST", "/v1/signals", body)
	assert.Equal(t, 200, resp.StatusCode, "a pusher's push")
	assert.EqualValues(t, 1, pushed.Load())

	off := newFixture(t, Config{Push: push})
	resp, err := c.Do(hostile.Attack{}.Request(t, "POST", off.srv.URL+"/v1/signals", body))
	require.NoError(t, err)
	p := hostile.RequireProblem(t, resp, http.StatusForbidden, "off loopback, no push token")
	assert.Contains(t, p.Type, "no-push-token")

	tok := "push-token-0123456789"
	withTok := newFixture(t, Config{Push: push, PushTokens: map[string]string{"shop": tok}})
	req := hostile.Attack{Header: map[string]string{"Content-Type": ""}}.Request(t, "POST", withTok.srv.URL+"/v1/signals", body)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = c.Do(req)
	require.NoError(t, err)
	hostile.RequireProblem(t, resp, http.StatusUnsupportedMediaType, "an untyped push with its token")
	assert.EqualValues(t, 1, pushed.Load())
}

// TestListenersOwnAddressIsLocal: a Host naming the address the request
// arrived on passes, whatever that address; another does not.
func TestListenersOwnAddressIsLocal(t *testing.T) {
	for host, want := range map[string]bool{"10.1.2.3:8080": true, "10.1.2.4:8080": false, "[::1]:80": true, "LOCALHOST": true, "evil.example": false, "": false} {
		r := httptest.NewRequest("POST", "/v1/freeze", nil)
		r.Host = host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8080}))
		assert.Equal(t, want, local.Host(r), host)
	}
}

package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/shop"
)

// The storefront across origins, in a headless chromium: the shop in
// fleet mode serves its page from one 127.0.0.1 port, and the page's
// OpenFeature web SDK evaluates at `brownoutd serve` on another — which
// answers it only when --cors-origin names the page's origin. Either way
// the page cannot write to the operator API.

// storefrontWait bounds each wait for the page: chromium's start, the
// modules' load and the first evaluation take well under a second here;
// the rest is slack for a busy 2-core machine.
const storefrontWait = 20 * time.Second

// followWait bounds the wait for a level change to show: under the page's
// 10 s poll (POLL_MS in shop/static/storefront.js), so that a change seen
// in time came over the daemon's event stream.
const followWait = 8 * time.Second

// TestStorefrontAcrossOrigins: with the page's origin allowed, the page
// shows the daemon's levels (a feature pinned to 0 dimmed, others on) and
// follows a release; with another origin allowed but not the page's, it
// cannot evaluate and shows the defaults (every section on, the pin
// notwithstanding) and says so. In both, the page's writes to the daemon —
// a JSON post (which needs a preflight) and a no-cors one — change
// nothing.
func TestStorefrontAcrossOrigins(t *testing.T) {
	bin := chromium(t)
	t.Run("allowed", func(t *testing.T) { storefrontAcross(t, bin, true) })
	t.Run("not allowed", func(t *testing.T) { storefrontAcross(t, bin, false) })
}

func storefrontAcross(t *testing.T, bin string, allowed bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	page := "http://" + ln.Addr().String()
	grant := page
	if !allowed {
		grant = "http://127.0.0.1:1" // some other page
	}
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--cors-origin", grant)
	require.NotEqual(t, page, d.base, "two origins")

	s, err := shop.New(context.Background(), shop.Config{Protect: shop.Brownout, Brownoutd: []string{d.base}, NoPush: true, StateDir: t.TempDir()})
	require.NoError(t, err)
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { // before the daemon stops: the shop follows its stream
		srv.Close()
		s.Close()
	})

	resp := send(t, "PUT", d.base+"/v1/features/recommendations/override", "", `{"level":0,"ttl":"10m","reason":"storefront test"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the local operator pins recommendations off")

	ctx := browser(t, bin, 1000, 900)
	_, err = chromedp.Run(ctx, chromedp.Navigate(page+"/?id=7"))
	require.NoError(t, err)
	base, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.ofrep`))
	require.NoError(t, err)
	assert.Equal(t, d.base, base, "the page evaluates at the daemon")

	if allowed {
		waitJS(t, ctx, storefrontWait, `document.body.dataset.liveState === 'ready'`, "the web SDK evaluates at the daemon")
		assert.Equal(t, map[string]string{"recommendations": "dimmed", "reviews": "on", "gallery": "on"}, livePage(t, ctx), "the daemon's levels")
		start := time.Now()
		resp = send(t, "DELETE", d.base+"/v1/features/recommendations/override", "", `{}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		waitJS(t, ctx, followWait, `document.querySelector('section[data-feature=recommendations]').dataset.live === 'on'`, "the release shows, over the event stream")
		t.Logf("the release showed on the page after %v", time.Since(start).Round(10*time.Millisecond))
		resp = send(t, "PUT", d.base+"/v1/features/recommendations/override", "", `{"level":0,"ttl":"10m","reason":"again"}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	} else {
		waitJS(t, ctx, storefrontWait, `document.body.dataset.liveState === 'error'`, "the web SDK cannot evaluate")
		assert.Equal(t, map[string]string{"recommendations": "on", "reviews": "on", "gallery": "on"}, livePage(t, ctx), "the defaults, the pin notwithstanding")
		status, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('live').textContent`))
		require.NoError(t, err)
		assert.Contains(t, status, "Live levels unavailable")
	}

	before := stateOf(t, d.base)
	for what, js := range map[string]string{
		"a JSON freeze":          `fetch(BASE + '/v1/freeze', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"reason":"from a page"}'})`,
		"a JSON override":        `fetch(BASE + '/v1/features/reviews/override', {method: 'PUT', headers: {'Content-Type': 'application/json'}, body: '{"level":0}'})`,
		"a JSON release":         `fetch(BASE + '/v1/features/recommendations/override', {method: 'DELETE', headers: {'Content-Type': 'application/json'}, body: '{}'})`,
		"a no-cors freeze":       `fetch(BASE + '/v1/freeze', {method: 'POST', mode: 'no-cors', body: '{"reason":"from a page"}'})`,
		"a tokenless state read": `fetch(BASE + '/v1/state')`,
	} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			strings.ReplaceAll(js, "BASE", jsString(d.base))+`.then(r => r.type === 'opaque' ? 'opaque' : 'read ' + r.status, e => 'blocked: ' + e.message)`,
			chromedp.EvalAwaitPromise))
		require.NoError(t, err, what)
		if what == "a no-cors freeze" {
			assert.Equal(t, "opaque", got, "%s: sent, its answer unreadable", what)
			continue
		}
		assert.Contains(t, got, "blocked", "%s from the page", what)
	}
	after := stateOf(t, d.base)
	assert.False(t, after.Frozen, "not frozen")
	assert.Equal(t, overrides(before.Features), overrides(after.Features), "the overrides as they were")
	assert.NotEmpty(t, overrides(after.Features))
}

// livePage is the page's live view of each section ("on", "dimmed").
func livePage(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll('section[data-feature]')].map(s => [s.dataset.feature, s.dataset.live]))`))
	require.NoError(t, err)
	return m
}

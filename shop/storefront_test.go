package shop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
)

// importMap reads the storefront's import map from a page.
func importMap(t *testing.T, page string) map[string]string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="importmap">(.*?)</script>`).FindStringSubmatch(page)
	require.NotNil(t, m, "the page has an import map")
	var im struct{ Imports map[string]string }
	require.NoError(t, json.Unmarshal([]byte(m[1]), &im))
	return im.Imports
}

// TestStorefrontServesItsScripts: a protected shop's page loads its
// script and the vendored OpenFeature modules from /static/, all of them
// served as JavaScript with an ETag, and every module a vendored one
// imports is in the import map (nothing loaded from elsewhere); the page
// names the OFREP base URL — "" for the shop's own, the daemon's in fleet
// mode — and the targeting key the server used; unprotected, it has no
// script.
func TestStorefrontServesItsScripts(t *testing.T) {
	_, srv := newShop(t, Brownout)
	resp, b := send(t, srv, call{"GET", "/?id=7", "", map[string]string{UserHeader: "u1"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	page := string(b)
	assert.Contains(t, page, `data-ofrep="" data-targeting-key="u1"`)
	assert.Contains(t, page, `<script type="module" src="/static/storefront.js">`)
	assert.Contains(t, page, `data-feature="recommendations"`)
	imports := importMap(t, page)
	require.Len(t, imports, 4)

	spec := regexp.MustCompile(`(?m)(?:^import|^export \*|^\} from|^import \{[^}]*\} from)[^'"]*['"]([^'"]+)['"]`)
	paths := []string{"/static/storefront.js"}
	for _, p := range imports {
		paths = append(paths, p)
	}
	imported := map[string]string{}
	for _, p := range paths {
		resp, b := send(t, srv, call{"GET", p, "", nil})
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"), p)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), p)
		etag := resp.Header.Get("ETag")
		require.NotEmpty(t, etag, p)
		for _, m := range spec.FindAllStringSubmatch(string(b), -1) {
			if !strings.HasPrefix(m[1], ".") && !strings.HasPrefix(m[1], "/") {
				assert.Contains(t, imports, m[1], "%s imports %s: the import map must name it", p, m[1])
				imported[m[1]] = imports[m[1]]
			}
		}
		resp, _ = send(t, srv, call{"GET", p, "", map[string]string{"If-None-Match": etag}})
		assert.Equal(t, http.StatusNotModified, resp.StatusCode, p)
	}
	assert.Equal(t, imports, imported, "the import map names what the modules import, no more")
	resp, b = send(t, srv, call{"GET", "/static/vendor/VERSIONS", "", nil})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", b)
	resp, _ = send(t, srv, call{"GET", "/static/", "", nil})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no listing")

	// Fleet mode: the page evaluates at the daemon.
	d := httptest.NewServer(newAPI(t, nil).Handler())
	t.Cleanup(d.Close)
	_, fleet := newShopWith(t, Config{Protect: Brownout, Brownoutd: []string{d.URL + "/"}, NoPush: true})
	_, b = send(t, fleet, call{"GET", "/", "", map[string]string{UserHeader: "u2"}})
	assert.Contains(t, string(b), fmt.Sprintf(`data-ofrep="%s" data-targeting-key="u2"`, d.URL))
	// A daemon's replicas: the page evaluates at the one the shop follows.
	d2 := httptest.NewServer(newAPI(t, nil).Handler())
	t.Cleanup(d2.Close)
	replicas, fleet2 := newShopWith(t, Config{Protect: Brownout, Brownoutd: []string{d.URL, d2.URL}, NoPush: true})
	require.Eventually(t, func() bool { return replicas.Remote().Following() != "" }, 5*time.Second, 10*time.Millisecond)
	_, b = send(t, fleet2, call{"GET", "/", "", map[string]string{UserHeader: "u2"}})
	assert.Contains(t, string(b), fmt.Sprintf(`data-ofrep="%s" data-targeting-key="u2"`, replicas.Remote().Following()))

	_, bare := newShop(t, None)
	_, b = send(t, bare, call{"GET", "/", "", nil})
	assert.NotContains(t, string(b), "importmap", "no controller, no live view")
	assert.NotContains(t, string(b), "data-ofrep")
}

// newAPI is a controller's API over the shop's sections, as a brownoutd
// serves it, with origins allowed to evaluate from a browser.
func newAPI(t *testing.T, origins []string) *api.API {
	t.Helper()
	ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}}})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl, Loopback: true, CORSOrigins: origins})
	require.NoError(t, err)
	return a
}

// waitJS polls a JavaScript condition in the page every 50 ms for at most
// d.
func waitJS(t *testing.T, ctx context.Context, d time.Duration, cond, msg string) {
	t.Helper()
	var last error
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err == nil && ok {
			return
		}
		last = err
	}
	status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.liveState + ': ' + (document.getElementById('live') || {}).textContent`))
	t.Fatalf("timed out after %v: %s (%s; last error %v; page: %s)", d, msg, cond, last, status)
}

// liveOf is the page's live view of each section ("on", "dimmed").
func liveOf(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll('section[data-feature]')].map(s => [s.dataset.feature, s.dataset.live]))`))
	require.NoError(t, err)
	return m
}

// TestStorefrontFollowsTheLevelsInABrowser: in a headless chromium, the
// storefront of a shop that embeds its controller evaluates the
// sections' flags with the vendored web SDK at the shop's own OFREP: all
// on at full brightness; a feature pinned to 0 shows dimmed within
// seconds (the event stream), and on again once released.
func TestStorefrontFollowsTheLevelsInABrowser(t *testing.T) {
	bin := testsrv.Chromium(t)
	s, srv := newShop(t, Brownout)
	ctx := testsrv.Browser(t, bin, 1000, 900)
	_, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/?id=7"))
	require.NoError(t, err)
	waitJS(t, ctx, 15*time.Second, `document.body.dataset.liveState === 'ready'`, "the web SDK evaluates")
	assert.Equal(t, map[string]string{"recommendations": "on", "reviews": "on", "gallery": "on"}, liveOf(t, ctx))

	_, err = s.Controller().Pin("recommendations", 0, time.Minute, "browser test")
	require.NoError(t, err)
	waitJS(t, ctx, 15*time.Second, `document.querySelector('section[data-feature=recommendations]').dataset.live === 'dimmed'`, "the pin shows")
	assert.Equal(t, map[string]string{"recommendations": "dimmed", "reviews": "on", "gallery": "on"}, liveOf(t, ctx))
	line, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('section[data-feature=recommendations] .live').textContent`))
	require.NoError(t, err)
	assert.Contains(t, line, "Dimmed now")

	_, err = s.Controller().Unpin("recommendations")
	require.NoError(t, err)
	waitJS(t, ctx, 15*time.Second, `document.querySelector('section[data-feature=recommendations]').dataset.live === 'on'`, "the release shows")
}

package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/race"
)

// readServiceBars is what the root's page shows of each service: every
// feature bar's aria-valuenow, by service and feature.
const readServiceBars = `(() => {
  const out = {};
  for (const m of document.querySelectorAll('#svc-list [role=meter][data-service]')) {
    (out[m.dataset.service] ||= {})[m.dataset.feature] = Number(m.getAttribute('aria-valuenow'));
  }
  return out;
})()`

// checkServiceBars: within 5 s (the page polls every 2), the root's page
// shows every service's every feature at the level the root's
// /v1/state gives it, in per cent.
func checkServiceBars(t *testing.T, ctx context.Context, base string) servicesJSON {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for {
		m := servicesOf(t, base)
		want := map[string]map[string]float64{}
		for _, s := range m.Services {
			want[s.Name] = map[string]float64{}
			for _, f := range s.State.Features {
				want[s.Name][f.Name] = math.Round(f.Level*1000) / 10
			}
		}
		got := evalJS[map[string]map[string]float64](t, ctx, readServiceBars)
		if assert.ObjectsAreEqual(want, got) {
			return m
		}
		if time.Now().After(end) {
			require.Equal(t, want, got, "the page's bars are the services' levels")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDialServices: the dial of a daemon of several services in a real
// browser. At / it lists the services, each with its mode, reason and a
// bar per feature at its level (following the services as they move),
// linked to the service's own dial; at /services/{name}/ that dial shows
// the service's dials and names it, with a way back to the list, and its
// controls write to that service alone. No serious accessibility
// violation on the list. A reload that removes a service: its open dial
// says so.
func TestDialServices(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("a browser test")
	}
	bin := chromium(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`tick: 200ms
services:
  - name: shop
    features: [{name: recommendations}, {name: reviews}, {name: gallery, floor: 0.1}]
    sources: {push: {window: 3s, expire: 3s}}
  - name: search
    targets: [{signal: latency.p99, target: 200ms}]
    features: [{name: suggestions}, {name: spelling}]
    sources: {push: {window: 3s, expire: 3s}}
`), 0o600))
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", dir, "--config", cfg)
	shop := startLoad(t, d.base+"/services/shop/v1/signals", 20*time.Millisecond)
	startLoad(t, d.base+"/services/search/v1/signals", 20*time.Millisecond)

	ctx := browser(t, bin, 1280, 900)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(d.base+"/")))
	waitJS(t, ctx, 10*time.Second, `window.__dial && __dial.conn() === 'live' && document.querySelectorAll('#svc-list > li').length === 2`, "the page lists the two services")
	assert.Equal(t, "/services/shop/", evalJS[string](t, ctx, `new URL(document.querySelector('#svc-list li[data-service=shop] a').href).pathname`))
	assert.False(t, evalJS[bool](t, ctx, `document.getElementById('now').checkVisibility()`), "the list alone: no single service's sections")
	checkServiceBars(t, ctx, d.base)

	// The shop slows down and dims; the list follows; the search does not move.
	shop.latency.Store(int64(900 * time.Millisecond))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := servicesOf(c, d.base).Services[0].State
		assert.Zero(c, feature(st, "recommendations").Level)
		assert.Zero(c, feature(st, "reviews").Level)
		assert.LessOrEqual(c, feature(st, "gallery").Level, 0.1)
	}, 15*time.Second, 50*time.Millisecond, "the shop dims to its floors (where it holds, so that the page's two-second polls catch up)")
	m := checkServiceBars(t, ctx, d.base)
	assert.Equal(t, 1.0, feature(m.Services[1].State, "suggestions").Level)

	axeSrc, err := os.ReadFile(filepath.Join("testdata", "axe", "axe-4.14.1.min.js"))
	require.NoError(t, err)
	evalJS[chromedp.Void](t, ctx, string(axeSrc)+";undefined")
	assert.Empty(t, axeRun(t, ctx, "the services' list"), "no serious or critical accessibility violations")
	shots := *dialShots
	if shots == "" {
		shots = t.TempDir()
	}
	screenshot(t, ctx, filepath.Join(shots, "services.png"))

	// The search's own dial, reached from the list.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#svc-list li[data-service=search] a`))))
	waitJS(t, ctx, 10*time.Second, `location.pathname === '/services/search/' && window.__dial && __dial.conn() === 'live' && document.querySelectorAll('[role=meter][data-feature]').length === 2`,
		"the search's dial is live, a dial per feature")
	checkDials(t, ctx, d.base+"/services/search")
	assert.Equal(t, "search", evalJS[string](t, ctx, `document.getElementById('svc-name').textContent`))
	assert.Equal(t, "/", evalJS[string](t, ctx, `new URL(document.querySelector('#svc-nav a').href).pathname`))
	assert.Equal(t, "search — brownout dial", evalJS[string](t, ctx, `document.title`))

	// Its controls write to the search alone.
	evalJS[chromedp.Void](t, ctx, `(() => {
  document.getElementById('ovr-feature').value = 'spelling';
  const lv = document.getElementById('ovr-level'); lv.value = '30'; lv.dispatchEvent(new Event('input'));
  document.getElementById('ovr-reason').value = 'test';
  document.getElementById('ovr-go').click();
})()`)
	waitJS(t, ctx, 5*time.Second, `document.getElementById('msg').textContent.startsWith('Done: override spelling at 30%')`, "the write is done")
	assert.Equal(t, 0.3, feature(stateOf(t, d.base+"/services/search"), "spelling").Level)
	for _, f := range stateOf(t, d.base+"/services/shop").Features {
		assert.Nil(t, f.Override, "the shop has no override")
	}
	checkDials(t, ctx, d.base+"/services/search")
	screenshot(t, ctx, filepath.Join(shots, "service.png"))

	// A reload that removes the search: its open dial says why it lost
	// the stream (the stream's last event), and the list shows the shop
	// alone.
	require.NoError(t, os.WriteFile(cfg, []byte(`tick: 200ms
services:
  - name: shop
    features: [{name: recommendations}, {name: reviews}, {name: gallery, floor: 0.1}]
    sources: {push: {window: 3s, expire: 3s}}
`), 0o600))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	waitJS(t, ctx, 10*time.Second, `document.getElementById('conn').textContent.includes('no longer served')`, "the search's dial says the service is no longer served")

	// Back to the list.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#svc-nav a`))))
	waitJS(t, ctx, 10*time.Second, `location.pathname === '/' && document.querySelectorAll('#svc-list > li').length === 1`, "back to the list, the shop alone")
	checkServiceBars(t, ctx, d.base)
}

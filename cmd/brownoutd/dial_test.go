package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/heapprofiler"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
	"github.com/brownout/brownout/web"
)

// The dial's browser test: a headless Debian chromium (.ci/run installs
// it) driven by chromedp against `brownoutd serve` in this process, fed
// through its push source. Timing-sensitive: it skips under -race, and
// make test runs it on its own without.

var (
	dialShot  = flag.String("dial-screenshot", "", "copy TestDial's wide screenshot to this file (../../web/screenshot.png for the README)")
	dialShots = flag.String("dial-shots", "", "keep TestDial's screenshots in this directory (default: the test's temp dir)")
)

// chromium finds the browser, or skips (fails in CI).
func chromium(tb testing.TB) string { tb.Helper(); return testsrv.Chromium(tb) }

// browser starts a headless chromium of its own (its own renderer, so
// one test's heap is not another's) and returns a tab's context.
func browser(t *testing.T, bin string, w, h int) context.Context {
	t.Helper()
	return testsrv.Browser(t, bin, w, h)
}

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err, js)
	return v
}

// waitJS polls a JavaScript condition every 50 ms for at most d.
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
	t.Fatalf("timed out after %v: %s (%s; last error %v)", d, msg, cond, last)
}

func keys(t *testing.T, ctx context.Context, k string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(k)))
}

// daemon is a `brownoutd serve` running in this process.
type daemon struct {
	base      string
	cancel    context.CancelFunc
	done      chan error
	out, errs testsrv.Buffer
	once      sync.Once
}

func startDaemon(t testing.TB, args ...string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- run(ctx, append([]string{"serve"}, args...), &d.out, &d.errs) }()
	t.Cleanup(func() { d.stop(t) })
	re := regexp.MustCompile(`serving on (http://[0-9.:]+)`)
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(d.out.String())
		if m != nil {
			d.base = m[1]
		}
		return m != nil || strings.Contains(d.errs.String(), "level=ERROR")
	}, 10*time.Second, 50*time.Millisecond, "the daemon prints its URL")
	require.NotEmpty(t, d.base, "the daemon did not start: %s", d.errs.String())
	require.Eventually(t, func() bool {
		resp, err := http.Get(d.base + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}, 5*time.Second, 50*time.Millisecond, "ready")
	return d
}

func (d *daemon) stop(t testing.TB) {
	d.once.Do(func() {
		d.cancel()
		select {
		case err := <-d.done:
			assert.NoError(t, err, "graceful shutdown")
		case <-time.After(15 * time.Second):
			t.Error("no graceful shutdown")
		}
	})
}

// pushLoad pushes a Recorder's signals to a daemon: requests arriving every
// 2 ms with the latency the test sets, a 5 ms queue wait, one in twenty
// shed.
type pushLoad struct {
	latency atomic.Int64 // ns
	rec     *signals.Recorder
	stop    context.CancelFunc
}

func startLoad(t *testing.T, url string, latency time.Duration) *pushLoad {
	l := &pushLoad{rec: signals.NewRecorder(signals.Config{})}
	l.latency.Store(int64(latency))
	p, err := fleet.NewPusher(l.rec, fleet.PusherConfig{URL: url, Instance: "shop-1", Interval: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	t.Cleanup(cancel)
	go p.Run(ctx)
	go func() {
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				l.rec.Arrive(signals.Default)
				if i%20 == 0 {
					l.rec.Reject(signals.Default, signals.ReasonShedLevel)
					continue
				}
				l.rec.Queued(signals.Default, 5*time.Millisecond, now)
				l.rec.Done(signals.Default, now.Add(-time.Duration(l.latency.Load())), now, false, time.Time{})
			}
		}
	}()
	return l
}

// stateOf reads /v1/state.
// stateOf reads the daemon's state; t may be an Eventually's collector.
func stateOf(t require.TestingT, base string) api.StateJSON {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	resp, err := http.Get(base + "/v1/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st api.StateJSON
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func feature(st api.StateJSON, name string) api.FeatureJSON {
	for _, f := range st.Features {
		if f.Name == name {
			return f
		}
	}
	return api.FeatureJSON{}
}

// pageDials is what the page shows: its generation and each feature
// dial's aria-valuenow.
type pageDials struct {
	Gen   string             `json:"gen"`
	Level map[string]float64 `json:"level"`
}

const readDials = `(() => {
  const level = {};
  for (const m of document.querySelectorAll('[role=meter][data-feature]')) level[m.dataset.feature] = Number(m.getAttribute('aria-valuenow'));
  return { gen: document.getElementById('main').dataset.generation, level };
})()`

// checkDials: within 2 s, the page shows the generation of /v1/state (or
// a later one, then compared with a fresh read) with every dial's
// aria-valuenow equal to the feature's level in per cent.
func checkDials(t *testing.T, ctx context.Context, base string) api.StateJSON {
	t.Helper()
	st := stateOf(t, base)
	end := time.Now().Add(2 * time.Second)
	for {
		pd := evalJS[pageDials](t, ctx, readDials)
		gen := fmt.Sprint(st.Generation)
		pageGen, _ := strconv.ParseUint(pd.Gen, 10, 64)
		if pd.Gen == gen {
			require.Len(t, pd.Level, len(st.Features), "one dial per feature")
			for _, f := range st.Features {
				assert.Equal(t, math.Round(f.Level*1000)/10, pd.Level[f.Name], "%s's dial shows /v1/state's level (generation %s)", f.Name, gen)
			}
			return st
		}
		if time.Now().After(end) {
			t.Fatalf("after 2 s the page shows generation %s, /v1/state has %s", pd.Gen, gen)
		}
		if pageGen > st.Generation { // the page is ahead: read the state again
			st = stateOf(t, base)
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastPoint is the chart's newest point as window.__dial.last() gives it.
type lastPoint struct {
	T          float64            `json:"t"`
	LatencyP99 *float64           `json:"latency_p99"`
	SojournP99 *float64           `json:"sojourn_p99"`
	Pressure   *float64           `json:"pressure"`
	Levels     map[string]float64 `json:"levels"`
	Throughput *float64           `json:"throughput"`
	Goodput    *float64           `json:"goodput"`
}

// axeRun runs the vendored axe-core in the page and returns its serious
// and critical violations.
func axeRun(t *testing.T, ctx context.Context, what string) []string {
	t.Helper()
	out := evalJS[[]string](t, ctx, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
	  .filter(v => v.impact === 'serious' || v.impact === 'critical')
	  .map(v => v.impact + ' ' + v.id + ': ' + v.help + ' — ' + v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' ' + (n.failureSummary || '')).join(' | ')))`)
	t.Logf("axe (%s): %d serious or critical violations", what, len(out))
	return out
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	t.Logf("screenshot: %s (%d bytes)", path, len(b))
}

// TestDial: the operator dial in a real browser against a real daemon.
func TestDial(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("a browser test")
	}
	bin := chromium(t)
	t.Run("live", func(t *testing.T) { t.Parallel(); dialLive(t, bin) })
	t.Run("memory", func(t *testing.T) { t.Parallel(); dialMemory(t, bin, 900, 60) })
}

func dialLive(t *testing.T, bin string) {
	start := time.Now()
	dir := t.TempDir()
	opTok := "operator-secret-0123456789"
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
		return p
	}
	cfg := write("brownoutd.yaml", `targets:
  - {signal: latency.p99, target: 300ms}
  - {signal: sojourn.p99, target: 100ms}
features:
  - {name: recommendations, cost: 8}
  - {name: reviews, cost: 3}
  - {name: gallery, cost: 2, floor: 0.1}
segments:
  - {name: vip, offset: 0.2}
sources:
  push: {window: 3s, expire: 3s}
auth:
  operator_tokens_file: `+write("ops", "alice "+opTok+"\n")+`
`)
	args := []string{"--state-dir", dir, "--config", cfg, "--tick", "200ms"}
	d := startDaemon(t, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	addr := strings.TrimPrefix(d.base, "http://")
	ld := startLoad(t, d.base+"/v1/signals", 20*time.Millisecond)

	ctx := browser(t, bin, 1280, 1000)
	dialPolling(t, ctx)
	dialReauth(t, ctx)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(d.base+"/")))
	waitJS(t, ctx, 10*time.Second, `window.__dial && __dial.conn() === 'live' && document.querySelectorAll('[role=meter][data-feature]').length === 3`, "the page is live with a dial per feature")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.True(c, stateOf(c, d.base).Sources[0].OK)
	}, 10*time.Second, 50*time.Millisecond, "the pushes arrive")
	st := checkDials(t, ctx, d.base)
	assert.Equal(t, 1.0, feature(st, "recommendations").Level, "fast answers: full brightness")

	// Slow answers: the controller dims, and the dials follow within 2 s.
	ld.latency.Store(int64(900 * time.Millisecond))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Less(c, feature(stateOf(c, d.base), "recommendations").Level, 1.0)
	}, 10*time.Second, 50*time.Millisecond, "the pushed latency dims recommendations")
	checkDials(t, ctx, d.base)
	waitJS(t, ctx, 5*time.Second, `(t => t.startsWith('Capacity ') && t.includes(' a second') && t.includes(' · load '))(document.getElementById('model').textContent)`,
		"the page shows the capacity and the load the law estimates")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := stateOf(c, d.base)
		assert.LessOrEqual(c, feature(st, "gallery").Level, 0.1)
		assert.Zero(c, feature(st, "reviews").Level)
	}, 10*time.Second, 50*time.Millisecond, "every feature at its floor")
	checkDials(t, ctx, d.base)

	// The chart's last point is the observed value: the history's point of
	// the same tick, and the pushed latency within the histogram's error.
	waitJS(t, ctx, 2*time.Second, `__dial.last() && __dial.last().latency_p99 > 0.8`, "the chart shows the slow p99")
	lp := evalJS[lastPoint](t, ctx, `__dial.last()`)
	hist := getJSON(t, d.base+"/v1/history?since=30s")
	var found bool
	for _, p := range hist["points"].([]any) {
		p := p.(map[string]any)
		tm, err := time.Parse(time.RFC3339Nano, p["t"].(string))
		require.NoError(t, err)
		if tm.UnixMilli() == int64(math.Round(lp.T*1000)) {
			found = true
			assert.Equal(t, p["latency_p99"], *lp.LatencyP99, "the chart's p99 is the history's")
			assert.Equal(t, p["sojourn_p99"], *lp.SojournP99, "and its sojourn")
			assert.Equal(t, p["pressure"], *lp.Pressure, "and its pressure")
			for name, v := range p["levels"].(map[string]any) {
				assert.Equal(t, v, lp.Levels[name], "and %s's level", name)
			}
		}
	}
	assert.True(t, found, "the chart's last point (t=%v) is in /v1/history", lp.T)
	assert.InEpsilon(t, 0.9, *lp.LatencyP99, 0.1, "the chart's p99 is the pushed latency")
	assert.InEpsilon(t, 0.005, *lp.SojournP99, 0.15, "the chart's sojourn is the pushed queue wait")
	assert.Greater(t, *lp.Throughput, 100.0, "throughput is charted")
	t.Logf("chart: p99 %.3fs (pushed 0.900s), sojourn %.4fs (pushed 0.005s), throughput %.0f/s", *lp.LatencyP99, *lp.SojournP99, *lp.Throughput)

	// A write without the token: the error in the page, nothing changed.
	before := stateOf(t, d.base)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("freeze"))))
	waitJS(t, ctx, 3*time.Second, `document.getElementById('err').textContent.includes('operator token') && document.getElementById('tok').open`, "the refusal is shown and the token asked for")
	errText := evalJS[string](t, ctx, `document.getElementById('err').textContent`)
	assert.Contains(t, errText, "Nothing changed")
	keys(t, ctx, kb.Escape)
	waitJS(t, ctx, 2*time.Second, `!document.getElementById('tok').open`, "Escape closes the token dialog")
	after := stateOf(t, d.base)
	assert.False(t, after.Frozen, "the refused freeze changed nothing")
	assert.Equal(t, before.Features[1].Override, after.Features[1].Override)
	for _, e := range getJSON(t, d.base+"/v1/events")["events"].([]any) {
		assert.NotEqual(t, "freeze", e.(map[string]any)["kind"], "no freeze event")
	}

	// An override with the keyboard only: the skip link, the feature, the
	// slider, the reason (markup, shown as text), Enter; the token once.
	reason := `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> war room`
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload())) // focus at the document's start
	waitJS(t, ctx, 10*time.Second, `window.__dial && __dial.conn() === 'live' && document.querySelectorAll('[role=meter][data-feature]').length === 3`, "the page is live again")
	keys(t, ctx, kb.Tab)
	waitJS(t, ctx, time.Second, `document.activeElement.classList.contains('skip')`, "the first Tab reaches the skip link")
	keys(t, ctx, kb.Enter+kb.Tab)
	waitJS(t, ctx, time.Second, `document.activeElement.id === 'ovr-feature'`, "the skip link leads to the controls")
	keys(t, ctx, kb.ArrowDown)
	waitJS(t, ctx, time.Second, `document.activeElement.value === 'reviews'`, "ArrowDown picks reviews")
	keys(t, ctx, kb.Tab+kb.Home+strings.Repeat(kb.ArrowRight, 30))
	waitJS(t, ctx, time.Second, `document.activeElement.id === 'ovr-level' && document.activeElement.value === '30'`, "the slider at 30")
	keys(t, ctx, kb.Tab+kb.Tab)
	waitJS(t, ctx, time.Second, `document.activeElement.id === 'ovr-reason'`, "Tab reaches the reason")
	keys(t, ctx, reason+kb.Enter)
	waitJS(t, ctx, 3*time.Second, `document.getElementById('tok').open && document.activeElement.id === 'tok-input'`, "the write asks for the token, focus in the field")
	keys(t, ctx, opTok+kb.Enter)
	waitJS(t, ctx, 3*time.Second, `document.getElementById('msg').textContent.includes('override reviews at 30%')`, "the page confirms the override")
	rv := feature(stateOf(t, d.base), "reviews")
	require.NotNil(t, rv.Override, "the override is in /v1/state")
	assert.Equal(t, 0.3, rv.Override.Level)
	assert.Equal(t, reason, rv.Override.Reason, "the reason as typed")
	assert.Equal(t, "override", rv.Mode)
	assert.WithinDuration(t, time.Now().Add(30*time.Minute), rv.Override.Until, time.Minute, "the TTL picked: 30 minutes")
	checkDials(t, ctx, d.base)

	// The reason is text: shown verbatim, never run or parsed.
	waitJS(t, ctx, 3*time.Second, `[...document.querySelectorAll('#events .why')].some(e => e.textContent === `+jsString(reason)+`)`, "the event shows the reason as text")
	assert.Contains(t, evalJS[string](t, ctx, `document.querySelector('[data-feature=reviews] .note').textContent`), reason)
	assert.Equal(t, 0, evalJS[int](t, ctx, `document.querySelectorAll('main script, main img').length`), "no element made from the reason")
	assert.Equal(t, "undefined", evalJS[string](t, ctx, `typeof window.__pwned`), "the reason's script never ran")
	assert.Equal(t, opTok, evalJS[string](t, ctx, `sessionStorage.getItem('brownout-operator-token')`), "the token is kept for the tab")

	// Within the band: the cascade unwinds; the screenshots show a busy page.
	ld.latency.Store(int64(240 * time.Millisecond))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		st := stateOf(c, d.base)
		assert.Zero(c, st.Shed)
		if assert.NotNil(c, st.Pressure) {
			assert.Less(c, *st.Pressure, st.Law.High)
		}
	}, 10*time.Second, 50*time.Millisecond, "pressure back in the band, the cascade unwound")
	checkDials(t, ctx, d.base)

	// Accessibility: axe-core in both themes, wide and narrow.
	axeSrc, err := os.ReadFile(filepath.Join("testdata", "axe", "axe-4.14.1.min.js"))
	require.NoError(t, err)
	evalJS[chromedp.Void](t, ctx, string(axeSrc)+";undefined")
	shots := *dialShots
	if shots == "" {
		shots = t.TempDir()
	}
	var wide []byte
	for _, vp := range []struct {
		name string
		w, h int64
	}{{"wide", 1280, 1000}, {"narrow", 360, 740}} {
		_, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: vp.w, Height: vp.h, DeviceScaleFactor: 1, Mobile: vp.name == "narrow"})
		require.NoError(t, err)
		for _, theme := range []string{"light", "dark"} {
			evalJS[chromedp.Void](t, ctx, `__dial.setTheme('`+theme+`')`)
			waitJS(t, ctx, time.Second, `new Promise(r => requestAnimationFrame(() => r(true)))`, "a frame drawn")
			assert.Empty(t, axeRun(t, ctx, vp.name+" "+theme), "no serious or critical accessibility violations (%s, %s)", vp.name, theme)
			if vp.name == "narrow" {
				assert.LessOrEqual(t, evalJS[int](t, ctx, `document.documentElement.scrollWidth`), 360, "no sideways scrolling at 360 px (%s)", theme)
			}
			screenshot(t, ctx, filepath.Join(shots, fmt.Sprintf("dial-%s-%s.png", vp.name, theme)))
			if vp.name == "wide" && theme == "light" { // the README's: the first screen
				evalJS[chromedp.Void](t, ctx, `document.activeElement.blur(); window.scrollTo(0, 0)`)
				wide, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
				require.NoError(t, err)
			}
		}
	}
	// The automatic theme follows the system's.
	evalJS[chromedp.Void](t, ctx, `__dial.setTheme('auto')`)
	for _, c := range []struct{ scheme, bg string }{{"dark", "rgb(18, 20, 23)"}, {"light", "rgb(255, 255, 255)"}} {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: c.scheme}}})
		require.NoError(t, err)
		assert.Equal(t, c.bg, evalJS[string](t, ctx, `getComputedStyle(document.documentElement).backgroundColor`), "auto theme, system %s", c.scheme)
	}
	_, err = chromedp.Call(ctx, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
	require.NoError(t, err)
	if *dialShot != "" {
		require.NoError(t, os.WriteFile(*dialShot, wide, 0o644))
	}

	// The daemon restarts on the same address: the page says it lost the
	// stream, reconnects by itself and says the daemon restarted.
	d.stop(t)
	waitJS(t, ctx, 5*time.Second, `__dial.conn() === 'down' && document.getElementById('conn').textContent.includes('Disconnected')`, "the page says it is disconnected")
	d2 := startDaemon(t, append([]string{"--listen", addr}, args...)...)
	waitJS(t, ctx, 10*time.Second, `__dial.conn() === 'live' && document.getElementById('conn').textContent.includes('daemon restarted')`, "the page reconnects and says the daemon restarted")
	st = checkDials(t, ctx, d2.base)
	assert.Equal(t, 0.3, feature(st, "reviews").Level, "the override outlived the restart")
	t.Logf("live: %v", time.Since(start).Round(100*time.Millisecond))
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// stubPage serves the dial beside a stub of the API: /v1/state answers
// synthState(*update); with stream, /v1/stream opens and sends nothing
// (the updates come through window.__dial.inject), without it the stream
// is not there (404, as on a proxy that drops it) and the page polls.
func stubPage(t *testing.T, update *atomic.Int64, stream bool) string {
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(synthState(int(update.Load())))
	})
	mux.HandleFunc("GET /v1/history", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"v":1,"points":[]}`)) })
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"v":1,"events":[]}`)) })
	if stream {
		mux.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// dialPolling: without the stream the page polls /v1/state, says so, and
// its dials follow.
func dialPolling(t *testing.T, ctx context.Context) {
	ctx, cancel := chromedp.NewContext(ctx) // a tab of its own
	defer cancel()
	var update atomic.Int64
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(stubPage(t, &update, false)+"/")))
	waitJS(t, ctx, 5*time.Second, `__dial.conn() === 'polling' && document.getElementById('conn').textContent.includes('polling /v1/state')`, "the page says it polls")
	update.Store(7)
	st := synthState(7)
	waitJS(t, ctx, 3*time.Second, `document.getElementById('main').dataset.generation === '`+fmt.Sprint(st.Generation)+`'`, "a poll brings the new state")
	pd := evalJS[pageDials](t, ctx, readDials)
	for _, f := range st.Features {
		assert.Equal(t, math.Round(f.Level*1000)/10, pd.Level[f.Name], "%s's dial follows the polled state", f.Name)
	}
}

// dialReauth: a stream that ends with "reauth" (its token expired, or a
// reload revoked it) sends the page for a new stream token and back on
// the stream at once.
func dialReauth(t *testing.T, ctx context.Context) {
	ctx, cancel := chromedp.NewContext(ctx) // a tab of its own
	defer cancel()
	var tokens, renewed atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(synthState(1)) })
	mux.HandleFunc("GET /v1/history", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"v":1,"points":[]}`)) })
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"v":1,"events":[]}`)) })
	mux.HandleFunc("POST /v1/stream/token", func(w http.ResponseWriter, r *http.Request) {
		tokens.Add(1)
		w.Write([]byte(`{"v":1,"token":"renewed"}`))
	})
	mux.HandleFunc("GET /v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		b, _ := json.Marshal(synthState(1))
		fmt.Fprintf(w, "retry: 1000\n\nevent: state\ndata: %s\n\n", b)
		if r.URL.Query().Get("token") != "renewed" {
			fmt.Fprint(w, "event: reauth\ndata: {\"v\":1,\"reason\":\"the stream token expired\"}\n\n")
			return
		}
		renewed.Add(1)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer srv.CloseClientConnections() // the page's stream, before Close waits for it
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")))
	waitJS(t, ctx, 5*time.Second, `__dial.conn() === 'live'`, "the page is live")
	require.Eventually(t, func() bool { return renewed.Load() == 1 }, 5*time.Second, 50*time.Millisecond, "the page came back with a new stream token")
	waitJS(t, ctx, 5*time.Second, `__dial.conn() === 'live'`, "and is live on it")
	assert.EqualValues(t, 1, tokens.Load(), "one token asked for")
}

var replayBase = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// synthState is the i-th update's state: levels, pressure and reasons
// that move on every update, an override with a long reason now and then.
func synthState(i int) api.StateJSON {
	x := float64(i)
	lv := func(k, ph float64) float64 { return math.Round(50+50*math.Sin(x/k+ph)) / 100 }
	p := 0.5 + math.Abs(math.Sin(x/40))*2
	v := p * 0.3
	feats := []api.FeatureJSON{
		{Name: "recommendations", Level: lv(17, 0), Computed: lv(17, 0), Mode: "auto", Default: true, Segments: map[string]float64{"vip": lv(17, 1)}},
		{Name: "reviews", Level: lv(23, 1), Computed: lv(23, 1), Mode: "auto", Default: true, Segments: map[string]float64{"vip": lv(23, 2)}},
		{Name: "gallery", Level: lv(31, 2), Computed: lv(31, 2), Floor: 0.1, Mode: "auto", Default: true, Segments: map[string]float64{"vip": lv(31, 3)}},
	}
	if i%50 < 10 {
		feats[1].Mode = "override"
		feats[1].Override = &api.OverrideJSON{Level: 0.3, Until: replayBase.Add(time.Hour), Reason: fmt.Sprintf("war room %d: %s", i, strings.Repeat("é<b>x</b> ", 40))}
	}
	return api.StateJSON{V: 1, Boot: 1, Generation: uint64(i + 1), Time: replayBase.Add(time.Duration(i) * time.Second), Mode: "auto",
		Brightness: lv(13, 0), Pressure: &p, Shed: math.Max(0, p-1.5), Action: "dim", Cause: "latency.p99",
		Reason:       fmt.Sprintf("latency.p99 %.0fms ≥ 300ms target: dimming (update %d)", v*1000, i),
		SegmentNames: []string{"vip"}, Features: feats,
		Signals: []api.ReadingJSON{{Signal: "latency.p99", Value: &v, Target: 0.3, Pressure: &p}},
		Sources: []signals.SourceHealth{}, Tick: api.TickJSON{Period: "1s", Ticks: uint64(i)},
		Law: api.LawJSON{Kind: api.LawModel, High: 0.85, Low: 0.7, Setpoint: 0.775, CascadeAt: 1.5, MaxShed: 2}}
}

func synthTick(i int, st api.StateJSON) api.Point {
	v := *st.Signals[0].Value
	soj, tp, gp, sr := v/10, 500+100*math.Sin(float64(i)/7), 450+90*math.Sin(float64(i)/7), 20+10*math.Cos(float64(i)/5)
	lv := map[string]float64{}
	for _, f := range st.Features {
		lv[f.Name] = f.Level
	}
	return api.Point{Time: st.Time, Pressure: st.Pressure, Readings: map[string]float64{"latency.p99": v}, LatencyP99: &v, SojournP99: &soj,
		Levels: lv, Shed: st.Shed, ShedRate: &sr, Goodput: &gp, Throughput: &tp, Mode: st.Mode, Generation: st.Generation}
}

// heapAfterGC is the page's JavaScript heap after a drawn frame and two
// forced collections.
func heapAfterGC(t *testing.T, ctx context.Context) float64 {
	t.Helper()
	evalJS[bool](t, ctx, `new Promise(r => requestAnimationFrame(() => r(true)))`)
	for range 2 {
		_, err := chromedp.Call(ctx, heapprofiler.CollectGarbage, cdp.Empty{})
		require.NoError(t, err)
	}
	h, err := chromedp.Call(ctx, cdpruntime.GetHeapUsage, cdp.Empty{})
	require.NoError(t, err)
	return h.UsedSize
}

// dialMemory replays n updates (a state, a tick and now and then an
// event each) at rate a second through window.__dial.inject, and checks
// that the heap after a forced GC at update n is within 1 MB of the heap
// at update 100: the page keeps 15 minutes of points and 100 events.
func dialMemory(t *testing.T, bin string, n, rate int) {
	start := time.Now()
	ctx := browser(t, bin, 1280, 1000)
	var update atomic.Int64
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(stubPage(t, &update, true)+"/")))
	waitJS(t, ctx, 10*time.Second, `window.__dial && __dial.conn() === 'live' && document.querySelectorAll('[role=meter][data-feature]').length === 3`, "the replay page is up")
	evalJS[chromedp.Void](t, ctx, `__dial.stop()`)
	u0 := evalJS[float64](t, ctx, `__dial.updates()`)
	var at100 float64
	t0 := time.Now()
	for i := 1; i <= n; i++ {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(rate)))) // on schedule: a slow call is caught up
		st := synthState(i)
		sb, _ := json.Marshal(st)
		pb, _ := json.Marshal(synthTick(i, st))
		js := `__dial.inject('state', ` + string(sb) + `); __dial.inject('tick', ` + string(pb) + `);`
		if i%5 == 0 {
			eb, _ := json.Marshal([]api.Event{{Seq: uint64(i / 5), Time: st.Time, Kind: "move", Feature: "recommendations",
				What: fmt.Sprintf("recommendations %d%% → %d%%", i%100, (i+37)%100), Reason: st.Reason + strings.Repeat(" <i>why</i>", 20)}})
			js += `__dial.inject('events', ` + string(eb) + `);`
		}
		evalJS[chromedp.Void](t, ctx, js+"undefined")
		if i == 100 {
			at100 = heapAfterGC(t, ctx)
		}
	}
	at := heapAfterGC(t, ctx)
	assert.Equal(t, float64(2*n), evalJS[float64](t, ctx, `__dial.updates()`)-u0, "every update applied")
	assert.Equal(t, 100, evalJS[int](t, ctx, `__dial.events()`), "the events list keeps 100")
	assert.LessOrEqual(t, evalJS[int](t, ctx, `__dial.points()`), 15*60+64, "the chart keeps 15 minutes")
	delta := at - at100
	t.Logf("memory: JS heap after GC %.0f kB at update 100, %.0f kB at update %d: %+.0f kB (%d updates at %d/s in %v)",
		at100/1024, at/1024, n, delta/1024, n, rate, time.Since(start).Round(100*time.Millisecond))
	assert.LessOrEqual(t, math.Abs(delta), float64(1<<20), "the heap at update %d is within 1 MB of update 100", n)
}

// TestDialServed: brownoutd serves the dial at / beside its API, without
// a browser.
func TestDialServed(t *testing.T) {
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir())
	assert.Contains(t, d.out.String(), "the dial at "+d.base+"/")
	for _, c := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/", 200, "text/html; charset=utf-8"},
		{"/dial.js", 200, "text/javascript; charset=utf-8"},
		{"/vendor/uPlot-1.6.32.min.css", 200, "text/css; charset=utf-8"},
		{"/v1/state", 200, "application/json"},
		{"/nope", 404, ""},
	} {
		resp, err := http.Get(d.base + c.path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, c.path)
		if c.ctype != "" {
			assert.Equal(t, c.ctype, resp.Header.Get("Content-Type"), c.path)
		}
	}
}

// TestDialSoak is make soak: the dial live in a browser against a daemon
// ticking once a second for BROWNOUT_SOAK (15m in make soak), the pushed
// latency swinging so that levels move; the heap after a forced GC at the
// end is within 1 MB of the heap at update 100.
func TestDialSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("BROWNOUT_SOAK"))
	if err != nil || dur <= 0 {
		t.Skip("set BROWNOUT_SOAK=15m (make soak) to run the real-time soak")
	}
	bin := chromium(t)
	d := startDaemon(t, "--listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--tick", "1s")
	ld := startLoad(t, d.base+"/v1/signals", 100*time.Millisecond)
	ctx := browser(t, bin, 1280, 1000)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(d.base+"/")))
	waitJS(t, ctx, 10*time.Second, `window.__dial && __dial.conn() === 'live'`, "the page is live")
	start := time.Now()
	var at100 float64
	for tk := time.NewTicker(time.Second); time.Since(start) < dur; <-tk.C {
		// ten seconds slow, twenty fast: dims, then brightens
		if int(time.Since(start)/time.Second)%30 < 10 {
			ld.latency.Store(int64(600 * time.Millisecond))
		} else {
			ld.latency.Store(int64(100 * time.Millisecond))
		}
		if at100 == 0 && evalJS[float64](t, ctx, `__dial.updates()`) >= 100 {
			at100 = heapAfterGC(t, ctx)
		}
		if s := int(time.Since(start) / time.Second); s%60 == 0 {
			t.Logf("soak: %v, %v updates, %v points", time.Since(start).Round(time.Second), evalJS[float64](t, ctx, `__dial.updates()`), evalJS[int](t, ctx, `__dial.points()`))
		}
	}
	require.NotZero(t, at100, "the soak is too short to reach update 100")
	at := heapAfterGC(t, ctx)
	n := evalJS[float64](t, ctx, `__dial.updates()`)
	assert.Equal(t, "live", evalJS[string](t, ctx, `__dial.conn()`))
	t.Logf("soak: JS heap after GC %.0f kB at update 100, %.0f kB at update %.0f: %+.0f kB over %v", at100/1024, at/1024, n, (at-at100)/1024, dur)
	assert.LessOrEqual(t, math.Abs(at-at100), float64(1<<20), "the heap stays within 1 MB of update 100")
}

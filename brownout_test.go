package brownout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

var domains atomic.Int64

// domain returns an OpenFeature domain of its own for each test: the
// SDK's registry is global.
func domain() string { return fmt.Sprintf("brownout-test-%d", domains.Add(1)) }

func features() []brownout.Feature {
	return []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}}
}

// page is an app that renders its optional sections per user as the flags
// say.
func page(client *openfeature.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ec := openfeature.NewEvaluationContext(r.URL.Query().Get("user"), nil)
		fmt.Fprint(w, "page")
		for _, f := range []string{"recommendations", "reviews"} {
			if on, _ := client.BooleanValue(r.Context(), f, false, ec); on {
				fmt.Fprint(w, " ", f)
			}
		}
	})
}

// run runs b; stop ends Run, checks that it returned nil, and closes b
// (defer it where it belongs among the test's other defers: a daemon's
// test server cannot close while b's stream to it is open).
func run(t *testing.T, b *brownout.Brownout) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	return ctx, func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, b.Close())
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestNewDefaults(t *testing.T) {
	b, err := brownout.New(brownout.Options{Features: features()})
	require.NoError(t, err)
	defer b.Close()
	cfg := b.Controller().Config()
	require.Len(t, cfg.Targets, 2)
	assert.Equal(t, signals.LatencyP99, cfg.Targets[0].Signal)
	assert.Equal(t, brownout.DefaultTarget.Seconds(), cfg.Targets[0].Target)
	assert.Equal(t, signals.RejectRatio, cfg.Targets[1].Signal)
	assert.Equal(t, brownout.DefaultMaxRejectRatio, cfg.Targets[1].Target)
	assert.True(t, cfg.Targets[1].DimOnly, "refusals dim, they never brighten")
	assert.NotNil(t, b.Shedder())
	assert.NotNil(t, b.Recorder())

	lat, err := brownout.New(brownout.Options{Features: features(), MaxRejectRatio: -1, Target: time.Second})
	require.NoError(t, err)
	defer lat.Close()
	require.Len(t, lat.Controller().Config().Targets, 1, "a negative MaxRejectRatio: latency alone")
}

// TestNewLaw: Law is deprecated — the model law is the only law, and the
// state says so. Empty or "model" (in fleet mode too) it is accepted; any
// other value, the removed search law's name included, is an error that
// says so.
func TestNewLaw(t *testing.T) {
	for _, law := range []string{"", brownout.LawModel} {
		b, err := brownout.New(brownout.Options{Features: features(), Law: law})
		require.NoError(t, err, law)
		assert.Equal(t, brownout.LawModel, b.API().State().Law.Kind, "Law %q: the state says the law", law)
		b.Close()
		b, err = brownout.New(brownout.Options{Daemon: "http://127.0.0.1:8080", Domain: domain(), NoPush: true, Law: law})
		require.NoError(t, err, "fleet mode, Law %q", law)
		b.Close()
	}
	_, err := brownout.New(brownout.Options{Features: features(), Law: "search"})
	assert.EqualError(t, err, `brownout: Law "search": the search law was removed and the model law is the only law: leave Law empty (it is deprecated)`)
	_, err = brownout.New(brownout.Options{Features: features(), Law: "Model"})
	assert.EqualError(t, err, `brownout: Law "Model": did you mean "model"? The model law is the only law: leave Law empty (it is deprecated)`, "a typo is not taken for the search law")
	_, err = brownout.New(brownout.Options{Daemon: "http://127.0.0.1:8080", Law: "search"})
	assert.ErrorContains(t, err, `brownout: Law "search": the search law was removed`)
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]brownout.Options{
		"negative target":            {Target: -time.Second},
		"reject ratio of 1":          {MaxRejectRatio: 1},
		"a feature twice":            {Features: []brownout.Feature{{Name: "a"}, {Name: "a"}}},
		"a bad route pattern":        {Features: features(), Routes: []brownout.Route{{Pattern: "GET /{"}}},
		"a daemon that is not a URL": {Daemon: "localhost:8080"},
		"a CORS origin with a path":  {Features: features(), CORSOrigins: []string{"https://shop.example/"}},
		"CORS origins in fleet mode": {Daemon: "http://127.0.0.1:8080", CORSOrigins: []string{"https://shop.example"}},
		"Daemon and Daemons":         {Daemon: "http://127.0.0.1:8080", Daemons: []string{"http://127.0.0.1:8081"}},
		"a replica twice":            {Daemons: []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/"}},
		"a replica not a URL":        {Daemons: []string{"http://127.0.0.1:8080", "127.0.0.1:8081"}},
		"an unknown law":             {Features: features(), Law: "pid"},
		"the search law":             {Features: features(), Law: "search"},
		"the search law, fleet mode": {Daemon: "http://127.0.0.1:8080", Law: "search"},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := brownout.New(o)
			assert.Error(t, err)
			assert.Nil(t, b)
			if err != nil {
				assert.True(t, strings.HasPrefix(err.Error(), "brownout: "), err.Error())
			}
		})
	}
}

// TestEmbedded: one call protects a handler, the flags follow the levels,
// the operator surface serves the state, OFREP and the dial, and writes
// take a token unless the listener is said to be loopback.
func TestEmbedded(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := brownout.New(brownout.Options{Features: features(), Domain: domain(), Registerer: reg,
		OperatorTokens: map[string]string{"ops": "s3cret"}})
	require.NoError(t, err)
	ctx, stop := run(t, b)
	defer stop()
	require.NoError(t, b.RegisterProvider())

	app := httptest.NewServer(b.Middleware(page(b.Client())))
	defer app.Close()
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()

	code, body := get(t, app.URL+"/?user=u1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "page recommendations reviews", body, "full brightness at the start")

	code, body = get(t, ops.URL+"/v1/state")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"recommendations"`)
	code, body = get(t, ops.URL+"/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "<html", "the dial")

	pin := func(token string) int {
		req, err := http.NewRequest(http.MethodPut, ops.URL+"/v1/features/recommendations/override",
			strings.NewReader(`{"level":0,"ttl":"10m","reason":"test"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, pin(""), "no token: refused")
	assert.Equal(t, http.StatusOK, pin("s3cret"))
	code, body = get(t, app.URL+"/?user=u1")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "page reviews", body, "the pin reaches the app's flags at once")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	assert.True(t, names["brownout_flag_evaluations_total"], "the provider's metrics")
	assert.True(t, names["brownout_requests_arrived_total"], "the recorder's metrics: %v", names)

	assert.ErrorIs(t, b.Run(ctx), brownout.ErrRunning, "Run twice")
}

// TestLoopbackWrites: with Loopback, a tokenless write from the same
// machine is taken; one sent on another site's behalf never is.
func TestLoopbackWrites(t *testing.T) {
	b, err := brownout.New(brownout.Options{Features: features(), Loopback: true})
	require.NoError(t, err)
	defer b.Close()
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()
	write := func(origin string) int {
		req, err := http.NewRequest(http.MethodPost, ops.URL+"/v1/freeze", strings.NewReader(`{"reason":"test"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusForbidden, write("https://evil.example"))
	assert.NotEqual(t, dimmer.Frozen, b.Controller().State().Features[0].Mode)
	assert.Equal(t, http.StatusOK, write(""))
	assert.Equal(t, dimmer.Frozen, b.Controller().State().Features[0].Mode)
}

// TestCORSOrigins: Options.CORSOrigins lets those origins' pages
// evaluate through Handler (the preflight granted on OFREP's routes),
// and never write (no grant on /v1/freeze, the write refused as another
// site's).
func TestCORSOrigins(t *testing.T) {
	const shop = "https://shop.example"
	b, err := brownout.New(brownout.Options{Features: features(), Loopback: true, CORSOrigins: []string{shop}})
	require.NoError(t, err)
	defer b.Close()
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()
	do := func(method, path string, hdr ...string) *http.Response {
		req, err := http.NewRequest(method, ops.URL+path, strings.NewReader(`{"context":{"targetingKey":"u1"}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := do("OPTIONS", "/ofrep/v1/evaluate/flags", "Origin", shop, "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, shop, resp.Header.Get("Access-Control-Allow-Origin"))
	resp = do("POST", "/ofrep/v1/evaluate/flags", "Origin", shop, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, shop, resp.Header.Get("Access-Control-Allow-Origin"))

	resp = do("OPTIONS", "/v1/freeze", "Origin", shop, "Access-Control-Request-Method", "POST")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "no grant for a write")
	resp = do("POST", "/v1/freeze", "Origin", shop, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.NotEqual(t, dimmer.Frozen, b.Controller().State().Features[0].Mode)
}

// TestFleet: with a daemon's URL the stack follows the daemon's levels
// and pushes its signals to it.
func TestFleet(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}},
		Features: features(),
	})
	require.NoError(t, err)
	push := fleet.NewPushSource(fleet.PushConfig{})
	a, err := api.New(api.Config{Controller: ctl, Push: push, Loopback: true})
	require.NoError(t, err)
	defer a.Close()
	daemon := httptest.NewServer(a.Handler())
	defer daemon.Close()
	dctx, dcancel := context.WithCancel(context.Background())
	defer dcancel()
	go a.Run(dctx, push)

	b, err := brownout.New(brownout.Options{Daemon: daemon.URL, Domain: domain(), Instance: "app-1"})
	require.NoError(t, err)
	assert.Nil(t, b.Controller(), "fleet mode: the daemon controls")
	_, stop := run(t, b)
	defer stop()
	require.NoError(t, b.RegisterProvider())
	app := httptest.NewServer(b.Middleware(page(b.Client())))
	defer app.Close()

	_, err = ctl.Pin("reviews", 0, time.Hour, "test")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, body := get(t, app.URL+"/?user=u1")
		return body == "page recommendations"
	}, 10*time.Second, 20*time.Millisecond, "the daemon's pin reaches the app")
	require.Eventually(t, func() bool {
		for _, in := range push.Health().Instances {
			if in.Name == "app-1" && in.OK {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the app pushes its signals")

	ops := httptest.NewServer(b.Handler())
	defer ops.Close()
	code, body := get(t, ops.URL+"/v1/history")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "fleet mode: the operator API and the dial are the daemon's")
	st := fleetState(t, ops.URL)
	assert.Equal(t, daemon.URL, st.Daemon)
	assert.Contains(t, st.Features, brownout.FleetFeature{Name: "reviews", Level: 0, Mode: "override"}, "the levels followed")
	require.Len(t, st.Sources, 2)
	// Both links up — each says so from its last exchange, so a push
	// that a loaded machine delayed past its deadline reads as down
	// until the next one: wait for a state where both are up.
	require.Eventually(t, func() bool {
		for _, s := range fleetState(t, ops.URL).Sources {
			if !s.OK {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the links to the daemon are up")
}

// TestFleetFollowsReplicas: with the URLs of a daemon's replicas the
// stack follows one of them and pushes to each; when the one followed
// dies it follows another, and keeps pushing to those up; its state and
// DaemonHealth say which, per replica.
func TestFleetFollowsReplicas(t *testing.T) {
	type replica struct {
		ctl    *dimmer.Controller
		push   *fleet.PushSource
		a      *api.API
		srv    *httptest.Server
		cancel context.CancelFunc
	}
	var rs []*replica
	for range 2 { // two daemons alike, as replicas serve the leader's levels
		ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: features()})
		require.NoError(t, err)
		_, err = ctl.Pin("reviews", 0, time.Hour, "test")
		require.NoError(t, err)
		push := fleet.NewPushSource(fleet.PushConfig{})
		a, err := api.New(api.Config{Controller: ctl, Push: push, Loopback: true})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{ctl: ctl, push: push, a: a, srv: httptest.NewServer(a.Handler()), cancel: cancel}
		go a.Run(ctx, push)
		t.Cleanup(func() { r.cancel(); r.srv.CloseClientConnections(); r.srv.Close(); r.a.Close() })
		rs = append(rs, r)
	}
	urls := []string{rs[0].srv.URL, rs[1].srv.URL}
	b, err := brownout.New(brownout.Options{Daemons: urls, Domain: domain(), Instance: "app-1"})
	require.NoError(t, err)
	_, stop := run(t, b)
	defer stop()
	require.NoError(t, b.RegisterProvider())
	app := httptest.NewServer(b.Middleware(page(b.Client())))
	defer app.Close()
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()

	pushedTo := func(r *replica) bool {
		for _, in := range r.push.Health().Instances {
			if in.Name == "app-1" && in.OK {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		_, body := get(t, app.URL+"/?user=u1")
		return body == "page recommendations" && pushedTo(rs[0]) && pushedTo(rs[1])
	}, 10*time.Second, 20*time.Millisecond, "the levels followed, the signals pushed to both")
	st := fleetState(t, ops.URL)
	assert.Equal(t, urls, st.Daemons)
	followed := slices.Index(urls, st.Daemon)
	require.GreaterOrEqual(t, followed, 0, "Daemon names the replica followed: %q", st.Daemon)
	names := func(hs []signals.SourceHealth) (out []string) {
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	assert.Equal(t, []string{"stream " + urls[0] + "/v1/stream", "stream " + urls[1] + "/v1/stream",
		"push " + urls[0] + "/v1/signals", "push " + urls[1] + "/v1/signals"}, names(st.Sources), "per replica")
	assert.True(t, st.Sources[followed].OK)
	assert.False(t, st.Sources[1-followed].OK, "one stream at a time")

	// The replica followed dies: the other is followed; pushes go on to it.
	dead, alive := rs[followed], rs[1-followed]
	dead.cancel()
	dead.srv.CloseClientConnections()
	dead.srv.Close()
	require.Eventually(t, func() bool { return fleetState(t, ops.URL).Daemon == urls[1-followed] }, 10*time.Second, 10*time.Millisecond,
		"the other replica followed")
	_, body := get(t, app.URL+"/?user=u1")
	assert.Equal(t, "page recommendations", body, "the same levels")
	require.Eventually(t, func() bool {
		hs := b.DaemonHealth()
		return !hs[2+followed].OK && hs[2+(1-followed)].OK
	}, 10*time.Second, 20*time.Millisecond, "the pushes to the dead replica fail, those to the other go on")
	before := alive.push.Health().Instances[0].LastSeen
	require.Eventually(t, func() bool { return alive.push.Health().Instances[0].LastSeen.After(before) }, 10*time.Second, 20*time.Millisecond)
}

// fleetState reads an app's GET /v1/state in fleet mode.
func fleetState(t *testing.T, base string) brownout.FleetState {
	t.Helper()
	code, body := get(t, base+"/v1/state")
	require.Equal(t, http.StatusOK, code, body)
	var st brownout.FleetState
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	return st
}

// logLines is a log's destination that a test reads while the stack
// writes it: one text line per record.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	return len(p), nil
}

// count returns how many lines hold every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestFleetSaysUnauthorized: a daemon that refuses the app's token is said
// once per link in the app's log, at WARN with the URL and what to fix,
// and shown in the app's GET /v1/state, however often the app tries; once
// the daemon takes the token (its tokens reloaded), the state clears.
func TestFleetSaysUnauthorized(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}},
		Features: features(),
	})
	require.NoError(t, err)
	push := fleet.NewPushSource(fleet.PushConfig{})
	old := map[string]string{"app": "old-token"}
	a, err := api.New(api.Config{Controller: ctl, Push: push, EvalTokens: old, PushTokens: old})
	require.NoError(t, err)
	defer a.Close()
	daemon := httptest.NewServer(a.Handler()) // on 127.0.0.1
	defer daemon.Close()
	dctx, dcancel := context.WithCancel(context.Background())
	defer dcancel()
	go a.Run(dctx, push)

	logs := &logLines{}
	b, err := brownout.New(brownout.Options{Daemon: daemon.URL, DaemonToken: "new-token", Domain: domain(), Instance: "app-1",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	_, stop := run(t, b)
	defer stop()
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()

	// Several refusals on each link (the stream retries within a second,
	// the pusher within two).
	require.Eventually(t, func() bool {
		h := b.DaemonHealth()
		return len(h) == 2 && h[0].Errors >= 3 && h[1].Errors >= 2
	}, 10*time.Second, 20*time.Millisecond, "the daemon refuses both links, several times")
	st := fleetState(t, ops.URL)
	require.Len(t, st.Sources, 2)
	for i, want := range []struct{ name, err string }{
		{"stream " + daemon.URL + "/v1/stream", "unauthorized (401) — check the token"},
		{"push " + daemon.URL + "/v1/signals", "unauthorized (401) — check the push token"},
	} {
		s := st.Sources[i]
		assert.Equal(t, want.name, s.Name)
		assert.False(t, s.OK, s.Name)
		assert.Contains(t, s.LastError, want.err, s.Name)
	}
	assert.Equal(t, "stale", st.Mode, "no levels from a daemon that refuses the app")
	assert.Equal(t, 1, logs.count("level=WARN", "brownoutd refuses this app's token: check it", "url="+daemon.URL, "401"),
		"one line for the stream, however many attempts")
	assert.Equal(t, 1, logs.count("level=WARN", "the daemon refuses this app's pushes: check the push token", "url="+daemon.URL+"/v1/signals", "401"),
		"one line for the pushes")

	fixed := map[string]string{"app": "new-token"}
	a.SetTokens(nil, fixed, fixed)
	require.Eventually(t, func() bool {
		st := fleetState(t, ops.URL)
		return len(st.Sources) == 2 && st.Sources[0].OK && st.Sources[1].OK
	}, 15*time.Second, 20*time.Millisecond, "the links recover once the daemon takes the token")
	assert.Equal(t, 1, logs.count("level=INFO", "following brownoutd again"))
	assert.Equal(t, 1, logs.count("level=INFO", "push recovered"))
	assert.Equal(t, 2, logs.count("level=WARN"), "nothing more was said")
}

// TestCostsLearnedEndToEnd: through the middleware, the provider and the
// control loop, the controller learns what a feature costs: reviews,
// pinned at half the users, adds 4 ms to a 4 ms page.
func TestCostsLearnedEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of real requests")
	}
	b, err := brownout.New(brownout.Options{Features: features(), Domain: domain()})
	require.NoError(t, err)
	_, stop := run(t, b)
	defer stop()
	require.NoError(t, b.RegisterProvider())
	_, err = b.Controller().Pin("reviews", 0.5, time.Hour, "test")
	require.NoError(t, err)
	client := b.Client()
	app := httptest.NewServer(b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ec := openfeature.NewEvaluationContext(r.URL.Query().Get("user"), nil)
		work := 4 * time.Millisecond
		if on, _ := client.BooleanValue(r.Context(), "reviews", false, ec); on {
			work += 4 * time.Millisecond
		}
		time.Sleep(work) // the page's work: a stand-in for a worker's time
	})))
	defer app.Close()
	var known brownout.CostEstimate
	learned := false
	for i := 0; i < 4000 && !learned; i++ {
		code, _ := get(t, fmt.Sprintf("%s/?user=u%d", app.URL, i))
		require.Equal(t, http.StatusOK, code)
		if i%50 == 49 {
			if e := b.Controller().Costs()[1]; e.Contrasted >= 3 && e.Known() {
				known, learned = e, true
			}
		}
	}
	require.True(t, learned, "reviews' cost learned from the requests")
	t.Logf("reviews: %.2f ± %.2f of a page (true 1), %d ticks", known.Value, known.SE, known.Contrasted)
	assert.InDelta(t, 1, known.Value, 0.5)
}

// TestCloseEndsStreamsAndReleasesTheStateDir: Close ends the operator
// API's open streams (a server's graceful shutdown does not wait on them)
// and writes nothing more to the state directory, which another stack
// may own now.
func TestCloseEndsStreamsAndReleasesTheStateDir(t *testing.T) {
	dir := t.TempDir()
	b, err := brownout.New(brownout.Options{Features: features(), StateDir: dir, Loopback: true})
	require.NoError(t, err)
	ops := httptest.NewServer(b.Handler())
	defer ops.Close()
	resp, err := http.Get(ops.URL + "/v1/stream")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ended := make(chan struct{})
	go func() {
		io.Copy(io.Discard, resp.Body)
		close(ended)
	}()
	require.NoError(t, b.Close())
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream still open 5 s after Close")
	}

	b2, err := brownout.New(brownout.Options{Features: features(), StateDir: dir})
	require.NoError(t, err, "the directory is free after Close")
	defer b2.Close()
	before, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, ops.URL+"/v1/freeze", strings.NewReader(`{"reason":"late"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	after, err := os.ReadFile(filepath.Join(dir, "operator.json"))
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "a closed stack does not write the directory")
}

func TestNewRefusesNoFeaturesAndNaN(t *testing.T) {
	_, err := brownout.New(brownout.Options{})
	assert.ErrorContains(t, err, "no Features")
	_, err = brownout.New(brownout.Options{Features: features(), MaxRejectRatio: math.NaN()})
	assert.ErrorContains(t, err, "MaxRejectRatio")
}

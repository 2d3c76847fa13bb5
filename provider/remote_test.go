package provider_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/pipenet"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
)

// daemon is a controller behind the api package on a fixed 127.0.0.1
// address, so that it can be killed and restarted in place.
type daemon struct {
	ctl  *dimmer.Controller
	api  *api.API
	srv  *http.Server
	addr string
}

func startDaemon(t *testing.T, addr string) *daemon {
	t.Helper()
	ctl, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Segments: []dimmer.Segment{{Name: "vip", Offset: 0.2}},
	})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl, Defaults: map[string]bool{"reviews": false}})
	require.NoError(t, err)
	var ln net.Listener
	for i := 0; i < 50; i++ { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	d := &daemon{ctl: ctl, api: a, srv: &http.Server{Handler: a.Handler()}, addr: ln.Addr().String()}
	go d.srv.Serve(ln)
	t.Cleanup(func() { d.kill() })
	return d
}

// change publishes a new state and fans it out (as the daemon's loop does).
func (d *daemon) change(t *testing.T, level float64) *dimmer.State {
	t.Helper()
	st, err := d.ctl.Pin("recommendations", level, time.Hour, "test")
	require.NoError(t, err)
	d.api.Publish(st)
	return st
}

func (d *daemon) kill() {
	d.api.Shutdown()
	d.srv.Close()
}

func level(r *provider.Remote, name string) float64 {
	st := r.State()
	i, ok := st.FeatureIndex(name)
	if !ok {
		return -1
	}
	return st.LevelAt(i, -1)
}

// TestRemoteFollows: the same answers as in-process, for many users and
// a segment; a daemon killed and restarted (lower generation, another
// boot) is followed through STALE and READY; after the TTL the defaults.
func TestRemoteFollows(t *testing.T) {
	d := startDaemon(t, "127.0.0.1:0")
	st := d.change(t, 0.37)
	r, err := provider.NewRemote(provider.RemoteOptions{URL: "http://" + d.addr, StaleTTL: 400 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	require.Eventually(t, func() bool { return level(r, "recommendations") == 0.37 }, 5*time.Second, 10*time.Millisecond, "followed")

	local, _ := provider.New(d.ctl, provider.Options{})
	remote, _ := provider.New(r, provider.Options{})
	for i := range 2000 {
		for _, attrs := range []map[string]any{{}, {"segment": "vip"}} {
			fc := openfeature.FlattenedContext{openfeature.TargetingKey: "user-" + strconv.Itoa(i)}
			for k, v := range attrs {
				fc[k] = v
			}
			a := local.BooleanEvaluation(ctx, "recommendations", false, fc)
			b := remote.BooleanEvaluation(ctx, "recommendations", false, fc)
			require.Equal(t, a.Value, b.Value, "user %d %v", i, attrs)
		}
	}
	fl := remote.FloatEvaluation(ctx, "recommendations.level", -1, openfeature.FlattenedContext{openfeature.TargetingKey: "u"})
	assert.Equal(t, "override", fl.FlagMetadata["mode"])
	assert.Equal(t, "test", fl.FlagMetadata["reason"])
	assert.EqualValues(t, st.Generation, fl.FlagMetadata["generation"], "the daemon's generation")

	// Through the SDK, with its events.
	events := make(chan openfeature.EventType, 16)
	rp, _ := provider.New(r, provider.Options{})
	require.NoError(t, openfeature.SetNamedProviderAndWait("remote-test", rp))
	client := openfeature.NewClient("remote-test")
	for _, kind := range []openfeature.EventType{openfeature.ProviderStale, openfeature.ProviderReady} {
		cb := func(openfeature.EventDetails) { events <- kind }
		client.AddHandler(kind, &cb)
	}
	<-events // READY on registration

	// Kill the daemon: levels held, STALE; evaluations answer at once.
	d.kill()
	require.Eventually(t, func() bool { return !r.Connected() }, 5*time.Second, 10*time.Millisecond, "disconnected")
	assert.Equal(t, openfeature.ProviderStale, <-events)
	start := time.Now()
	v, _ := client.FloatValue(ctx, "recommendations.level", -1, openfeature.NewEvaluationContext("u", nil))
	assert.Equal(t, 0.37, v, "last-known level held")
	// No I/O on an evaluation: it answers from memory, where a blocking
	// one would wait out a connection attempt or a backoff. The bound is
	// loose so that a busy machine under -race does not fail it.
	assert.Less(t, time.Since(start), time.Second, "never blocked")

	// After the TTL: the defaults (reviews fails closed, as the daemon said).
	require.Eventually(t, func() bool { return level(r, "recommendations") == 1 }, 5*time.Second, 10*time.Millisecond, "defaults after the TTL")
	on, _ := client.BooleanValue(ctx, "reviews", true, openfeature.NewEvaluationContext("u", nil))
	assert.False(t, on, "reviews fails closed")

	// A restarted daemon on the same address, generation starting again.
	d2 := startDaemon(t, d.addr)
	d2.change(t, 0.6)
	require.Eventually(t, func() bool { return level(r, "recommendations") == 0.6 }, 5*time.Second, 10*time.Millisecond, "followed after the restart")
	assert.Equal(t, openfeature.ProviderReady, <-events)
	assert.Greater(t, r.State().Generation, st.Generation, "local generations never go back")
}

// TestRemoteColdStart: with the daemon down, evaluations use the defaults
// at once; the last-known state file is used while fresh; the follower
// catches up when the daemon appears.
func TestRemoteColdStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nobody there
	file := filepath.Join(t.TempDir(), "brownout-state.json")
	r, err := provider.NewRemote(provider.RemoteOptions{URL: "http://" + addr, StateFile: file,
		Defaults: map[string]bool{"recommendations": true, "reviews": false}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	require.NoError(t, err)
	p, _ := provider.New(r, provider.Options{})
	start := time.Now()
	require.NoError(t, openfeature.SetNamedProviderAndWait("cold-test", p))
	assert.Less(t, time.Since(start), time.Second, "Init is bounded")
	c := openfeature.NewClient("cold-test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ec := openfeature.NewEvaluationContext("u", nil)
	on, _ := c.BooleanValue(ctx, "recommendations", false, ec)
	assert.True(t, on, "fail open")
	on, _ = c.BooleanValue(ctx, "reviews", true, ec)
	assert.False(t, on, "fail closed")
	go r.Run(ctx)

	d := startDaemon(t, addr)
	d.change(t, 0.25)
	require.Eventually(t, func() bool { return level(r, "recommendations") == 0.25 }, 5*time.Second, 10*time.Millisecond, "caught up")
	d.kill()

	// The app restarts with the daemon down: the state file's levels.
	r2, err := provider.NewRemote(provider.RemoteOptions{URL: "http://" + addr, StateFile: file})
	require.NoError(t, err)
	assert.Equal(t, 0.25, level(r2, "recommendations"))
	assert.Equal(t, dimmer.Stale, r2.State().StateMode())
}

// TestRemoteBadStreams: garbage and a stalled stream make the follower
// reconnect (with backoff), never take a bad state, never block.
func TestRemoteBadStreams(t *testing.T) {
	var conns atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /garbage/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		conns.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: state\ndata: {\"v\":1,\"features\":[{\"name\":\"x\",\"level\":7}]}\n\n")
	})
	var stalls atomic.Int32
	mux.HandleFunc("GET /stall/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		stalls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /html/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>"))
	})
	mux.HandleFunc("GET /badseed/v1/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: state\ndata: {\"v\":1,\"shed_seed\":\"c0ffee\",\"features\":[{\"name\":\"x\",\"level\":0.5}]}\n\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, path := range []string{"/garbage", "/stall", "/html", "/badseed"} {
		r, err := provider.NewRemote(provider.RemoteOptions{URL: base + path, ReadTimeout: 100 * time.Millisecond,
			Defaults: map[string]bool{"x": true}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
		require.NoError(t, err)
		go r.Run(ctx)
		time.Sleep(400 * time.Millisecond)
		assert.Equal(t, 1.0, level(r, "x"), "%s: the default, not the bad state", path)
		assert.False(t, r.Connected(), path)
		_, ok := r.ShedSeed()
		assert.False(t, ok, "%s: no seed from a bad state", path)
	}
	assert.GreaterOrEqual(t, conns.Load(), int32(3), "garbage: reconnected")
	assert.GreaterOrEqual(t, stalls.Load(), int32(2), "stalled: timed out and reconnected")
}

// logLines is a log's destination that a test reads while a Remote
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

// take returns the lines written since the last take.
func (l *logLines) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// TestRemoteSaysUnauthorizedOnce: a daemon that refuses the token is one
// WARN with the URL and what to fix, however often the follower tries,
// and Health says it until a state arrives again; every other change of
// the link is one line too.
func TestRemoteSaysUnauthorizedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		status, asked, changed := http.StatusUnauthorized, 0, make(chan struct{})
		l := pipenet.New()
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			st, end := status, changed
			asked++
			mu.Unlock()
			switch st {
			case http.StatusOK: // one state, then the stream holds until the test changes the daemon
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "id: 1-1\nevent: state\ndata: {\"v\":1,\"boot\":1,\"generation\":1,\"mode\":\"auto\",\"features\":[{\"name\":\"x\",\"level\":0.5}]}\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-end:
				case <-r.Context().Done():
				}
			case http.StatusUnauthorized: // as brownoutd answers a stream without one of its tokens
				w.Header().Set("WWW-Authenticate", `Bearer realm="brownout stream"`)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(st)
				fmt.Fprint(w, `{"type":"urn:brownout:api:unauthorized","title":"Unauthorized","status":401,"detail":"this stream needs a token: Authorization: Bearer, X-API-Key, or ?token= from POST /v1/stream/token"}`)
			default:
				w.WriteHeader(st)
			}
		}))
		srv.Listener = l
		srv.Start()
		defer srv.Close()
		tr := &http.Transport{DialContext: l.Dial}
		defer tr.CloseIdleConnections()

		logs := &logLines{}
		r, err := provider.NewRemote(provider.RemoteOptions{URL: srv.URL, Token: "wrong", Client: &http.Client{Transport: tr},
			MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)
		url := srv.URL + "/v1/stream"
		assert.Equal(t, signals.SourceHealth{Name: "stream " + url}, r.Health(), "before the first attempt")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()

		refuses := `level=WARN msg="provider: remote: brownoutd refuses this app's token: check it" url=` + srv.URL
		following := `level=INFO msg="provider: remote: following brownoutd again" url=` + srv.URL
		for _, phase := range []struct {
			status int
			line   string // the one line the phase logs
			err    string // in Health's LastError, kept after recovery
		}{
			{http.StatusUnauthorized, refuses, url + ": unauthorized (401) — check the token (this app's, and the daemon's evaluation or operator tokens): this stream needs a token"},
			{http.StatusOK, following, "unauthorized (401)"},
			// The daemon ends the stream, then answers 503: lost, once.
			{http.StatusServiceUnavailable, `level=WARN msg="provider: remote: disconnected from brownoutd" url=` + srv.URL, "503 Service Unavailable"},
			{http.StatusForbidden, refuses, "forbidden (403) — check the token"},
			{http.StatusOK, following, "forbidden (403)"},
		} {
			mu.Lock()
			status, asked = phase.status, 0
			close(changed)
			changed = make(chan struct{})
			mu.Unlock()
			time.Sleep(20 * time.Second) // fake time: several attempts while refused
			synctest.Wait()
			ok := phase.status == http.StatusOK
			mu.Lock()
			if ok {
				assert.Equal(t, 1, asked, "one stream, held")
			} else {
				assert.GreaterOrEqual(t, asked, 4, "%d: attempts", phase.status)
			}
			mu.Unlock()
			lines := logs.take()
			require.Len(t, lines, 1, "%d: one line, however many attempts: %q", phase.status, lines)
			assert.Contains(t, lines[0], phase.line, "%d", phase.status)
			h := r.Health()
			assert.Contains(t, h.LastError, phase.err, "%d", phase.status)
			assert.Equal(t, ok, h.OK, "%d", phase.status)
			assert.Equal(t, ok, r.Connected(), "%d", phase.status)
			assert.Equal(t, ok, h.LastSuccess.After(h.LastErrorAt), "%d: the newer of the two", phase.status)
		}
		assert.Equal(t, 0.5, level(r, "x"), "the daemon's level")
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

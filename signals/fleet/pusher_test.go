package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pipenet"
	"github.com/brownout/brownout/signals"
)

// TestPusherEndToEnd: two Pushers post their Recorders to an httptest
// server of a PushSource; the source's snapshot is the fleet's.
func TestPusherEndToEnd(t *testing.T) {
	c := &clock{t: time.Now()} // the Pushers read their Recorders on the real clock
	src := newPushSource(c)
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		src.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	recs := []*signals.Recorder{signals.NewRecorder(signals.Config{}), signals.NewRecorder(signals.Config{})}
	var pushers []*Pusher
	for i, id := range []string{"shop-1", "shop-2"} {
		p, err := NewPusher(recs[i], PusherConfig{URL: srv.URL + "/v1/signals", Instance: id, Token: "s3cret"})
		require.NoError(t, err)
		pushers = append(pushers, p)
	}
	ctx := context.Background()
	pushAll := func() {
		for _, p := range pushers {
			require.NoError(t, p.Push(ctx))
		}
	}
	pushAll()
	now := time.Now() // the Recorders' clock; the source's is c
	serve(recs[0], now, signals.Default, 500, 10*time.Millisecond, 0, 0)
	serve(recs[1], now, signals.Critical, 500, 10*time.Millisecond, 10, 300*time.Millisecond)
	recs[1].Start(now)
	c.t = c.t.Add(2 * time.Second)
	pushAll()

	snap, err := src.Snapshot(ctx, c.t)
	require.NoError(t, err)
	p99, ok := snap.Get(signals.LatencyP99)
	require.True(t, ok)
	assert.InEpsilon(t, 0.300, p99, 0.05, "50 slow of 1000: the p99 is slow")
	p50, _ := snap.Get(signals.LatencyP50)
	assert.InEpsilon(t, 0.010, p50, 0.05)
	assert.Equal(t, uint64(500), snap.Classes[signals.Default].Arrived)
	assert.Equal(t, uint64(500), snap.Classes[signals.Critical].Arrived)
	inf, _ := snap.Get(signals.InFlight)
	assert.Equal(t, 1.0, inf)
	arr, ok := snap.Get(signals.ArrivalRate)
	require.True(t, ok)
	assert.Greater(t, arr, 0.0, "timed by the instances' own clocks")

	for _, a := range auth {
		assert.Equal(t, "Bearer s3cret", a)
	}
	for _, p := range pushers {
		st := p.Stats()
		assert.Equal(t, uint64(2), st.Pushed)
		assert.Zero(t, st.Failed)
	}
	h := src.Health()
	assert.True(t, h.OK)
	require.Len(t, h.Instances, 2)
	assert.Equal(t, "shop-1", h.Instances[0].Name)
	assert.Equal(t, c.t, h.Instances[0].LastSeen)
}

func TestNewPusherRejectsBadConfig(t *testing.T) {
	rec := signals.NewRecorder(signals.Config{})
	for _, tc := range []struct {
		name string
		cfg  PusherConfig
		want string
	}{
		{"no URL", PusherConfig{Instance: "x"}, "fleet: pusher: no URL: want one per replica, e.g. http://brownoutd:8080/v1/signals"},
		{"empty list", PusherConfig{URLs: []string{}, Instance: "x"}, "fleet: pusher: no URL"},
		{"ftp", PusherConfig{URL: "ftp://x/", Instance: "x"}, `fleet: pusher: URL "ftp://x/": want an http or https URL`},
		{"bad among good", PusherConfig{URLs: []string{"http://a/v1/signals", "http:///v1/signals"}, Instance: "x"}, `URL "http:///v1/signals": no host`},
		{"twice", PusherConfig{URLs: []string{"http://a/v1/signals", "http://A:80/v1/signals"}, Instance: "x"}, "the same replica twice"},
		{"both", PusherConfig{URL: "http://a/v1/signals", URLs: []string{"http://b/v1/signals"}, Instance: "x"}, "URL and URLs both set"},
		{"no instance", PusherConfig{URL: "http://x/"}, `"instance" missing`},
		{"buckets", PusherConfig{URL: "http://x/", Instance: "x", Buckets: []float64{1, 0.5}}, "not ascending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPusher(rec, tc.cfg)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	_, err := NewPusher(nil, PusherConfig{URL: "http://x/", Instance: "x"})
	assert.ErrorContains(t, err, "no recorder")
}

// TestPusherRunBacksOff runs a Pusher against an httptest server of a
// PushSource in a synctest bubble: it pushes every Interval, backs off
// with jitter while the server fails (honouring Retry-After), and comes
// back to Interval when it recovers.
func TestPusherRunBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := NewPushSource(PushConfig{})
		var mu sync.Mutex
		var attempts []time.Time
		failing, retryAfter := false, ""
		l := pipenet.New()
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			attempts = append(attempts, time.Now())
			fail, ra := failing, retryAfter
			mu.Unlock()
			if fail {
				w.Header().Set("Retry-After", ra)
				writeProblem(w, &pushProblem{http.StatusServiceUnavailable, "too-many-instances", "busy"})
				return
			}
			src.ServeHTTP(w, r)
		}))
		srv.Listener = l
		srv.Start()
		defer srv.Close()
		tr := &http.Transport{DialContext: l.Dial}
		defer tr.CloseIdleConnections()

		rec := signals.NewRecorder(signals.Config{})
		p, err := NewPusher(rec, PusherConfig{URL: srv.URL + "/v1/signals", Instance: "shop-1",
			Client: &http.Client{Transport: tr}, MaxBackoff: 8 * time.Second})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()

		set := func(fail bool, ra string) {
			mu.Lock()
			failing, retryAfter = fail, ra
			mu.Unlock()
		}
		gaps := func() []time.Duration {
			mu.Lock()
			defer mu.Unlock()
			var out []time.Duration
			for i := 1; i < len(attempts); i++ {
				out = append(out, attempts[i].Sub(attempts[i-1]))
			}
			attempts = attempts[len(attempts)-1:]
			return out
		}

		time.Sleep(3500 * time.Millisecond) // fake time: pushes at 0, 1, 2, 3 s
		synctest.Wait()
		assert.Equal(t, []time.Duration{time.Second, time.Second, time.Second}, gaps())
		_, err = src.Snapshot(ctx, time.Now())
		require.NoError(t, err)
		assert.Equal(t, uint64(4), p.Stats().Pushed)

		set(true, "")
		time.Sleep(30 * time.Second)
		synctest.Wait()
		g := gaps()
		require.GreaterOrEqual(t, len(g), 4)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
			// The gap before attempt i+1 follows i failures: Interval×2^i
			// capped at MaxBackoff, jittered to [½, 1] of it.
			if i == 0 {
				assert.Equal(t, want, g[0], "the first failure came on schedule")
				continue
			}
			assert.GreaterOrEqual(t, g[i], want/2, "gap %d", i)
			assert.LessOrEqual(t, g[i], want, "gap %d", i)
		}
		for _, d := range g[4:] {
			assert.LessOrEqual(t, d, 8*time.Second, "MaxBackoff caps the wait")
		}
		st := p.Stats()
		assert.Equal(t, uint64(len(g)), st.Failed)
		assert.Contains(t, st.LastError, "HTTP 503 Service Unavailable: busy")

		set(true, "7") // Retry-After: at least 7 s
		time.Sleep(40 * time.Second)
		synctest.Wait()
		for _, d := range gaps()[1:] {
			assert.GreaterOrEqual(t, d, 7*time.Second)
		}

		set(false, "")
		time.Sleep(20 * time.Second)
		synctest.Wait()
		g = gaps()
		require.NotEmpty(t, g)
		for _, d := range g[1:] {
			assert.Equal(t, time.Second, d, "back to Interval after a success")
		}
		snap, err := src.Snapshot(ctx, time.Now())
		require.NoError(t, err)
		assert.True(t, snap.ClassesOK)

		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

// logLines is a log's destination that a test reads while a Pusher
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

// TestPusherSaysUnauthorizedOnce: a daemon that refuses the token is one
// WARN with the URL and what to fix, however many pushes it refuses, and
// the Pusher's Health says it until a push is accepted again; every other
// change of state is one line too.
func TestPusherSaysUnauthorizedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := NewPushSource(PushConfig{})
		var mu sync.Mutex
		status, asked := http.StatusUnauthorized, 0
		l := pipenet.New()
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			st := status
			asked++
			mu.Unlock()
			switch st {
			case http.StatusOK:
				src.ServeHTTP(w, r)
			case http.StatusUnauthorized: // as brownoutd answers a push without one of its tokens
				w.Header().Set("WWW-Authenticate", `Bearer realm="brownout push"`)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(st)
				fmt.Fprint(w, `{"type":"urn:brownout:api:unauthorized","title":"Unauthorized","status":401,"detail":"pushes need a push token (Authorization: Bearer …)"}`)
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
		url := srv.URL + "/v1/signals"
		p, err := NewPusher(signals.NewRecorder(signals.Config{}), PusherConfig{URL: url, Instance: "shop-1", Token: "wrong",
			Client: &http.Client{Transport: tr}, MaxBackoff: 4 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)
		assert.Equal(t, signals.SourceHealth{Name: "push " + url}, p.Health(), "before the first push")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- p.Run(ctx) }()

		refuses := `level=WARN msg="fleet: the daemon refuses this app's pushes: check the push token" url=` + url
		recovered := `level=INFO msg="fleet: push recovered" url=` + url
		for _, phase := range []struct {
			status int
			line   string // the one line the phase logs
			err    string // in Health's LastError, kept after recovery
		}{
			{http.StatusUnauthorized, refuses, "push to " + url + ": unauthorized (401) — check the push token (this app's, and the daemon's push tokens): pushes need a push token"},
			{http.StatusOK, recovered, "unauthorized (401)"},
			{http.StatusServiceUnavailable, `level=WARN msg="fleet: push failed; backing off" url=` + url, "HTTP 503 Service Unavailable"},
			{http.StatusForbidden, refuses, "forbidden (403) — check the push token"},
			{http.StatusOK, recovered, "forbidden (403)"},
		} {
			mu.Lock()
			status, asked = phase.status, 0
			mu.Unlock()
			time.Sleep(20 * time.Second) // fake time: several pushes, backing off while they fail
			synctest.Wait()
			mu.Lock()
			assert.GreaterOrEqual(t, asked, 4, "%d: pushes", phase.status)
			mu.Unlock()
			lines := logs.take()
			require.Len(t, lines, 1, "%d: one line, however many pushes: %q", phase.status, lines)
			assert.Contains(t, lines[0], phase.line, "%d", phase.status)
			h := p.Health()
			assert.Contains(t, h.LastError, phase.err, "%d", phase.status)
			ok := phase.status == http.StatusOK
			assert.Equal(t, ok, h.OK, "%d", phase.status)
			assert.Equal(t, ok, h.LastSuccess.After(h.LastErrorAt), "%d: the newer of the two", phase.status)
			if !ok {
				err := p.Push(ctx)
				assert.Equal(t, phase.status != http.StatusServiceUnavailable, errors.Is(err, ErrUnauthorized), "%d: %v", phase.status, err)
			}
		}
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

// replicaServer is one of a daemon's replicas taking pushes, in a
// synctest bubble: a PushSource behind a switch that makes it refuse
// (503) or hang until the push times out; it keeps each push's body and
// arrival.
type replicaServer struct {
	src *PushSource
	url string

	mu     sync.Mutex
	mode   string // "", "refuse" or "hang"
	bodies []string
	at     []time.Time
	last   time.Time // the arrival before at's, for the gaps
}

func newReplicaServer(t *testing.T, n *pipenet.Net) *replicaServer {
	s := &replicaServer{src: NewPushSource(PushConfig{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		s.mu.Lock()
		mode := s.mode
		s.bodies, s.at = append(s.bodies, string(b)), append(s.at, time.Now())
		s.mu.Unlock()
		switch mode {
		case "refuse":
			writeProblem(w, &pushProblem{http.StatusServiceUnavailable, "unavailable", "a replica refusing"})
		case "hang":
			<-r.Context().Done()
		default:
			s.src.ServeHTTP(w, r)
		}
	}))
	srv.Listener = n.Listen()
	srv.Start()
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/v1/signals"
	return s
}

func (s *replicaServer) set(mode string) {
	s.mu.Lock()
	s.mode = mode
	s.mu.Unlock()
}

// take returns the pushes since the last take: their bodies' times,
// each body by its time, and the gaps between their arrivals.
func (s *replicaServer) take(t *testing.T) (times []string, body map[string]string, gaps []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	body = map[string]string{}
	for i, b := range s.bodies {
		var v struct{ Time string }
		require.NoError(t, json.Unmarshal([]byte(b), &v))
		times = append(times, v.Time)
		body[v.Time] = b
		if !s.last.IsZero() {
			gaps = append(gaps, s.at[i].Sub(s.last))
		}
		s.last = s.at[i]
	}
	s.bodies, s.at = nil, nil
	return times, body, gaps
}

// TestPusherPushesToEveryReplica: with three URLs, every round's push
// goes to each replica, the same body; a replica that refuses backs off
// on its own, one that hangs is skipped while its push is under way
// (Timeout), and neither delays the pushes to the healthy one by a
// moment; each URL's health says how it fares.
func TestPusherPushesToEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &pipenet.Net{}
		ok, refusing, hanging := newReplicaServer(t, n), newReplicaServer(t, n), newReplicaServer(t, n)
		tr := &http.Transport{DialContext: n.Dial}
		defer tr.CloseIdleConnections()
		rec := signals.NewRecorder(signals.Config{})
		p, err := NewPusher(rec, PusherConfig{URLs: []string{ok.url, refusing.url, hanging.url}, Instance: "shop-1",
			Client: &http.Client{Transport: tr}, MaxBackoff: 8 * time.Second})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()

		time.Sleep(2500 * time.Millisecond) // rounds at 0, 1, 2 s to all three
		synctest.Wait()
		times, bodies, _ := ok.take(t)
		require.Len(t, times, 3)
		for _, s := range []*replicaServer{refusing, hanging} {
			got, b, _ := s.take(t)
			assert.Equal(t, times, got, "every round to every replica")
			assert.Equal(t, bodies, b, "the same bodies")
		}

		refusing.set("refuse")
		hanging.set("hang")
		time.Sleep(40 * time.Second)
		synctest.Wait()
		_, _, gaps := ok.take(t)
		require.Len(t, gaps, 40)
		for _, g := range gaps {
			require.Equal(t, time.Second, g, "the healthy replica's pushes, never delayed")
		}
		_, _, gaps = refusing.take(t)
		require.GreaterOrEqual(t, len(gaps), 5)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
			if i == 0 {
				assert.Equal(t, want, gaps[0], "the first refusal came on schedule")
				continue
			}
			assert.GreaterOrEqual(t, gaps[i], want/2, "gap %d", i)
			assert.LessOrEqual(t, gaps[i], want, "gap %d", i)
		}
		for _, g := range gaps[4:] {
			assert.LessOrEqual(t, g, 8*time.Second, "MaxBackoff caps the wait")
		}
		times, _, gaps = hanging.take(t)
		assert.LessOrEqual(t, len(times), 12, "a hanging replica: one push at a time, backing off")
		for _, g := range gaps[1:] {
			assert.GreaterOrEqual(t, g, 2*time.Second, "never a push while one is under way (Timeout 2 s)")
		}

		h := p.HealthByURL()
		require.Len(t, h, 3)
		assert.Equal(t, "push "+ok.url, h[0].Name)
		assert.True(t, h[0].OK)
		assert.Zero(t, h[0].Errors)
		assert.False(t, h[1].OK)
		assert.Contains(t, h[1].LastError, "fleet: push to "+refusing.url+": HTTP 503 Service Unavailable: a replica refusing")
		assert.False(t, h[2].OK)
		assert.Contains(t, h[2].LastError, "context deadline exceeded")
		all := p.Health()
		assert.True(t, all.OK, "the signals reach the daemon")
		assert.Equal(t, "push "+ok.url+", "+refusing.url+", "+hanging.url, all.Name)
		assert.Equal(t, h[1].Errors+h[2].Errors, all.Errors)

		// Back: every round to every replica again, the same bodies.
		refusing.set("")
		hanging.set("")
		time.Sleep(15 * time.Second) // past a capped wait
		synctest.Wait()
		ok.take(t)
		refusing.take(t)
		hanging.take(t)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		times, bodies, _ = ok.take(t)
		require.Len(t, times, 5)
		for _, s := range []*replicaServer{refusing, hanging} {
			got, b, _ := s.take(t)
			assert.Equal(t, times, got)
			assert.Equal(t, bodies, b)
			_, err := s.src.Snapshot(ctx, time.Now())
			assert.NoError(t, err, "its windows have the instance")
		}
		for _, h := range p.HealthByURL() {
			assert.True(t, h.OK, h.Name)
		}
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

// TestPusherPushOnceToEveryReplica: Push sends one body to every URL and
// reports the failures joined; ErrUnauthorized is found among them.
func TestPusherPushOnceToEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &pipenet.Net{}
		a, b := newReplicaServer(t, n), newReplicaServer(t, n)
		tr := &http.Transport{DialContext: n.Dial}
		defer tr.CloseIdleConnections()
		p, err := NewPusher(signals.NewRecorder(signals.Config{}), PusherConfig{URLs: []string{a.url, b.url, "http://127.0.0.1:9/v1/signals"},
			Instance: "shop-1", Client: &http.Client{Transport: tr}})
		require.NoError(t, err)
		err = p.Push(t.Context())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "fleet: push to http://127.0.0.1:9/v1/signals: ")
		assert.Contains(t, err.Error(), "connection refused")
		ta, ba, _ := a.take(t)
		tb, bb, _ := b.take(t)
		require.Len(t, ta, 1)
		assert.Equal(t, ta, tb)
		assert.Equal(t, ba, bb, "one body")
		st := p.Stats()
		assert.Equal(t, uint64(2), st.Pushed)
		assert.Equal(t, uint64(1), st.Failed)
	})
}

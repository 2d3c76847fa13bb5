package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/internal/testsrv"
)

// An app on the replicas: the root package in fleet mode with every
// replica's URL (Options.Daemons: the remote provider follows one
// replica's stream at a time, the pusher pushes to each), in this test's
// process, overloaded by its own requests; what its provider holds is
// recorded at each change, so that a test can say how long the app was
// stale across a change of leader.

// appLatency is what each of the app's requests takes: over haConfig's
// 300 ms target, an overload that dims by steps.
const appLatency = 400 * time.Millisecond

// fleetApp is the app and the record of what its provider held.
type fleetApp struct {
	t   *testing.T
	b   *brownout.Brownout
	log *testsrv.Buffer

	mu      sync.Mutex
	samples []appSample
}

// appSample is the provider's state from at until the next sample.
type appSample struct {
	at        time.Time
	following string    // the replica followed, "" while none
	mode      string    // the state's mode: "stale" while the provider says so
	time      time.Time // the daemon's state's time: it grows with the generation
	reason    string
	levels    map[string]float64
	modes     map[string]string
}

// startApp starts the app on the replicas' URLs, overloaded; it runs
// until the test ends.
func startApp(t *testing.T, urls []string) *fleetApp {
	t.Helper()
	return startAppWith(t, urls, appConfig{Instance: "app-1", Features: []string{"recommendations", "reviews", "gallery"},
		Latency: appLatency, Workers: 10})
}

// appConfig is an app's service on the daemon ("" for a daemon of one),
// its name in its pushes, its features, and its traffic: Workers
// requests at a time, each Latency long.
type appConfig struct {
	Service, Instance string
	Features          []string
	Latency           time.Duration
	Workers           int
}

// startAppWith starts an app of c on the replicas' URLs; it runs until
// the test ends.
func startAppWith(t *testing.T, urls []string, c appConfig) *fleetApp {
	t.Helper()
	a := &fleetApp{t: t, log: &testsrv.Buffer{}}
	var features []brownout.Feature
	for _, f := range c.Features {
		features = append(features, brownout.Feature{Name: f})
	}
	b, err := brownout.New(brownout.Options{Daemons: urls, Service: c.Service, Instance: c.Instance, Features: features,
		Logger: slog.New(slog.NewTextHandler(a.log, nil))})
	require.NoError(t, err)
	a.b = b
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		b.Close()
	})
	ch, stop := b.Remote().Subscribe()
	a.record(b.Remote().State())
	wg.Go(func() {
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case st := <-ch:
				a.record(st)
			}
		}
	})
	wg.Go(func() { b.Run(ctx) })
	// Its traffic: c.Workers requests at a time, each c.Latency long.
	h := b.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(c.Latency):
		}
	}))
	for range c.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/product/7", nil))
			}
		})
	}
	return a
}

func (a *fleetApp) record(st *dimmer.State) {
	s := appSample{at: time.Now(), following: a.b.Remote().Following(), mode: st.StateMode().String(), time: st.Time,
		reason: st.Why(), levels: map[string]float64{}, modes: map[string]string{}}
	for i := range st.NumFeatures() {
		n := st.FeatureName(i)
		s.levels[n], s.modes[n] = st.LevelAt(i, -1), st.FeatureMode(i).String()
	}
	a.mu.Lock()
	a.samples = append(a.samples, s)
	a.mu.Unlock()
}

// now is the provider's state at this moment.
func (a *fleetApp) now() appSample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.samples[len(a.samples)-1]
}

// between returns the samples in force from from to to: the one in force
// at from (its at moved to from), then those that came before to.
func (a *fleetApp) between(from, to time.Time) []appSample {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []appSample
	for i, s := range a.samples {
		if s.at.After(to) {
			break
		}
		if !s.at.After(from) {
			if i+1 == len(a.samples) || a.samples[i+1].at.After(from) {
				s.at = from
				out = append(out, s)
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// staleFor is how long, from from to to, the provider said stale.
func (a *fleetApp) staleFor(from, to time.Time) time.Duration {
	ss := a.between(from, to)
	var d time.Duration
	for i, s := range ss {
		end := to
		if i+1 < len(ss) {
			end = ss[i+1].at
		}
		if s.mode == "stale" {
			d += end.Sub(s.at)
		}
	}
	return d
}

// liveAfter is how long after from the app first followed, not stale,
// one of the replicas at urls: its time in the dark after an event.
func (a *fleetApp) liveAfter(from, to time.Time, urls ...string) (time.Duration, bool) {
	for _, s := range a.between(from, to) {
		if s.mode != "stale" && slices.Contains(urls, s.following) {
			return s.at.Sub(from), true
		}
	}
	return to.Sub(from), false
}

// checkContinuous asserts what the app held from from to to: the daemon's
// states never older than one held before (its time never goes back),
// recommendations never at full brightness, never the defaults.
func (a *fleetApp) checkContinuous(from, to time.Time, what string) {
	a.t.Helper()
	var last time.Time
	for _, s := range a.between(from, to) {
		if s.time.Before(last) {
			a.t.Errorf("%s: the app went back to an older state: %v after %v (%s, following %q)", what, s.time, last, s.mode, s.following)
		}
		last = s.time
		if s.levels["recommendations"] >= 1 {
			a.t.Errorf("%s: recommendations at full brightness at %v (%s: %s)", what, s.at.Format(time.TimeOnly), s.mode, s.reason)
		}
		if strings.Contains(s.reason, "at their defaults") {
			a.t.Errorf("%s: the defaults at %v: %s", what, s.at.Format(time.TimeOnly), s.reason)
		}
	}
}

// until waits, at most d, for the app's state to satisfy cond.
func (a *fleetApp) until(d time.Duration, cond func(appSample) bool) bool {
	_, ok := until(d, func() bool { return cond(a.now()) })
	return ok
}

// signal sends sig to a replica's process (SIGSTOP, SIGCONT).
func (r *replica) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, r.p.cmd.Process.Signal(sig))
	r.stopped = sig == syscall.SIGSTOP
}

func (r *replica) url() string { return "http://" + r.addr }

// name says which replica the app follows.
func (h *haRig) name(url string) string {
	for _, r := range h.reps {
		if r.url() == url {
			return r.name
		}
	}
	return "none"
}

// pushesTaken waits until every replica takes the app's pushes (after a
// replica's restart, the pusher's backoff), so that the next leader's
// windows are warm.
func (a *fleetApp) pushesTaken(d time.Duration) {
	a.t.Helper()
	_, ok := until(d, func() bool {
		for _, s := range a.b.DaemonHealth() {
			if strings.HasPrefix(s.Name, "push ") && !s.OK {
				return false
			}
		}
		return true
	})
	require.True(a.t, ok, "the replicas take the app's pushes: %+v", a.b.DaemonHealth())
}

// failover is what one loss of the leader cost: the takeover (from the
// loss to another replica saying it leads), and at the app the time its
// provider said stale and its time in the dark — until it followed, not
// stale, a replica still running.
type failover struct {
	victim, next      *replica
	appFollowed       string // the replica the app followed at the loss
	takeover          time.Duration
	appStale, appDark time.Duration
}

func (f failover) String() string {
	return fmt.Sprintf("%s leads after %v; the app (on %s) stale %v, in the dark %v", f.next.name,
		f.takeover.Round(time.Millisecond), f.appFollowed, f.appStale.Round(time.Millisecond), f.appDark.Round(time.Millisecond))
}

// loseLeader takes the leader away with sig — SIGKILL, or SIGSTOP (left
// stopped) — and measures the failover at the replicas and at the app.
func (h *haRig) loseLeader(app *fleetApp, sig syscall.Signal) failover {
	h.t.Helper()
	lead, _, _ := h.leader(10 * time.Second)
	f := failover{victim: lead, appFollowed: h.name(app.now().following)}
	at := time.Now()
	if sig == syscall.SIGKILL {
		lead.p.kill()
	} else {
		lead.signal(h.t, sig)
	}
	f.next, _, _ = h.leader(10 * time.Second)
	f.takeover = time.Since(at)
	require.True(h.t, app.until(15*time.Second, func(s appSample) bool { return s.following == f.next.url() && s.mode != "stale" }),
		"the app follows %s: %+v", f.next.name, app.now())
	time.Sleep(time.Second) // what the app does next counts too
	end := time.Now()
	dark, ok := app.liveAfter(at, end, f.next.url())
	require.True(h.t, ok)
	f.appDark, f.appStale = dark, app.staleFor(at, end)
	return f
}

// firstWords reads r's /v1/stream up to its first state: what its replica
// event said (current) and the state's generation.
func firstWords(r *replica) (current bool, gen uint64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url()+"/v1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = line[7:]
		case strings.HasPrefix(line, "data: ") && kind == "replica":
			var e api.ReplicaJSON
			if err := json.Unmarshal([]byte(line[6:]), &e); err != nil {
				return false, 0, err
			}
			current = e.Current
		case strings.HasPrefix(line, "data: ") && kind == "state":
			var st struct{ Generation uint64 }
			err := json.Unmarshal([]byte(line[6:]), &st)
			return current, st.Generation, err
		}
	}
	return false, 0, fmt.Errorf("%s: the stream ended before a state: %v", r.name, sc.Err())
}

// appMargin is what the app may take past the failover. The app leaves a
// silent replica a lease after its last news, which came up to a tick
// after the leader's last renewal, from which the lease runs; then it
// reconnects (a backoff of at most 2 × 100 ms and a connection).
const appMargin = time.Second + 500*time.Millisecond

// TestFleetAppAcrossFailover: an app on two brownoutd replicas over a
// real PostgreSQL — the root package with both URLs, following one
// replica's stream and pushing its overload to each. Every replica's
// stream carries tick and replica events of the cluster's epoch, and the
// app stays on its replica. The follower it follows restarted: it moves
// to the leader. The leader SIGKILLed mid-overload, then the new leader
// SIGSTOPped for longer than the lease and SIGCONTed: at the app, the
// levels never jump to full brightness or to the defaults, the daemon's
// states never go back, the override and the freeze set before the kill
// are there after it, and the app is stale — marked so, or following a
// replica that is gone — no longer than the failover and a margin. Then
// PostgreSQL stopped: the app holds its levels marked stale, and follows
// a current replica once it is back.
func TestFleetAppAcrossFailover(t *testing.T) {
	if race.Enabled {
		t.Skip("timing-sensitive: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("a half-minute run of replicas and an app")
	}
	srv := pgtest.StartServer(t)
	h := newHARig(t, srv.DSN)
	a, b := h.start("a"), h.start("b")
	app := startApp(t, []string{a.url(), b.url()})
	defer func() {
		if t.Failed() {
			t.Logf("app log:\n%s", app.log)
			for _, r := range h.reps {
				t.Logf("replica %s log:\n%s", r.name, r.p.out)
			}
		}
	}()

	// Both replicas' streams: the state with the cluster's epoch, a tick
	// per tick (the leader's, relayed) and a replica event per tick.
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	logs := map[*replica]*streamLog{a: {}, b: {}}
	var wg sync.WaitGroup
	for r, l := range logs {
		wg.Go(func() { follow(ctx, r, l) })
	}
	require.True(t, app.until(30*time.Second, func(s appSample) bool {
		l, ok := s.levels["recommendations"]
		return s.mode != "stale" && ok && l < 1
	}), "the overload dims the app's levels: %+v", app.now())
	dimmed := time.Now()
	wg.Wait()
	epochs := map[string]bool{}
	for r, l := range logs {
		kinds := map[string]int{}
		for _, e := range l.events {
			kind, id, _ := strings.Cut(e, " ")
			kinds[kind]++
			if kind == "state" {
				epoch, _, _ := strings.Cut(id, "-")
				epochs[epoch] = true
			}
		}
		assert.GreaterOrEqual(t, kinds["tick"], 2, "%s: tick events: %v", r.name, l.events)
		assert.GreaterOrEqual(t, kinds["replica"], 3, "%s: replica events: %v", r.name, l.events)
		assert.Equal(t, "replica", strings.Fields(l.events[0])[0], "%s: a replica event before the state", r.name)
	}
	assert.Len(t, epochs, 1, "one epoch for the cluster")
	assert.Zero(t, app.b.Remote().Health().Errors, "the app never left its replica: %+v", app.b.Remote().HealthByURL())

	lead, others, _ := h.leader(10 * time.Second)
	follower := others[0]
	t.Logf("%s leads, %s follows; the app follows %s and is dimmed (recommendations %.2f)", lead.name, follower.name,
		h.name(app.now().following), app.now().levels["recommendations"])
	if app.now().following == follower.url() {
		// A follower restarted: the app moves to the leader at once.
		at := time.Now()
		follower.p.kill()
		require.True(t, app.until(5*time.Second, func(s appSample) bool { return s.following == lead.url() && s.mode != "stale" }))
		dark, _ := app.liveAfter(at, time.Now(), lead.url())
		t.Logf("the follower %s killed: the app follows %s after %v", follower.name, lead.name, dark.Round(time.Millisecond))
		assert.Less(t, dark, appMargin)
		h.start(follower.name)
	}

	// An override written at the follower, a freeze at the leader: the app
	// sees both.
	status, body := follower.write("PUT", "/v1/features/gallery/override", `{"level":0.5,"ttl":"10m","reason":"incident 42"}`)
	require.Equal(t, 200, status, "%v", body)
	status, body = lead.write("POST", "/v1/freeze", `{"reason":"failover drill"}`)
	require.Equal(t, 200, status, "%v", body)
	held := func(s appSample) bool {
		return s.mode == "frozen" && s.modes["gallery"] == "override" && s.levels["gallery"] == 0.5
	}
	require.True(t, app.until(5*time.Second, held), "the app sees the override and the freeze: %+v", app.now())
	before := app.now()
	app.pushesTaken(10 * time.Second)

	// SIGKILL of the leader the app follows.
	f := h.loseLeader(app, syscall.SIGKILL)
	t.Logf("SIGKILL of %s: %v", f.victim.name, f)
	require.Equal(t, follower, f.next)
	assert.LessOrEqual(t, f.appStale, f.takeover+appMargin, "stale no longer than the failover")
	assert.LessOrEqual(t, f.appDark, f.takeover+appMargin, "in the dark no longer than the failover")
	after := app.now()
	assert.True(t, held(after), "the override and the freeze after the kill: %+v", after)
	assert.Equal(t, before.levels, after.levels, "frozen: the levels held across the failover")

	// The old leader back as a follower, the freeze lifted: the new leader
	// dims on.
	h.start(lead.name)
	_, ok := until(5*time.Second, func() bool {
		st, err := lead.state()
		return err == nil && st.Cluster.Role == "follower"
	})
	require.True(t, ok, "the killed replica follows")
	status, body = f.next.write("POST", "/v1/unfreeze", `{}`)
	require.Equal(t, 200, status, "%v", body)
	require.True(t, app.until(5*time.Second, func(s appSample) bool { return s.mode == "auto" }), "unfrozen: %+v", app.now())
	app.pushesTaken(10 * time.Second)

	// SIGSTOP of the leader the app follows, for longer than the lease.
	f = h.loseLeader(app, syscall.SIGSTOP)
	t.Logf("SIGSTOP of %s: %v", f.victim.name, f)
	require.Equal(t, lead, f.next)
	assert.LessOrEqual(t, f.appStale, f.takeover+appMargin, "stale no longer than the failover")
	assert.LessOrEqual(t, f.appDark, f.takeover+appMargin, "in the dark no longer than the failover")

	// SIGCONT: the old leader finds its lease over and follows, never
	// leading again; a stream opened at once says it is not current
	// before a state older than the new leader's; the app never takes an
	// older state from it.
	newest, err := f.next.state()
	require.NoError(t, err)
	f.victim.signal(t, syscall.SIGCONT)
	current, gen, err := firstWords(f.victim)
	require.NoError(t, err)
	t.Logf("woken, %s's stream says current %v before generation %d (the new leader's: %d)", f.victim.name, current, gen, newest.Generation)
	if gen < newest.Generation {
		assert.False(t, current, "an older state is said not current")
	}
	var roles []string
	_, ok = until(5*time.Second, func() bool {
		st, err := f.victim.state()
		if err == nil && (len(roles) == 0 || roles[len(roles)-1] != st.Cluster.Role) {
			roles = append(roles, st.Cluster.Role)
		}
		return err == nil && st.Cluster.Role == "follower" && st.Cluster.Leader == f.next.name && st.Generation >= newest.Generation
	})
	assert.True(t, ok, "the woken leader follows")
	assert.NotContains(t, roles, "leader", "woken, it never leads: %v", roles)
	time.Sleep(2 * time.Second)

	// PostgreSQL stopped: within a lease no replica is current, and the app
	// holds its levels marked stale, never the defaults; back, the app
	// follows a current replica again.
	srv.Stop(t)
	down := time.Now()
	require.True(t, app.until(10*time.Second, func(s appSample) bool { return s.mode == "stale" }), "stale without the store: %+v", app.now())
	t.Logf("PostgreSQL stopped: the app says stale after %v (%s)", time.Since(down).Round(time.Millisecond), app.now().reason)
	assert.Contains(t, app.now().reason, "last-known levels held")
	time.Sleep(2 * time.Second)
	srv.Start(t)
	up := time.Now()
	require.True(t, app.until(20*time.Second, func(s appSample) bool { return s.mode != "stale" && s.following != "" }),
		"the store back: the app follows a current replica: %+v", app.now())
	t.Logf("PostgreSQL back: the app follows %s, not stale, after %v", h.name(app.now().following), time.Since(up).Round(time.Millisecond))
	app.checkContinuous(dimmed, time.Now(), "across the kills, the pause and the store's restart")
	assert.NotContains(t, app.log.String(), "brownoutd restarted", "one epoch: no switch looked like a restart")
	for _, r := range h.reps {
		assert.NotContains(t, r.p.out.String(), "panic", r.name)
	}
}

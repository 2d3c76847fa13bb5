package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/signals"
)

// The rig: replicas of one service on a real PostgreSQL, each with its
// served controller and API, driven tick by tick (tickOnce, lead,
// follow) rather than by Run's clock. A lease's expiry is the store's:
// a test ends one by setting it in the past, as time would.

func lawConfig() dimmer.Config {
	return dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations", Cost: 2}, {Name: "reviews", Rank: 1, Cost: 1}},
		Segments: []dimmer.Segment{{Name: "vip", Offset: 0.2}},
	}
}

type node struct {
	rep    *Replica
	api    *api.API
	served *dimmer.Controller
}

func newNode(t *testing.T, dsn, service, name string, cfg dimmer.Config) *node {
	t.Helper()
	served, err := dimmer.New(cfg)
	require.NoError(t, err)
	rep, err := Open(context.Background(), Config{URL: dsn, Service: service, Name: name, Dimmer: cfg, Served: served})
	require.NoError(t, err)
	t.Cleanup(rep.Close)
	a, err := api.New(api.Config{Controller: served, Store: rep, Epoch: rep.Epoch(), Secret: rep.Secret(), Cluster: rep.Info, Loopback: true})
	require.NoError(t, err)
	rep.api = a
	return &node{rep: rep, api: a, served: served}
}

// overload is a snapshot of a p99 of 3 s against 1 s.
func overload(now time.Time) *signals.Snapshot {
	var s signals.Snapshot
	s.Time = now
	s.Set(signals.LatencyP99, 3)
	s.Set(signals.ArrivalRate, 100)
	return &s
}

func (n *node) tick(t *testing.T, now time.Time) {
	t.Helper()
	n.rep.tickOnce(context.Background(), now, overload(now), 0)
}

func (n *node) role() string { return n.rep.Info().Role }

func level(t *testing.T, st *dimmer.State, feature string) float64 {
	t.Helper()
	l, ok := st.Level(feature, "")
	require.True(t, ok, feature)
	return l
}

// expire ends the service's lease on the store's clock.
func expire(t *testing.T, dsn, service string) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(context.Background(), `UPDATE brownout_lease SET expires = now() - interval '1 millisecond' WHERE service = $1`, service)
	require.NoError(t, err)
}

func TestReplicas(t *testing.T) {
	dsn := pgtest.Start(t)
	now := time.Now()

	// One replica leads, the other serves the same state: generation,
	// levels, reason, history and events.
	t.Run("FollowerServesTheLeadersState", func(t *testing.T) {
		a, b := newNode(t, dsn, "s1", "a", lawConfig()), newNode(t, dsn, "s1", "b", lawConfig())
		for i := range 12 {
			at := now.Add(time.Duration(i) * time.Second)
			a.tick(t, at)
			b.tick(t, at)
		}
		require.Equal(t, "leader", a.role())
		require.Equal(t, "follower", b.role())
		want, got := a.served.State(), b.served.State()
		require.Less(t, level(t, want, "recommendations"), 1.0, "the overload dimmed")
		assert.Equal(t, want.Generation, got.Generation)
		for i := range want.NumFeatures() {
			for j := -1; j < want.NumSegments(); j++ {
				assert.Equal(t, want.LevelAt(i, j), got.LevelAt(i, j), "feature %d segment %d", i, j)
			}
		}
		sa, sb := a.api.State(), b.api.State()
		assert.Equal(t, sa.Reason, sb.Reason)
		assert.Equal(t, "a", sb.Cluster.Leader)
		ha, hb := len(pointsOf(t, a)), len(pointsOf(t, b))
		assert.Equal(t, 12, ha, "the leader's history")
		assert.Equal(t, ha, hb, "the follower's history")
		assert.Equal(t, a.api.LastEvent(), b.api.LastEvent(), "the same events")
		assert.Equal(t, a.api.BulkETag(want.Generation), b.api.BulkETag(got.Generation), "the same ETag")
	})

	// The leader dies mid-overload: the other takes the lease once it
	// ended, continues from the stored levels and generation, and the old
	// leader, back, follows: it never publishes after the takeover.
	t.Run("TakeoverContinues", func(t *testing.T) {
		a, b := newNode(t, dsn, "s2", "a", lawConfig()), newNode(t, dsn, "s2", "b", lawConfig())
		for i := range 10 {
			at := now.Add(time.Duration(i) * time.Second)
			a.tick(t, at)
			b.tick(t, at)
		}
		before := a.served.State()
		require.Less(t, level(t, before, "recommendations"), 1.0)
		at := now.Add(10 * time.Second)
		b.tick(t, at)
		require.Equal(t, "follower", b.role(), "the lease still holds")
		expire(t, dsn, "s2")
		b.tick(t, at)
		require.Equal(t, "leader", b.role(), "the lease ended: b takes it")
		after := b.served.State()
		assert.GreaterOrEqual(t, after.Generation, before.Generation, "generations never go back")
		for _, f := range []string{"recommendations", "reviews"} {
			assert.LessOrEqual(t, level(t, after, f), level(t, before, f), "%s: no jump to full brightness", f)
		}
		// a wakes from its pause: its renewal is refused, it follows.
		a.tick(t, at.Add(time.Second))
		assert.Equal(t, "follower", a.role())
		assert.Equal(t, b.served.State().Generation, a.served.State().Generation)
		b.rep.syncEvents(context.Background())
		var leaders int
		for _, e := range eventsOf(t, b) {
			if e.Kind == "leader" {
				leaders++
			}
		}
		assert.Equal(t, 2, leaders, "a's first lease and b's takeover are events")
	})

	// Current (what each replica's stream says every tick): the leader,
	// and a follower while the lease it read holds; a follower that read
	// an ended lease is not, until a leader commits again.
	t.Run("CurrentWhileALeaseHolds", func(t *testing.T) {
		a, b := newNode(t, dsn, "s6", "a", lawConfig()), newNode(t, dsn, "s6", "b", lawConfig())
		a.tick(t, now)
		b.tick(t, now)
		ia, ib := a.rep.Info(), b.rep.Info()
		assert.True(t, ia.Current, "the leader")
		assert.True(t, ib.Current, "a follower of a leader whose lease holds")
		assert.Equal(t, 3.0, ib.LeaseSeconds)
		expire(t, dsn, "s6")
		_, err := b.rep.follow(context.Background(), time.Now(), 0)
		require.NoError(t, err)
		assert.False(t, b.rep.Info().Current, "the lease it read ended: no leader it knows of")
		assert.Equal(t, "follower", b.role())
		b.tick(t, now.Add(time.Second))
		require.Equal(t, "leader", b.role())
		assert.True(t, b.rep.Info().Current)
		a.tick(t, now.Add(time.Second)) // refused: follows b
		assert.True(t, a.rep.Info().Current, "a follower of the new leader")
	})

	// A write at the follower is recorded, applied by the leader, served
	// by both; its audit event is at both.
	t.Run("WriteAtAFollower", func(t *testing.T) {
		a, b := newNode(t, dsn, "s3", "a", lawConfig()), newNode(t, dsn, "s3", "b", lawConfig())
		a.tick(t, now)
		b.tick(t, now)
		ctx := context.Background()
		res, err := b.rep.Change(ctx, api.Change{Kind: "override", Feature: "reviews", Level: 0.3, TTL: time.Hour, Who: "ops", What: "level 0.30 for 1h", Reason: "incident 9"})
		require.NoError(t, err)
		_, err = b.rep.Change(ctx, api.Change{Kind: "freeze", Who: "ops", What: "every level frozen", Reason: "hold on"})
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Hour), res.Until, time.Minute)
		a.rep.lead(ctx, time.Now(), nil, 0) // as on the store's notification
		_, err = b.rep.follow(ctx, time.Now(), 0)
		require.NoError(t, err)
		for _, n := range []*node{a, b} {
			st := n.served.State()
			r, pinned := st.PinReason(1)
			assert.True(t, pinned, "reviews pinned")
			assert.Equal(t, "incident 9", r)
			assert.Equal(t, dimmer.Frozen, st.Mode)
			assert.True(t, n.api.State().Frozen)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		gen, err := b.rep.Applied(wctx, res.Version+1)
		require.NoError(t, err)
		assert.Equal(t, b.served.State().Generation, gen)
		a.rep.syncEvents(ctx)
		var audit []string
		for _, e := range eventsOf(t, a) {
			if e.Who == "ops" {
				audit = append(audit, e.Kind)
			}
		}
		assert.Equal(t, []string{"override", "freeze"}, audit)
		_, err = b.rep.Change(ctx, api.Change{Kind: "release", Feature: "recommendations", Who: "ops"})
		assert.ErrorIs(t, err, dimmer.ErrNotPinned)
	})

	// Replicas with different configurations: the mismatch is reported at
	// both; the leader's levels are served.
	t.Run("ConfigMismatchReported", func(t *testing.T) {
		other := lawConfig()
		other.Targets[0].Target = 2
		a, b := newNode(t, dsn, "s4", "a", lawConfig()), newNode(t, dsn, "s4", "b", other)
		a.tick(t, now)
		b.tick(t, now)
		a.tick(t, now.Add(time.Second))
		b.tick(t, now.Add(time.Second))
		assert.Equal(t, []string{"b"}, a.rep.Info().ConfigMismatch)
		assert.Equal(t, []string{"b"}, b.rep.Info().ConfigMismatch)
		assert.Equal(t, a.served.State().Generation, b.served.State().Generation)
	})

	// An operator.json imported: its overrides in force, its freeze.
	t.Run("ImportStateFile", func(t *testing.T) {
		dir := t.TempDir()
		until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.json"), fmt.Appendf(nil,
			`{"v":1,"frozen":true,"freeze_reason":"migrating","shadow":false,"overrides":[{"feature":"reviews","level":0.5,"until":%q,"reason":"old"},{"feature":"recommendations","level":0,"until":%q,"reason":"gone"}]}`, until, past), 0o600))
		st, err := api.ReadStateFile(filepath.Join(dir, "operator.json"))
		require.NoError(t, err)
		n, err := Import(context.Background(), dsn, "s5", st, time.Now())
		require.NoError(t, err)
		assert.Equal(t, 1, n, "the expired override is not imported")
		a := newNode(t, dsn, "s5", "a", lawConfig())
		a.tick(t, now)
		s := a.served.State()
		assert.Equal(t, dimmer.Frozen, s.Mode)
		_, pinned := s.PinReason(1)
		assert.True(t, pinned)
	})
}

func pointsOf(t *testing.T, n *node) []api.Point {
	t.Helper()
	rec := doGet(t, n.api, "/v1/history")
	var body struct {
		Points []api.Point `json:"points"`
	}
	require.NoError(t, jsonUnmarshal(rec, &body))
	return body.Points
}

func eventsOf(t *testing.T, n *node) []api.Event {
	t.Helper()
	rec := doGet(t, n.api, "/v1/events")
	var body struct {
		Events []api.Event `json:"events"`
	}
	require.NoError(t, jsonUnmarshal(rec, &body))
	return body.Events
}

// TestStoreRestart: with PostgreSQL down the leader holds its levels and
// then says stale, writes are refused as ErrStoreDown, and reads answer;
// back, the leader leads again and an acknowledged write is still there.
func TestStoreRestart(t *testing.T) {
	srv := pgtest.StartServer(t)
	a := newNode(t, srv.DSN, DefaultService, "a", lawConfig())
	now := time.Now()
	for i := range 5 {
		a.tick(t, now.Add(time.Duration(i)*time.Second))
	}
	ctx := context.Background()
	_, err := a.rep.Change(ctx, api.Change{Kind: "override", Feature: "reviews", Level: 0.2, TTL: time.Hour, Who: "ops", Reason: "kept"})
	require.NoError(t, err)
	a.rep.lead(ctx, time.Now(), nil, 0)
	held := a.served.State()

	srv.Stop(t)
	a.tick(t, now.Add(6*time.Second))
	assert.NotEqual(t, "ok", a.rep.Info().Store)
	_, err = a.rep.Change(ctx, api.Change{Kind: "freeze", Who: "ops", Reason: "lost?"})
	assert.ErrorIs(t, err, api.ErrStoreDown)
	assert.Same(t, held, a.served.State(), "the levels held, nothing new published")
	a.rep.setLeading(time.Now().Add(-time.Millisecond)) // as when its lease ran out on its clock
	a.rep.mu.Lock()
	a.rep.mu.leaseUntil = time.Now().Add(-time.Millisecond)
	a.rep.mu.Unlock()
	assert.Equal(t, "stale", a.rep.Info().Role)
	assert.False(t, a.rep.Info().Current, "stale is not current")

	srv.Start(t)
	require.Eventually(t, func() bool {
		a.tick(t, time.Now())
		return a.role() == "leader"
	}, 10*time.Second, 100*time.Millisecond, "leads again once the store is back")
	r, pinned := a.served.State().PinReason(1)
	assert.True(t, pinned, "the acknowledged override survived the restart")
	assert.Equal(t, "kept", r)
	assert.GreaterOrEqual(t, a.served.State().Generation, held.Generation)
}

// TestLoad: Load serves the store's state — the leader's last commit — at
// once, before Run; until a load succeeds the replica is not Loaded
// (brownoutd's /readyz says 503 meanwhile).
func TestLoad(t *testing.T) {
	srv := pgtest.StartServer(t)
	a := newNode(t, srv.DSN, DefaultService, "a", lawConfig())
	now := time.Now()
	for i := range 5 {
		a.tick(t, now.Add(time.Duration(i)*time.Second))
	}
	want := a.served.State()
	require.Less(t, level(t, want, "recommendations"), 1.0, "the leader dimmed")

	b := newNode(t, srv.DSN, DefaultService, "b", lawConfig())
	assert.False(t, b.rep.Loaded(), "opened, not loaded")
	assert.Equal(t, 1.0, level(t, b.served.State(), "recommendations"), "its own fresh state meanwhile")
	srv.Stop(t)
	assert.Error(t, b.rep.Load(context.Background(), b.api))
	assert.False(t, b.rep.Loaded(), "the store down: not loaded")
	srv.Start(t)
	require.NoError(t, b.rep.Load(context.Background(), b.api))
	assert.True(t, b.rep.Loaded())
	got := b.served.State()
	assert.Equal(t, want.Generation, got.Generation)
	assert.Equal(t, level(t, want, "recommendations"), level(t, got, "recommendations"), "the leader's levels")
}

// TestOpenRefuses: an unreachable store and a newer schema stop the start
// with an error that says so.
func TestOpenRefuses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	served, _ := dimmer.New(lawConfig())
	start := time.Now()
	_, err = Open(context.Background(), Config{URL: "postgres://u:secret@" + addr + "/db", Name: "a", Dimmer: lawConfig(), Served: served, ConnectTimeout: 2 * time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot be reached")
	assert.NotContains(t, err.Error(), "secret", "no password in the message")
	assert.Less(t, time.Since(start), 5*time.Second)

	_, err = Open(context.Background(), Config{URL: "mysql://x", Name: "a", Dimmer: lawConfig(), Served: served})
	assert.ErrorContains(t, err, "postgres://")

	dsn := pgtest.Start(t)
	newNode(t, dsn, DefaultService, "a", lawConfig())
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(context.Background(), `UPDATE brownout_schema SET version = $1`, SchemaVersion+1)
	require.NoError(t, err)
	_, err = Open(context.Background(), Config{URL: dsn, Name: "b", Dimmer: lawConfig(), Served: served})
	assert.True(t, errors.Is(err, ErrNewerSchema), "%v", err)
}

func doGet(t *testing.T, a *api.API, path string) []byte {
	t.Helper()
	req := httptest.NewRequest("GET", "http://127.0.0.1"+path, nil)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	require.Equal(t, 200, rec.Code, "%s", rec.Body)
	return rec.Body.Bytes()
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// constSource gives an overload at every snapshot.
type constSource struct{}

func (constSource) Snapshot(_ context.Context, now time.Time) (signals.Snapshot, error) {
	return *overload(now), nil
}

// TestRunLeadsAndFollows runs two replicas' loops (Run: the ticks, the
// notifications, the API's streams) for real on a short tick and lease,
// for the race detector: one leads, the other serves its generation;
// stopped, the leader gives the lease up and the other takes it.
func TestRunLeadsAndFollows(t *testing.T) {
	dsn := pgtest.Start(t)
	cfg := lawConfig()
	cfg.Tick = 100 * time.Millisecond
	type runner struct {
		n      *node
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name string) *runner {
		served, err := dimmer.New(cfg)
		require.NoError(t, err)
		rep, err := Open(context.Background(), Config{URL: dsn, Name: name, Dimmer: cfg, Served: served, Lease: 600 * time.Millisecond, Margin: 200 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(rep.Close)
		a, err := api.New(api.Config{Controller: served, Store: rep, Epoch: rep.Epoch(), Secret: rep.Secret(), Cluster: rep.Info, Loopback: true})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		r := &runner{n: &node{rep: rep, api: a, served: served}, cancel: cancel, done: make(chan error)}
		go func() { rep.Run(ctx, a, constSource{}); close(r.done) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	a, b := start("a"), start("b")
	require.Eventually(t, func() bool { return a.n.role() == "leader" || b.n.role() == "leader" }, 5*time.Second, 20*time.Millisecond)
	lead, other := a, b
	if b.n.role() == "leader" {
		lead, other = b, a
	}
	require.Eventually(t, func() bool {
		g := lead.n.served.State().Generation
		return g > 3 && other.n.served.State().Generation == g
	}, 5*time.Second, 20*time.Millisecond, "the follower serves the leader's generation")
	// The follower's stream: its replica event first, then the state, then
	// a replica event (current) and a tick (the leader's, relayed) each
	// tick.
	srv := httptest.NewServer(other.n.api.Handler())
	defer srv.Close()
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	kinds := streamKinds(t, sctx, srv.URL+"/v1/stream")
	require.GreaterOrEqual(t, len(kinds), 2)
	assert.Equal(t, []string{"replica current", "state"}, kinds[:2])
	counts := map[string]int{}
	for _, k := range kinds[2:] {
		counts[k]++
	}
	assert.GreaterOrEqual(t, counts["replica current"], 5, "a replica event per tick: %v", kinds)
	assert.GreaterOrEqual(t, counts["tick"], 5, "the leader's ticks, relayed: %v", kinds)
	assert.Zero(t, counts["replica not current"], "%v", kinds)

	ctx := context.Background()
	res, err := other.n.rep.Change(ctx, api.Change{Kind: "shadow", On: true, Who: "ops", What: "shadow true"})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = other.n.rep.Applied(wctx, res.Version)
	require.NoError(t, err, "a write at the follower is served there")
	last := lead.n.served.State().Generation
	lead.cancel()
	<-lead.done
	require.Eventually(t, func() bool { return other.n.role() == "leader" }, 2*time.Second, 20*time.Millisecond, "released: taken at once")
	assert.GreaterOrEqual(t, other.n.served.State().Generation, last)
	assert.True(t, other.n.api.State().Shadow)

	// A reload: the law and the served controller take the new
	// configuration; the next commits carry on from the generation.
	reloaded := cfg
	reloaded.Targets = []dimmer.Target{{Signal: signals.LatencyP99, Target: 2}}
	gen := other.n.served.State().Generation
	require.NoError(t, other.n.rep.Reconfigure(reloaded))
	require.Eventually(t, func() bool { return other.n.served.State().Generation > gen+1 }, 2*time.Second, 20*time.Millisecond)
	assert.Equal(t, 2.0, other.n.served.Config().Targets[0].Target)
	assert.Equal(t, 2.0, other.n.rep.law.Config().Targets[0].Target)
}

// streamKinds reads a stream until ctx ends and returns its events'
// kinds, a replica event's with whether it said current.
func streamKinds(t *testing.T, ctx context.Context, url string) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var kinds []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = line[7:]
		case strings.HasPrefix(line, "data: ") && kind == "replica":
			var r api.ReplicaJSON
			require.NoError(t, json.Unmarshal([]byte(line[6:]), &r))
			kind = map[bool]string{true: "replica current", false: "replica not current"}[r.Current]
		case line == "" && kind != "":
			kinds = append(kinds, kind)
			kind = ""
		}
	}
	return kinds
}

// TestStoppedLeaderReleasesTheLease: a leader stopped inside its
// transaction (SIGSTOP, a frozen VM) keeps its connection open, and with
// it the lock on the lease's row. The store drops its session once it
// has idled past the transaction's deadline, and another replica takes
// the lease over when it ends. Before, every attempt to take it waited
// on the lock until its own deadline, for as long as the leader stayed
// stopped (CI caught a failover that never came).
func TestStoppedLeaderReleasesTheLease(t *testing.T) {
	dsn := pgtest.Start(t)
	a, b := newNode(t, dsn, "s1", "a", lawConfig()), newNode(t, dsn, "s1", "b", lawConfig())
	now := time.Now()
	a.tick(t, now)
	b.tick(t, now)
	require.Equal(t, "leader", a.role())

	stopped, resumed := make(chan struct{}), make(chan struct{})
	a.rep.stall = func() { close(stopped); <-resumed }
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.rep.tickOnce(context.Background(), now.Add(time.Second), overload(now.Add(time.Second)), 0)
	}()
	<-stopped
	defer func() { close(resumed); <-done }()

	// b ticks as its loop would: the lease ends at most a lease after
	// a's last renewal, and b takes it at its first tick after that.
	length, _ := b.rep.Lease()
	start := time.Now()
	for i := 1; b.role() != "leader" && time.Since(start) < 2*length; i++ {
		b.tick(t, now.Add(time.Duration(i+1)*time.Second))
		time.Sleep(100 * time.Millisecond) // the store's clock moves the lease on, not the test's
	}
	require.Equal(t, "leader", b.role(), "b takes the lease over from a stopped leader within %v", 2*length)
	t.Logf("b leads %v after a stopped", time.Since(start).Round(time.Millisecond))
}

// TestInTxLimitsTheIdle: a transaction begun by inTx has the store drop
// a session idle in it for longer than its context had left; one whose
// context has no deadline has no such limit (every caller gives one).
func TestInTxLimitsTheIdle(t *testing.T) {
	dsn := pgtest.Start(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	show := func(ctx context.Context) (v string) {
		require.NoError(t, inTx(ctx, pool, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&v)
		}))
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v := show(ctx)
	assert.True(t, strings.HasSuffix(v, "ms") || v == "2s", "a limit under 2 s: %q", v)
	assert.NotEqual(t, "0", v)
	assert.Equal(t, "0", show(context.Background()), "no deadline, no limit")
}

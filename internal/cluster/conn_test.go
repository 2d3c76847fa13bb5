package cluster

import (
	"context"
	"log/slog"
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
	"github.com/brownout/brownout/internal/testsrv"
)

func TestConnPoolSize(t *testing.T) {
	dsn := pgtest.Start(t)
	for _, c := range []struct {
		url      string
		services int
		want     int
	}{
		{dsn, 1, poolBase + poolPerService},
		{dsn, 5, poolBase + 5*poolPerService},
		{dsn, 20, poolCap},
		{dsn + "&pool_max_conns=2", 20, 2}, // the URL's says
		// a password that says pool_max_conns= is not the URL's setting
		{strings.Replace(dsn, "postgres@", "postgres:pool_max_conns=2@", 1), 5, poolBase + 5*poolPerService},
	} {
		conn, err := Connect(context.Background(), c.url, c.services, 5*time.Second)
		require.NoError(t, err, c.url)
		assert.Equal(t, c.want, conn.MaxConns(), "%s, %d services", c.url, c.services)
		conn.Close()
	}
	_, err := Connect(context.Background(), "mysql://x", 1, time.Second)
	assert.ErrorContains(t, err, "want a postgres:// URL")
}

// TestSharedConn: two daemons of three services each, every service's
// replicas on their daemon's one Conn (Run, for real, on a short tick).
// Each service leads and follows on its own, a write at a follower is
// applied at its service's leader only (the shared listener hands each
// notification to its service), and the daemons hold no more of the
// database's connections than their pools and listeners.
func TestSharedConn(t *testing.T) {
	dsn := pgtest.Start(t)
	cfg := lawConfig()
	cfg.Tick = 100 * time.Millisecond
	services := []string{"x", "y", "z"}
	type daemon struct {
		conn  *Conn
		nodes map[string]*node
	}
	start := func(name string) *daemon {
		conn, err := Connect(context.Background(), dsn, len(services), 5*time.Second)
		require.NoError(t, err)
		d := &daemon{conn: conn, nodes: map[string]*node{}}
		ctx, cancel := context.WithCancel(context.Background())
		var dones []chan struct{}
		for _, s := range services {
			served, err := dimmer.New(cfg)
			require.NoError(t, err)
			rep, err := Open(ctx, Config{Conn: conn, Service: s, Name: name, Dimmer: cfg, Served: served, Lease: 600 * time.Millisecond, Margin: 200 * time.Millisecond})
			require.NoError(t, err)
			a, err := api.New(api.Config{Controller: served, Store: rep, Epoch: rep.Epoch(), Secret: rep.Secret(), Cluster: rep.Info, Loopback: true})
			require.NoError(t, err)
			d.nodes[s] = &node{rep: rep, api: a, served: served}
			done := make(chan struct{})
			dones = append(dones, done)
			go func() { rep.Run(ctx, a, constSource{}); close(done) }()
		}
		t.Cleanup(func() {
			cancel()
			for _, d := range dones {
				<-d
			}
			for _, n := range d.nodes {
				n.rep.Close() // a shared Conn stays open…
			}
			require.NoError(t, conn.pool.Ping(context.Background()), "a replica's Close left the shared pool open")
			conn.Close() // …until the daemon closes it
		})
		return d
	}
	a, b := start("a"), start("b")
	leaders := map[string]*node{}
	followers := map[string]*node{}
	for _, s := range services {
		require.Eventually(t, func() bool {
			return a.nodes[s].role() == "leader" || b.nodes[s].role() == "leader"
		}, 5*time.Second, 20*time.Millisecond, "service %s has a leader", s)
		leaders[s], followers[s] = a.nodes[s], b.nodes[s]
		if b.nodes[s].role() == "leader" {
			leaders[s], followers[s] = b.nodes[s], a.nodes[s]
		}
		require.Eventually(t, func() bool {
			g := leaders[s].served.State().Generation
			return g > 3 && followers[s].served.State().Generation == g
		}, 5*time.Second, 20*time.Millisecond, "service %s's follower serves its leader's generation", s)
	}

	// A write at y's follower: applied at y's leader within a tick, and
	// nowhere else.
	ctx := context.Background()
	res, err := followers["y"].rep.Change(ctx, api.Change{Kind: "shadow", On: true, Who: "ops", What: "shadow true"})
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = followers["y"].rep.Applied(wctx, res.Version)
	require.NoError(t, err)
	// (The follower serves the leader's commit; the leader's own API may
	// publish it a moment later, within its tick.)
	assert.Eventually(t, func() bool { return leaders["y"].api.State().Shadow }, 2*time.Second, 10*time.Millisecond)
	assert.False(t, leaders["x"].api.State().Shadow, "another service's write")
	assert.False(t, leaders["z"].api.State().Shadow, "another service's write")

	// The database's connections from the daemons: at most each one's
	// pool and its listener, whatever the number of services.
	pool, err := pgxpool.New(ctx, dsn+"&application_name=counting")
	require.NoError(t, err)
	defer pool.Close()
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, appName).Scan(&n))
	limit := a.conn.MaxConns() + 1 + b.conn.MaxConns() + 1
	assert.LessOrEqual(t, n, limit, "connections of two daemons of %d services", len(services))
	assert.Positive(t, n)
	var listeners int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = $2`, appName, "LISTEN "+channel).Scan(&listeners))
	assert.Equal(t, 2, listeners, "one listener a daemon, not one a service")
	t.Logf("two daemons of %d services hold %d connections (at most %d)", len(services), n, limit)
}

// TestWritesDoNotStarveOtherServices: a service's writes that wait on
// the store (its operator row locked by a long transaction: a DBA's
// session, a slow commit) hold at most one of the shared pool's
// connections, so that another service's leader still renews its lease
// and publishes. Before, each waiting write held a connection for up to
// the write's timeout (3 s): a handful of them emptied the pool, and
// every service of the daemon lost its lease.
func TestWritesDoNotStarveOtherServices(t *testing.T) {
	dsn := pgtest.Start(t)
	ctx := context.Background()
	conn, err := Connect(ctx, dsn, 2, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	open := func(service string) *node {
		cfg := lawConfig()
		served, err := dimmer.New(cfg)
		require.NoError(t, err)
		rep, err := Open(ctx, Config{Conn: conn, Service: service, Name: "a", Dimmer: cfg, Served: served})
		require.NoError(t, err)
		a, err := api.New(api.Config{Controller: served, Store: rep, Epoch: rep.Epoch(), Secret: rep.Secret(), Cluster: rep.Info, Loopback: true})
		require.NoError(t, err)
		rep.api = a
		return &node{rep: rep, api: a, served: served}
	}
	x, y := open("x"), open("y")
	now := time.Now()
	x.tick(t, now)
	y.tick(t, now)
	require.Equal(t, "leader", y.role())

	// x's operator row locked by another session.
	locker := lockRow(t, dsn, "brownout_operator", "x")

	writes := 2 * conn.MaxConns()
	done := make(chan error, writes)
	for range writes {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err := x.rep.Change(wctx, api.Change{Kind: "freeze", Who: "ops", What: "freeze", Reason: "r"})
			done <- err
		}()
	}
	locker.waitBlocked(t) // the writes wait on x's row
	// …and the others have had the time to take connections, if they
	// could (each would block on the row too): nothing to wait on that
	// shows they could not.
	time.Sleep(300 * time.Millisecond)

	start := time.Now()
	y.tick(t, now.Add(time.Second))
	assert.Less(t, time.Since(start), time.Second, "y's renewal waited for a connection")
	info := y.rep.Info()
	assert.Equal(t, "leader", info.Role, "y still leads")
	assert.Equal(t, "ok", info.Store, "y reached the store")

	locker.release(t)
	for range writes {
		<-done
	}
}

// TestStoppingIsNotAStoreFailure: a replica whose loop is stopped (the
// daemon stops, or a reload removes its service) while a transaction is
// under way says nothing of the store: its canceled transaction is not
// the store's failure (it logged an ERROR "the store cannot be reached"
// at every removal that caught a transaction, and said so in /v1/state).
func TestStoppingIsNotAStoreFailure(t *testing.T) {
	dsn := pgtest.Start(t)
	ctx := context.Background()
	var logs testsrv.Buffer
	cfg := lawConfig()
	served, err := dimmer.New(cfg)
	require.NoError(t, err)
	rep, err := Open(ctx, Config{URL: dsn, Service: "s", Name: "a", Dimmer: cfg, Served: served, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(rep.Close)
	a, err := api.New(api.Config{Controller: served, Store: rep, Epoch: rep.Epoch(), Secret: rep.Secret(), Cluster: rep.Info, Loopback: true})
	require.NoError(t, err)
	rep.api = a
	rep.tickOnce(ctx, time.Now(), overload(time.Now()), 0)
	require.Equal(t, "leader", rep.Info().Role)

	// The published row locked: the leader's next commit waits on it.
	locker := lockRow(t, dsn, "brownout_published", "s")
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		rep.tickOnce(lctx, time.Now(), overload(time.Now()), 0)
		close(done)
	}()
	locker.waitBlocked(t)
	stop()
	<-done
	assert.NotContains(t, logs.String(), "cannot be reached", "a stop is not the store's failure")
	assert.Equal(t, "ok", rep.Info().Store)
}

// TestRemovedFeaturesOverrideIsDropped: a reload that removes a feature
// drops its override (dimmer's Reconfigure, documented: "an override on
// a removed feature is dropped with a log line"), in the store too: the
// leader deletes it at its next commit, with an event. Before, the row
// stayed, and the override came back from the dead at the next
// operator's write or failover after the feature was named again.
func TestRemovedFeaturesOverrideIsDropped(t *testing.T) {
	dsn := pgtest.Start(t)
	ctx := context.Background()
	a, b := newNode(t, dsn, "s", "a", lawConfig()), newNode(t, dsn, "s", "b", lawConfig())
	now := time.Now()
	a.tick(t, now)
	b.tick(t, now)
	require.Equal(t, "leader", a.role())
	_, err := b.rep.Change(ctx, api.Change{Kind: "override", Feature: "reviews", Level: 0.3, TTL: time.Hour, Who: "ops", What: "level 0.30 for 1h", Reason: "keep"})
	require.NoError(t, err)
	a.rep.lead(ctx, time.Now(), nil, 0)
	_, pinned := a.served.State().PinReason(1)
	require.True(t, pinned)

	without := lawConfig()
	without.Features = without.Features[:1] // recommendations only
	for _, n := range []*node{b, a} {
		require.NoError(t, n.rep.reconfigure(without))
	}
	a.tick(t, now.Add(time.Second))
	b.tick(t, now.Add(time.Second))
	var n int
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM brownout_override WHERE service = 's'`).Scan(&n))
	assert.Zero(t, n, "the removed feature's override is gone from the store")

	// Named again: no override, even after another write.
	for _, n := range []*node{b, a} {
		require.NoError(t, n.rep.reconfigure(lawConfig()))
	}
	_, err = b.rep.Change(ctx, api.Change{Kind: "shadow", On: false, Who: "ops", What: "shadow off"})
	require.NoError(t, err)
	a.rep.lead(ctx, time.Now(), nil, 0)
	_, err = b.rep.follow(ctx, time.Now(), 0)
	require.NoError(t, err)
	for _, n := range []*node{a, b} {
		_, pinned := n.served.State().PinReason(1)
		assert.False(t, pinned, "%s: the dropped override stays dropped", n.rep.cfg.Name)
	}
	a.rep.syncEvents(ctx)
	var said bool
	for _, e := range eventsOf(t, a) {
		said = said || e.Kind == "release" && e.Feature == "reviews"
	}
	assert.True(t, said, "an event says the override was dropped")
}

// TestReconfigureAfterStop: a Reconfigure that comes once the replica's
// loop has stopped (a reload under way while the daemon stops) answers at
// once, rather than after its timeout (10 s and more: a shutdown waited
// that long for every service a reload was reconfiguring).
func TestReconfigureAfterStop(t *testing.T) {
	dsn := pgtest.Start(t)
	n := newNode(t, dsn, "s", "a", lawConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.rep.Run(ctx, n.api, constSource{}); close(done) }()
	cancel()
	<-done
	start := time.Now()
	assert.Error(t, n.rep.Reconfigure(lawConfig()))
	assert.Less(t, time.Since(start), time.Second)
}

// TestListenerSaysItLostTheNotifications: the daemon's one LISTEN
// connection, lost (its backend terminated: a restart, a network cut),
// is said once in the log, and so is its return; before, it reconnected
// in silence, and a listener that could not connect went unnoticed.
func TestListenerSaysItLostTheNotifications(t *testing.T) {
	dsn := pgtest.Start(t)
	ctx := context.Background()
	conn, err := Connect(ctx, dsn, 1, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(conn.Close)
	var logs testsrv.Buffer
	conn.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	admin, err := pgxpool.New(ctx, dsn+"&application_name=admin")
	require.NoError(t, err)
	defer admin.Close()
	listening := func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`, "LISTEN "+channel).Scan(&n))
		return n == 1
	}
	require.Eventually(t, listening, 5*time.Second, 20*time.Millisecond)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`, "LISTEN "+channel)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "notifications are lost") }, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "listening to the store's notifications again") }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, strings.Count(logs.String(), "notifications are lost"), logs.String())
}

// rowLock is a service's row of a table locked FOR UPDATE by a session of
// the test's own, until release or the test's end.
type rowLock struct {
	pool *pgxpool.Pool
	tx   pgx.Tx
}

func lockRow(t *testing.T, dsn, table, service string) *rowLock {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn+"&application_name=locker")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, `SELECT * FROM `+table+` WHERE service = $1 FOR UPDATE`, service)
	require.NoError(t, err)
	return &rowLock{pool, tx}
}

// waitBlocked waits (5 s at most) until a session of the replicas' waits
// on a lock: what the test holds.
func (l *rowLock) waitBlocked(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := l.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, appName).Scan(&n)
		return err == nil && n > 0
	}, 5*time.Second, 10*time.Millisecond, "a replica's session waits on the row")
}

func (l *rowLock) release(t *testing.T) {
	t.Helper()
	require.NoError(t, l.tx.Rollback(context.Background()))
}

package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// Config configures a Replica.
type Config struct {
	// URL is the store, postgres://…; required unless Conn is given.
	URL string
	// Conn, when set, is the daemon's connection to the store, shared
	// with its other services' replicas (Connect); the replica does not
	// close it. Else Open connects to URL on its own, and Close closes.
	Conn *Conn
	// Service names this service's rows. Default DefaultService.
	Service string
	// Name is this replica's name, unique among the replicas (the
	// lease's holder, the events' "who leads"); required.
	Name string
	// Dimmer is the control law's configuration: the leader steps a
	// controller of its own on it.
	Dimmer dimmer.Config
	// Served is the controller the API serves; every replica adopts the
	// leader's published states into it. Required.
	Served *dimmer.Controller
	// Lease and Margin: DefaultLease and DefaultMargin by default; the
	// lease lasts at least three ticks (its margin scaled along).
	Lease, Margin time.Duration
	// ConnectTimeout bounds the first contact with the store at Open.
	// Default 10 s.
	ConnectTimeout time.Duration
	// Version is the build's, recorded with the replica.
	Version string
	// Logger receives the changes of leader and of the store's health.
	// Default: discard.
	Logger *slog.Logger
	// Registerer, when set, receives the brownout_cluster_* metrics.
	Registerer prometheus.Registerer
}

// Replica is one brownoutd process of a service served by several: see
// the package documentation. Make it with Open, then Run it. Its methods
// are safe for concurrent use; Run's loop owns the control law.
type Replica struct {
	cfg           Config
	conn          *Conn
	ownConn       bool // Open connected it: Close closes it
	pool          *pgxpool.Pool
	epoch         int64
	secret        []byte
	law           *dimmer.Controller // stepped while leading
	served        *dimmer.Controller
	tick          time.Duration
	length, slack time.Duration // the lease and its margin
	log           *slog.Logger
	wake          chan string // the store's notifications: "ops", "published", "lease", "events"
	reconf        chan reconfig
	stopped       chan struct{} // closed when Run's loop returned
	// writing is held by the write (Change, Note) under way: a service's
	// writes take its operator row's lock in turn anyway, and one that
	// waits for the store (the row locked, a slow commit) must not hold
	// one of the shared pool's connections each, which the other
	// services' leaders need to renew their leases.
	writing chan struct{}

	// Owned by Run's loop.
	api        *api.API
	own        lease
	hash       string             // the law's configuration's
	committed  *dimmer.Checkpoint // the last checkpoint committed (this replica's or adopted)
	storedGen  uint64             // the generation the store holds, as last known; 0: unknown
	appliedOps uint64             // the operators' version reconciled into the law
	lastHist   time.Time          // the store's time of the last history point kept
	tried      bool               // Load ran
	// drop is the features a reload removed while this replica led: their
	// overrides leave the store at its next commit, as they left the law
	// (dimmer drops a removed feature's pin), so that none comes back
	// when the feature is named again.
	drop      []string
	srcErr    string // the source's last error, logged once a minute
	srcLogged time.Time

	loaded atomic.Bool // the store's state was read once (Loaded)

	// stall, set by tests, is called in lead's transaction once it holds
	// the lease's row: a replica stopped there, its locks held.
	stall func()

	mu struct {
		sync.Mutex
		until      time.Time // leads until (local, monotonic); zero: not leading
		leader     string
		term       uint64
		since      time.Time
		leaseUntil time.Time // the known lease's end (local)
		storeErr   string
		mismatch   []string
		applied    uint64
		gen        uint64
		appliedCh  chan struct{}
		takeovers  uint64
		warnedHash string
		leaderHash string
	}
}

type reconfig struct {
	cfg  dimmer.Config
	done chan error
}

var _ api.Store = (*Replica)(nil)

// Open connects to the store (ConnectTimeout), sets up or checks its
// tables (ErrNewerSchema for a newer brownoutd's), and returns the
// replica; nothing is led or served before Run.
func Open(ctx context.Context, cfg Config) (*Replica, error) {
	if cfg.Served == nil || cfg.Name == "" {
		return nil, errors.New("cluster: a replica needs a served controller and a name")
	}
	if cfg.Service == "" {
		cfg.Service = DefaultService
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	law, err := dimmer.New(cfg.Dimmer)
	if err != nil {
		return nil, err
	}
	conn, own := cfg.Conn, false
	if conn == nil {
		if conn, err = Connect(ctx, cfg.URL, 1, cfg.ConnectTimeout); err != nil {
			return nil, err
		}
		conn.SetLogger(cfg.Logger)
		own = true
	}
	mctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	epoch, secret, err := migrate(mctx, conn.pool, cfg.Service)
	if err != nil {
		if own {
			conn.Close()
		}
		return nil, err
	}
	r := &Replica{cfg: cfg, conn: conn, ownConn: own, pool: conn.pool, epoch: epoch, secret: secret, law: law, served: cfg.Served, tick: law.Config().Tick,
		log: cfg.Logger, wake: make(chan string, 16), reconf: make(chan reconfig), stopped: make(chan struct{}), writing: make(chan struct{}, 1)}
	r.length, r.slack = leaseLength(r.tick, cfg.Lease, cfg.Margin)
	r.hash = ConfigHash(law.Config())
	r.mu.appliedCh = make(chan struct{})
	if cfg.Registerer != nil {
		if err := r.register(cfg.Registerer); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Epoch is the cluster's boot epoch (api.Config.Epoch), and Secret its
// stream tokens' key (api.Config.Secret): made once, kept in the store.
func (r *Replica) Epoch() int64 { return r.epoch }

// Secret: see Epoch. It is the service's own, derived from the
// cluster's (HMAC, keyed with it, of the service's name): what an API
// keys with it — its stream tokens, its shed seed, which its streams
// carry behind its evaluation tokens — tells nothing of another
// service's. DefaultService's is the cluster's, as before services.
func (r *Replica) Secret() []byte {
	if r.cfg.Service == DefaultService {
		return slices.Clone(r.secret)
	}
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte("brownout service secret\x00" + r.cfg.Service))
	return m.Sum(nil)
}

// MaxConns is the size of the pool the replica's store connection has
// (shared with the daemon's other services' when Config.Conn is).
func (r *Replica) MaxConns() int { return r.conn.MaxConns() }

// Lease returns the lease's length and margin in force.
func (r *Replica) Lease() (length, margin time.Duration) { return r.length, r.slack }

// Close closes the store's connections when Open made them (after Run
// returned); a shared Conn stays open.
func (r *Replica) Close() {
	if r.ownConn {
		r.conn.Close()
	}
}

// ConfigHash names a control law's configuration: replicas with the same
// hash compute the same levels from the same signals.
func ConfigHash(c dimmer.Config) string {
	c.Logger = nil
	b, err := json.Marshal(c)
	if err != nil {
		b = fmt.Appendf(nil, "%+v", c)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Load reads the store's state — the last published state, the history
// and the events — into a (built with this replica as its Store, Epoch
// and Secret), before Run. Call it before a is served: until then a
// serves its own fresh state (full brightness, generation 1) under the
// cluster's epoch. A failure is logged and returned; Run then follows the
// store when it answers.
func (r *Replica) Load(ctx context.Context, a *api.API) error {
	r.api, r.tried = a, true
	_, err := r.follow(ctx, time.Now(), 0)
	if err != nil {
		r.log.Warn("brownoutd: cluster: the store's state could not be loaded at start; following it when it answers", "err", err)
	}
	return err
}

// Loaded reports whether the replica has read the store's state (Load,
// or Run's reads since): before, what it serves is not the cluster's.
func (r *Replica) Loaded() bool { return r.loaded.Load() }

// Run serves a from the store until ctx ends: it loads the store's state
// unless Load did, then every tick takes a snapshot from src (so that
// every replica's windows are warm), leads when it holds the lease and
// follows otherwise. At the end, a leader gives its lease up, so that
// another takes over at once.
func (r *Replica) Run(ctx context.Context, a *api.API, src dimmer.Source) error {
	return r.RunAfter(ctx, a, src, 0)
}

// RunAfter is Run whose ticks begin delay later (a daemon of several
// services spreads their ticks over the tick: service i of n at i/n of
// it). Until then the replica neither leads nor steps, but a Reconfigure
// is applied at once: a reload never waits for a loop to begin.
func (r *Replica) RunAfter(ctx context.Context, a *api.API, src dimmer.Source, delay time.Duration) error {
	if !r.tried {
		r.Load(ctx, a)
	}
	r.api = a
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { a.Mirror(ctx); return nil })
	g.Go(func() error {
		defer close(r.stopped)
		return r.loop(ctx, src, delay)
	})
	return g.Wait()
}

// await serves the reconfigurations until delay has passed; false when
// ctx ended first.
func (r *Replica) await(ctx context.Context, delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case rc := <-r.reconf:
			rc.done <- r.reconfigure(rc.cfg)
		}
	}
}

func (r *Replica) loop(ctx context.Context, src dimmer.Source, delay time.Duration) error {
	if delay > 0 && !r.await(ctx, delay) {
		return nil
	}
	defer r.conn.subscribe(r.cfg.Service, r.wake)()
	t := time.NewTicker(r.tick)
	defer t.Stop()
	var attempt *time.Timer
	var attemptC <-chan time.Time
	defer func() {
		if attempt != nil {
			attempt.Stop()
		}
	}()
	for {
		var rem time.Duration = -1
		select {
		case <-ctx.Done():
			r.stepDown()
			return nil
		case sched := <-t.C:
			lag := time.Since(sched)
			sctx, cancel := context.WithTimeout(ctx, r.tick)
			snap, err := src.Snapshot(sctx, sched)
			cancel()
			r.noteSource(sched, err)
			rem = r.tickOnce(ctx, sched, &snap, lag)
		case kind := <-r.wake:
			switch {
			case r.own.term != 0 && kind == "ops":
				rem = r.lead(ctx, time.Now(), nil, 0)
			case r.own.term != 0:
				r.syncEvents(ctx)
			case kind == "lease":
				rem = r.lead(ctx, time.Now(), nil, 0)
			default:
				rem, _ = r.follow(ctx, time.Now(), 0)
			}
		case <-attemptC:
			attemptC = nil
			if r.own.term == 0 {
				rem = r.lead(ctx, time.Now(), nil, 0)
			}
		case rc := <-r.reconf:
			rc.done <- r.reconfigure(rc.cfg)
		}
		// A lease that ends before the next tick: try at its end.
		if rem >= 0 && rem < r.tick && r.own.term == 0 && attemptC == nil {
			if attempt == nil {
				attempt = time.NewTimer(time.Until(attemptAt(time.Now(), rem)))
			} else {
				attempt.Reset(time.Until(attemptAt(time.Now(), rem)))
			}
			attemptC = attempt.C
		}
	}
}

// tickOnce is one tick: lead (renew) when this replica holds the lease;
// else follow, and try to take the lease when it expired. It returns the
// lease's remainder as a follower read it (−1: not read).
func (r *Replica) tickOnce(ctx context.Context, now time.Time, snap *signals.Snapshot, lag time.Duration) time.Duration {
	if r.own.term != 0 {
		if rem := r.lead(ctx, now, snap, lag); r.own.term != 0 || rem >= 0 {
			return rem
		}
	}
	rem, err := r.follow(ctx, now, lag)
	if err != nil || rem > 0 {
		return rem
	}
	return r.lead(ctx, now, snap, lag)
}

// keptEvents is how many events the store keeps per service (the API
// keeps the last 1000 in memory; the audit lines are also in the logs).
const keptEvents = 10000

// errNotLeader: the store refused this replica the lease (another holds
// it, or took it over).
var errNotLeader = errors.New("cluster: not the leader")

// lead is a leader's commit, or an attempt to become one when this
// replica holds no lease: in one transaction it renews (or takes) the
// lease, catches up with the stored state if it is not what this
// replica committed last, applies the operators' changes, steps the law
// (snap; nil: no step, only the operators' changes), and writes the
// checkpoint, the history point and the events. It publishes them (into
// the served controller and the API) only after the commit, and only
// while its lease holds on its own clock. It returns −1, or the lease's
// remainder when another replica holds it.
func (r *Replica) lead(ctx context.Context, now time.Time, snap *signals.Snapshot, lag time.Duration) time.Duration {
	sent := time.Now()
	ctx, cancel := context.WithDeadline(ctx, deadline(sent, r.length, r.slack))
	defer cancel()
	var (
		term      uint64
		since     time.Time
		acquired  bool
		prevHold  string
		cp        dimmer.Checkpoint
		point     *api.Point
		events    []api.Event
		ops       opState
		stored    *dimmer.Checkpoint
		dropped   []api.Event
		remaining time.Duration = -1
	)
	err := inTx(ctx, r.pool, func(tx pgx.Tx) error {
		if r.own.term != 0 {
			err := tx.QueryRow(ctx, `UPDATE brownout_lease SET expires = now() + make_interval(secs => $4)
				WHERE service = $1 AND term = $2 AND holder = $3 RETURNING since`, r.cfg.Service, r.own.term, r.cfg.Name, r.length.Seconds()).Scan(&since)
			if errors.Is(err, pgx.ErrNoRows) {
				return errNotLeader
			}
			if err != nil {
				return err
			}
			term = r.own.term
		} else {
			var rem float64
			err := tx.QueryRow(ctx, `WITH old AS (SELECT holder, expires FROM brownout_lease WHERE service = $1 FOR UPDATE)
				UPDATE brownout_lease l SET term = l.term + 1, holder = $2, expires = now() + make_interval(secs => $3), since = now()
				FROM old WHERE l.service = $1 AND old.expires <= now() RETURNING l.term, l.since, old.holder`,
				r.cfg.Service, r.cfg.Name, r.length.Seconds()).Scan(&term, &since, &prevHold)
			if errors.Is(err, pgx.ErrNoRows) {
				if err := tx.QueryRow(ctx, `SELECT extract(epoch FROM expires - now())::float8 FROM brownout_lease WHERE service = $1`, r.cfg.Service).Scan(&rem); err == nil {
					remaining = max(time.Duration(rem*float64(time.Second)), 0)
				}
				return errNotLeader
			}
			if err != nil {
				return err
			}
			acquired = true
		}
		if r.stall != nil {
			r.stall()
		}
		var gen uint64
		var raw []byte
		if err := tx.QueryRow(ctx, `SELECT generation, checkpoint FROM brownout_published WHERE service = $1 FOR UPDATE`, r.cfg.Service).Scan(&gen, &raw); err != nil {
			return err
		}
		var err error
		if dropped, err = r.dropOverrides(ctx, tx); err != nil {
			return err
		}
		readopt := acquired || gen != r.storedGen || r.committed == nil
		if readopt && raw != nil {
			var c dimmer.Checkpoint
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("cluster: the stored checkpoint: %w", err)
			}
			if _, err := r.law.AdoptAt(now, c); err != nil {
				return err
			}
			stored = &c
		}
		if ops, err = readOps(ctx, tx, r.cfg.Service); err != nil {
			return err
		}
		before := r.law.State()
		if readopt || ops.version != r.appliedOps {
			reconcile(r.law, now, ops, r.log)
		}
		if snap != nil {
			r.law.Step(now, *snap)
		}
		st := r.law.State()
		events = append(api.Changes(before, st), dropped...)
		if acquired {
			why := "no replica led before"
			if prevHold != "" {
				why = "the lease of " + prevHold + " ended"
				if prevHold == r.cfg.Name {
					why = "its own lease had ended (the store was out of reach)"
				}
			}
			events = append([]api.Event{{Kind: "leader", Who: r.cfg.Name, What: fmt.Sprintf("%s leads (term %d) from generation %d", r.cfg.Name, term, st.Generation), Reason: why}}, events...)
		}
		cp = r.law.Checkpoint()
		b, err := json.Marshal(cp)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE brownout_published SET term = $2, holder = $3, generation = $4, checkpoint = $5, config_hash = $6, ops_version = $7, at = now()
			WHERE service = $1`, r.cfg.Service, term, r.cfg.Name, cp.Generation, b, r.hash, ops.version); err != nil {
			return err
		}
		if snap != nil {
			p := api.NewPoint(now, *snap, r.law.Status(), st)
			pb, err := marshalPoint(p)
			if err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, `INSERT INTO brownout_history (service, at, point) VALUES ($1, clock_timestamp(), $2) RETURNING at`, r.cfg.Service, pb).Scan(&r.lastHist); err != nil {
				return err
			}
			point = &p
			if cp.Generation%64 == 0 || r.lastHist.Second() == 0 {
				if _, err := tx.Exec(ctx, `DELETE FROM brownout_history WHERE service = $1 AND at < now() - interval '16 minutes'`, r.cfg.Service); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `DELETE FROM brownout_event WHERE service = $1
					AND seq <= (SELECT event_seq FROM brownout_operator WHERE service = $1) - $2`, r.cfg.Service, keptEvents); err != nil {
					return err
				}
			}
		}
		if events, err = insertEvents(ctx, tx, r.cfg.Service, events); err != nil {
			return err
		}
		if err := r.heartbeat(ctx, tx); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, 'published ' || $2)`, channel, r.cfg.Service)
		return err
	})
	switch {
	case errors.Is(err, errNotLeader):
		if r.own.term != 0 {
			r.log.Warn("brownoutd: cluster: another replica took the lease over; following it", "replica", r.cfg.Name, "term", r.own.term)
		}
		r.own = lease{}
		r.setLeading(time.Time{})
		return remaining
	case err != nil:
		r.storeFailed(err)
		if r.committed != nil && (stored != nil || snap != nil || ops.version != r.appliedOps) {
			r.law.AdoptAt(now, *r.committed) // the law carries on from what was committed, not from an uncommitted step
		}
		r.storedGen = 0 // unknown: the commit may have landed; read it again
		if !r.own.leads(time.Now()) && r.own.term != 0 {
			r.setLeading(time.Time{}) // holding the levels as they are: stale until the store answers
		}
		return -1
	}
	r.storeOK()
	r.committed, r.storedGen, r.appliedOps = &cp, cp.Generation, ops.version
	r.drop = nil
	r.own.renewed(term, sent, r.length, r.slack)
	if acquired {
		r.log.Info("brownoutd: cluster: this replica leads", "replica", r.cfg.Name, "term", term, "generation", cp.Generation, "after", prevHold)
	}
	r.mu.Lock()
	r.mu.leader, r.mu.term, r.mu.since, r.mu.leaderHash = r.cfg.Name, term, since, r.hash
	if acquired {
		r.mu.takeovers++
	}
	r.mu.Unlock()
	if !r.own.leads(time.Now()) {
		return -1 // the commit came back too late to publish: the followers' path will serve it
	}
	r.setLeading(r.own.until)
	r.publish(cp, ops.version)
	r.loaded.Store(true)
	if point != nil {
		r.api.AddPoint(*point, lag)
	}
	r.syncEvents(ctx) // its own events and others', in the store's order
	return -1
}

// dropOverrides deletes, in the leader's transaction, the overrides of
// the features a reload removed (Replica.drop), and returns an event for
// each.
func (r *Replica) dropOverrides(ctx context.Context, tx pgx.Tx) ([]api.Event, error) {
	if len(r.drop) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `DELETE FROM brownout_override WHERE service = $1 AND feature = ANY($2) RETURNING feature`, r.cfg.Service, r.drop)
	if err != nil {
		return nil, err
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var events []api.Event
	for _, f := range gone {
		events = append(events, api.Event{Kind: "release", Feature: f, Who: "reload", What: "override dropped: a reload removed the feature"})
	}
	return events, nil
}

// publish serves cp: into the served controller and the API's flags;
// writes waiting for version ops learn that it is served.
func (r *Replica) publish(cp dimmer.Checkpoint, ops uint64) {
	if cp.Generation < r.served.State().Generation {
		return // generations never go back
	}
	st, err := r.served.AdoptAt(time.Now(), cp)
	if err != nil {
		r.log.Error("brownoutd: cluster: a checkpoint could not be adopted", "err", err)
		return
	}
	r.api.SetOperators(cp.Frozen, cp.FreezeReason, cp.Shadow)
	r.mu.Lock()
	r.mu.applied, r.mu.gen = max(r.mu.applied, ops), st.Generation
	close(r.mu.appliedCh)
	r.mu.appliedCh = make(chan struct{})
	r.mu.Unlock()
}

// follow reads the leader's last commit, the lease, the new history
// points and events, in one round trip, and serves what is new. It
// returns the lease's remainder on the store's clock.
func (r *Replica) follow(ctx context.Context, now time.Time, lag time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, r.tick)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`SELECT term, holder, generation, checkpoint, config_hash, ops_version FROM brownout_published WHERE service = $1`, r.cfg.Service)
	b.Queue(`SELECT term, holder, coalesce(since, 'epoch'), extract(epoch FROM expires - now())::float8 FROM brownout_lease WHERE service = $1`, r.cfg.Service)
	b.Queue(`SELECT at, point FROM brownout_history WHERE service = $1 AND at > $2 AND at > now() - interval '16 minutes' ORDER BY at`, r.cfg.Service, r.lastHist)
	r.queueEvents(b)
	r.queueMismatch(b)
	b.Queue(`INSERT INTO brownout_replica (service, name, config_hash, version) VALUES ($1, $2, $3, $4)
		ON CONFLICT (service, name) DO UPDATE SET config_hash = excluded.config_hash, version = excluded.version, seen = now()`,
		r.cfg.Service, r.cfg.Name, r.hash, r.cfg.Version)
	var p published
	var raw []byte
	var lr leaseRow
	var rem float64
	var points []api.Point
	var lastHist time.Time
	err := func() error {
		br := r.pool.SendBatch(ctx, b)
		defer br.Close()
		if err := br.QueryRow().Scan(&p.term, &p.holder, &p.generation, &raw, &p.configHash, &p.opsVersion); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&lr.term, &lr.holder, &lr.since, &rem); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var at time.Time
			var pb []byte
			if err := rows.Scan(&at, &pb); err != nil {
				rows.Close()
				return err
			}
			if pt, err := unmarshalPoint(pb); err == nil {
				points = append(points, pt)
			}
			lastHist = at
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if err := r.readEvents(br); err != nil {
			return err
		}
		if err := r.readMismatch(br); err != nil {
			return err
		}
		_, err = br.Exec()
		return err
	}()
	if err != nil {
		r.storeFailed(err)
		return -1, err
	}
	r.storeOK()
	lr.remaining = time.Duration(rem * float64(time.Second))
	if raw != nil && r.own.term == 0 {
		var cp dimmer.Checkpoint
		if err := json.Unmarshal(raw, &cp); err != nil {
			r.log.Error("brownoutd: cluster: the stored checkpoint does not parse", "err", err)
		} else if cp.Generation >= r.served.State().Generation {
			if _, err := r.law.AdoptAt(now, cp); err == nil {
				r.committed, r.storedGen = &cp, cp.Generation
			}
			r.publish(cp, p.opsVersion)
		}
	}
	if !lastHist.IsZero() {
		r.lastHist = lastHist
	}
	for _, pt := range points {
		r.api.AddPoint(pt, lag)
	}
	r.mu.Lock()
	r.mu.leader, r.mu.term, r.mu.since, r.mu.leaderHash = lr.holder, lr.term, lr.since, p.configHash
	r.mu.leaseUntil = time.Now().Add(lr.remaining)
	warn := p.configHash != "" && p.configHash != r.hash && r.mu.warnedHash != p.configHash
	if warn {
		r.mu.warnedHash = p.configHash
	}
	r.mu.Unlock()
	if warn {
		r.log.Warn("brownoutd: cluster: this replica's configuration differs from the leader's; the leader's levels are served (fix: the same file on every replica)",
			"replica", r.cfg.Name, "config", r.hash, "leader", p.holder, "leader_config", p.configHash)
	}
	r.loaded.Store(true)
	return lr.remaining, nil
}

// syncEvents keeps the events committed by others (the operators' writes
// at other replicas) and the replicas' configurations.
func (r *Replica) syncEvents(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.tick)
	defer cancel()
	b := &pgx.Batch{}
	r.queueEvents(b)
	r.queueMismatch(b)
	br := r.pool.SendBatch(ctx, b)
	defer br.Close()
	if err := r.readEvents(br); err != nil {
		return
	}
	r.readMismatch(br)
}

func (r *Replica) queueEvents(b *pgx.Batch) {
	b.Queue(`SELECT seq, at, kind, feature, who, what, reason FROM
		(SELECT * FROM brownout_event WHERE service = $1 AND seq > $2 ORDER BY seq DESC LIMIT 1000) e ORDER BY seq`, r.cfg.Service, r.api.LastEvent())
}

func (r *Replica) readEvents(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var es []api.Event
	for rows.Next() {
		var e api.Event
		if err := rows.Scan(&e.Seq, &e.Time, &e.Kind, &e.Feature, &e.Who, &e.What, &e.Reason); err != nil {
			rows.Close()
			return err
		}
		es = append(es, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	r.api.AddEvents(es)
	return nil
}

// mismatchWindow is how recently a replica must have been seen to be
// listed among those whose configuration differs.
const mismatchWindow = "10 seconds"

func (r *Replica) queueMismatch(b *pgx.Batch) {
	b.Queue(`SELECT name FROM brownout_replica WHERE service = $1 AND seen > now() - interval '`+mismatchWindow+`'
		AND config_hash <> (SELECT config_hash FROM brownout_published WHERE service = $1 AND config_hash <> '') ORDER BY name`, r.cfg.Service)
}

func (r *Replica) readMismatch(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	r.mu.Lock()
	changed := !slices.Equal(names, r.mu.mismatch)
	r.mu.mismatch = names
	r.mu.Unlock()
	if changed && len(names) > 0 {
		r.log.Warn("brownoutd: cluster: replicas run another configuration than the leader's (the leader's levels are served)", "replicas", strings.Join(names, ", "))
	}
	return nil
}

func (r *Replica) heartbeat(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `INSERT INTO brownout_replica (service, name, config_hash, version) VALUES ($1, $2, $3, $4)
		ON CONFLICT (service, name) DO UPDATE SET config_hash = excluded.config_hash, version = excluded.version, seen = now()`,
		r.cfg.Service, r.cfg.Name, r.hash, r.cfg.Version)
	return err
}

// reconcile makes the law's pins, freeze and shadow those of the store.
func reconcile(law *dimmer.Controller, now time.Time, ops opState, log *slog.Logger) {
	cp := law.Checkpoint()
	have := map[string]dimmer.CheckpointPin{}
	for _, p := range cp.Pins {
		have[p.Feature] = p
	}
	want := map[string]bool{}
	q := law.Config().Quantum
	for _, o := range ops.overrides {
		want[o.feature] = true
		until := now.Add(o.left)
		if h, ok := have[o.feature]; ok && math.Abs(h.Level-o.level) <= q/2 && h.Reason == o.reason && h.Until.Sub(until).Abs() < time.Second {
			continue
		}
		if _, err := law.PinAt(now, o.feature, o.level, min(max(o.left.Round(time.Second), time.Second), api.MaxTTL), o.reason); err != nil {
			log.Warn("brownoutd: cluster: an override in the store cannot be applied here", "feature", o.feature, "err", err)
		}
	}
	for name := range have {
		if !want[name] {
			law.UnpinAt(now, name)
		}
	}
	switch {
	case ops.frozen && (!cp.Frozen || cp.FreezeReason != ops.freezeReason):
		law.FreezeAt(now, ops.freezeReason)
	case !ops.frozen && cp.Frozen:
		law.UnfreezeAt(now)
	}
	if ops.shadow != cp.Shadow {
		law.SetShadowAt(now, ops.shadow)
	}
}

// stepDown gives the lease up at shutdown, so that another replica takes
// over at its next attempt rather than at the lease's expiry.
func (r *Replica) stepDown() {
	if r.own.term == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	inTx(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE brownout_lease SET expires = now() WHERE service = $1 AND term = $2 AND holder = $3`, r.cfg.Service, r.own.term, r.cfg.Name); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, 'lease ' || $2)`, channel, r.cfg.Service)
		return err
	})
	r.own = lease{}
	r.setLeading(time.Time{})
}

// Reconfigure replaces the control law's configuration (a reload) in
// the replica's loop: the law's, and the served controller's, which then
// serves the last committed state again until the next commit. It waits
// for the loop to be between two steps: at most a snapshot (a tick), a
// follow and a syncEvents (a tick each) and two lead attempts (each
// within the lease), and at least 10 s.
func (r *Replica) Reconfigure(cfg dimmer.Config) error {
	rc := reconfig{cfg: cfg, done: make(chan error, 1)}
	select {
	case r.reconf <- rc:
		return <-rc.done
	case <-r.stopped:
		return errors.New("cluster: reconfigure: the replica's loop has stopped")
	case <-time.After(max(10*time.Second, 3*r.tick+2*r.length)):
		return errors.New("cluster: reconfigure: the replica's loop does not answer")
	}
}

func (r *Replica) reconfigure(cfg dimmer.Config) error {
	now := time.Now()
	old := r.law.Config().Features
	if err := r.law.ReconfigureAt(now, cfg); err != nil {
		return err
	}
	named := map[string]bool{}
	for _, f := range cfg.Features {
		named[f.Name] = true
	}
	r.drop = slices.DeleteFunc(r.drop, func(f string) bool { return named[f] })
	if r.own.term != 0 {
		for _, f := range old {
			if !named[f.Name] && !slices.Contains(r.drop, f.Name) {
				r.drop = append(r.drop, f.Name)
			}
		}
	}
	if err := r.served.ReconfigureAt(now, cfg); err != nil {
		return err
	}
	r.hash = ConfigHash(r.law.Config())
	if r.committed != nil {
		r.served.AdoptAt(now, *r.committed) // the law's reload is published at its next commit
	}
	return nil
}

func (r *Replica) noteSource(now time.Time, err error) {
	if err == nil {
		if r.srcErr != "" {
			r.log.Info("brownoutd: signals back")
		}
		r.srcErr = ""
		return
	}
	if msg := err.Error(); msg != r.srcErr || now.Sub(r.srcLogged) >= time.Minute {
		if len(msg) > 1024 {
			msg = msg[:1024] + "…"
		}
		r.log.Warn("brownoutd: signals", "err", msg)
		r.srcErr, r.srcLogged = err.Error(), now
	}
}

func (r *Replica) setLeading(until time.Time) {
	r.mu.Lock()
	r.mu.until = until
	r.mu.Unlock()
}

func (r *Replica) storeFailed(err error) {
	if errors.Is(err, context.Canceled) {
		return // the loop stops (shutdown, the service removed): not the store's doing
	}
	r.mu.Lock()
	first := r.mu.storeErr == ""
	r.mu.storeErr = err.Error()
	r.mu.Unlock()
	if first {
		r.log.Error("brownoutd: cluster: the store cannot be reached: levels held, writes refused (503) until it is back", "err", err)
	}
}

func (r *Replica) storeOK() {
	r.mu.Lock()
	was := r.mu.storeErr
	r.mu.storeErr = ""
	r.mu.Unlock()
	if was != "" {
		r.log.Info("brownoutd: cluster: the store is back")
	}
}

// Info says what /v1/state shows of the replicas (api.Config.Cluster).
func (r *Replica) Info() *api.ClusterJSON {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &api.ClusterJSON{Replica: r.cfg.Name, Role: "follower", Leader: r.mu.leader, Term: r.mu.term, LeaderSince: r.mu.since,
		Store: "ok", ConfigMismatch: slices.Clone(r.mu.mismatch), LeaseSeconds: r.length.Seconds()}
	if r.mu.storeErr != "" {
		out.Store = r.mu.storeErr
	}
	switch {
	case !r.mu.until.IsZero() && now.Before(r.mu.until):
		out.Role, out.Current = "leader", true
	case r.mu.storeErr != "" && !now.Before(r.mu.leaseUntil):
		out.Role = "stale"
	default:
		// A follower: current while the lease it last read holds, that is
		// while the leader it read committed less than a lease ago.
		out.Current = now.Before(r.mu.leaseUntil)
	}
	return out
}

// Change records an operator's write (api.Store).
func (r *Replica) Change(ctx context.Context, c api.Change) (api.ChangeResult, error) {
	if err := r.write(ctx); err != nil {
		return api.ChangeResult{}, fmt.Errorf("%w: %v", api.ErrStoreDown, err)
	}
	defer r.written()
	return change(ctx, r.pool, r.cfg.Service, c)
}

// write waits for this replica's write under way, if any, to end (see
// Replica.writing); written ends the caller's.
func (r *Replica) write(ctx context.Context) error {
	select {
	case r.writing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: waiting for this service's writes before it: %w", ctx.Err())
	}
}

func (r *Replica) written() { <-r.writing }

// Applied waits until this replica serves version v of the operators'
// state (api.Store).
func (r *Replica) Applied(ctx context.Context, v uint64) (uint64, error) {
	for {
		r.mu.Lock()
		applied, gen, ch := r.mu.applied, r.mu.gen, r.mu.appliedCh
		r.mu.Unlock()
		if applied >= v {
			return gen, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Note records an event (api.Store).
func (r *Replica) Note(ctx context.Context, e api.Event) error {
	if err := r.write(ctx); err != nil {
		return err
	}
	defer r.written()
	return inTx(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := insertEvents(ctx, tx, r.cfg.Service, []api.Event{e}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, 'events ' || $2)`, channel, r.cfg.Service)
		return err
	})
}

func (r *Replica) register(reg prometheus.Registerer) error {
	get := func(f func() float64) func() float64 {
		return func() float64 {
			r.mu.Lock()
			defer r.mu.Unlock()
			return f()
		}
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brownout_cluster_leader", Help: "1 while this replica leads (publishes as the leader), else 0."},
			get(func() float64 { return b2f(!r.mu.until.IsZero() && time.Now().Before(r.mu.until)) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brownout_cluster_term", Help: "The lease's term as this replica last saw it."},
			get(func() float64 { return float64(r.mu.term) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brownout_cluster_store_up", Help: "1 while the store answered this replica's last round trip, else 0."},
			get(func() float64 { return b2f(r.mu.storeErr == "") })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "brownout_cluster_config_mismatch", Help: "Replicas seen in the last 10 s whose configuration differs from the leader's."},
			get(func() float64 { return float64(len(r.mu.mismatch)) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "brownout_cluster_takeovers_total", Help: "Times this replica took the lease (became the leader)."},
			get(func() float64 { return float64(r.mu.takeovers) })),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

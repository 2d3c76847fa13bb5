package fallback

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"regexp"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/internal/sqlq"
)

// Dialect is the SQL flavour of an outbox's database.
type Dialect uint8

const (
	// SQLite, through modernc.org/sqlite (driver "sqlite"): the embedded
	// default. Open it with fallback/sqlite.Open for WAL and a busy timeout
	// (that package links the driver; this one does not). Several
	// drainers on one machine may share the file.
	SQLite Dialect = iota
	// Postgres, through github.com/jackc/pgx/v5/stdlib (driver "pgx"):
	// drainers on several machines may share one outbox.
	Postgres
)

// OutboxConfig configures an Outbox. The zero value takes the defaults.
type OutboxConfig struct {
	Dialect Dialect
	// Table names the outbox table; dead letters go to Table_dead, the
	// claim counter and the shared pace to Table_state. Default "outbox".
	// Letters, digits and underscores, at most 57.
	Table string
	// Rate is the provider's contract, in messages per second, for the
	// whole fleet: every drainer of the outbox takes its send times from
	// one pace row in the database (see Outbox), so N drainers together
	// send at Rate, not N × Rate. Give all drainers of one outbox the same
	// Rate and Burst. Default 500.
	Rate float64
	// Burst: in any interval d the drainers together start at most
	// Rate·d + Burst sends; an idle outbox may send Burst at once.
	// Default 1: sends 1/Rate apart.
	Burst int
	// MaxAttempts sends of a message before it moves to the dead-letter
	// table. Default 8.
	MaxAttempts int
	// Backoff is the wait after a failed send. Default: full jitter,
	// uniform in [0, min(1 min, 1 s × 2^(attempts−1))).
	Backoff func(attempts int) time.Duration
	// Lease is how long a claim keeps its messages from other drainers.
	// A drainer never claims more than Rate × Lease messages, renews the
	// lease of those it has not sent yet when half of it is gone, and
	// cancels a send still running when its lease ends. A drainer that
	// dies leaves its messages to be sent again after at most Lease (at
	// least once). Default 30 s.
	Lease time.Duration
	// Batch is how many messages one claim takes at most (and at most
	// Rate × Lease). Default 100.
	Batch int
	// Poll is the wait when nothing is due. Default 200 ms.
	Poll time.Duration
	// Concurrency is how many sends one drainer has in flight at once:
	// sends start at the pace, and a provider that takes its time to
	// answer must not slow the drain below Rate. Default Rate × 200 ms
	// (at least 1): a provider answering within 200 ms is paced by Rate,
	// not by its latency. When the Sender calls through a Guard, keep it
	// below the guard's MaxConcurrent (20 by default, against a default
	// Concurrency of 100 at 500/s), leaving room for the live calls the
	// guard also serves: sends beyond it are refused with ErrFull, and
	// though a refusal is not counted as an attempt (see Sender), it has
	// used the pace's slot.
	Concurrency int
	// Allow, when set, is asked before each send: typically the guard's
	// Allows, so that the drain waits while the provider's breaker is open.
	Allow func() bool
	// Now returns the time. Default time.Now.
	Now func() time.Time
	// Logger receives drain errors. Default: discard.
	Logger *slog.Logger
}

// Message is one deferred call, e.g. an SMS.
type Message struct {
	// Key is the idempotency key: enqueueing the same key twice keeps one
	// message, and the receiver can dedupe on it (it is sent with every
	// attempt).
	Key   string
	Topic string
	// Payload is the message body; nil is an empty body.
	Payload []byte
	// NotBefore delays the first send, e.g. while the request that
	// enqueued it tries the call itself.
	NotBefore time.Time
	// Attempts made so far (set when draining).
	Attempts int
}

// Sender delivers one message. Returning nil deletes it from the outbox.
// A Sender that panics has failed the attempt: the panic's value is the
// attempt's error.
//
// An error that is (errors.Is) ErrNotSent, ErrOpen or ErrFull says the
// message was not sent at all — the Sender's guard refused the call, its
// breaker open or its bulkhead full: the message is due again after
// NotSentDelay, its attempts not counted, since attempts count sends.
type Sender func(ctx context.Context, m Message) error

// ErrNotSent, returned (or wrapped) by a Sender, says it did not try to
// send the message: it is due again after NotSentDelay without using up
// an attempt. The guard's refusals, ErrOpen and ErrFull, say the same.
var ErrNotSent = errors.New("fallback: outbox: not sent")

// NotSentDelay is how long a message the Sender did not send waits before
// it is due again: long enough for the sends that filled the guard's
// bulkhead to end (a provider's normal latency is a few hundred
// milliseconds), short enough that the message is not visibly late once
// the guard lets it through. An open breaker holds the drain through
// Allow meanwhile, so the wait need not cover the breaker's delay.
const NotSentDelay = 500 * time.Millisecond

// notSent reports whether a Sender's error says the message was not sent.
func notSent(err error) bool {
	return errors.Is(err, ErrNotSent) || errors.Is(err, ErrOpen) || errors.Is(err, ErrFull)
}

// Outbox is a transactional outbox: work for a dependency (the SMS of an
// order) is written in the same SQL transaction as the business write, so
// it exists exactly when the order does; a drain worker sends it later, at
// the provider's pace, oldest first, while the provider's breaker allows,
// retrying with backoff and moving a message to a dead-letter table after
// MaxAttempts. Delivery is at least once; with the idempotency key, a
// deduping receiver sees each message once.
//
// Several drainers (Run loops, in one process or many) may share an outbox,
// on SQLite or PostgreSQL:
//
//   - Claims are fenced. A claim stamps its messages with a claim id, one
//     more than the last (a counter row in Table_state), and leases them
//     for Lease. The drainer deletes, reschedules, releases or
//     dead-letters a message only where the row still carries its claim
//     id, so a drainer whose lease ran out (paused, or slower than its
//     lease) can no longer touch a message another drainer has claimed
//     since: its late result changes nothing and is counted as Fenced.
//   - The pace is shared. Before each send a drainer takes the next send
//     time from a pace row in Table_state, in one UPDATE: with T = 1/Rate
//     and τ = (Burst−1)·T, the row holds the theoretical arrival time tat;
//     a drainer at time now sends at s = max(now, max(tat, now) − τ), and
//     the row becomes max(tat, now) + T (GCRA, the virtual-scheduling form
//     of a leaky bucket). Every send has a distinct time s, so in any
//     interval d at most Rate·d + Burst sends start, whatever the number
//     of drainers. A drainer holds one send time at a time: one that is
//     descheduled past its s sends that one message late, never a
//     catch-up burst.
//
// The clocks of the drainers' machines must agree (NTP): leases and send
// times are wall-clock times in the database.
//
// An Outbox must be made with NewOutbox. It is safe for concurrent use.
type Outbox struct {
	cfg                        OutboxConfig
	db                         *sql.DB
	q                          queries
	interval, tau              int64 // ns: 1/Rate and (Burst−1)/Rate
	sent, dead, failed, fenced atomic.Uint64
}

type queries struct {
	enqueue, doneKey, done, claimID, claim, renew, release, retry, kill, pace, depth string
}

// tableName leaves room for the _dead and _state suffixes within
// PostgreSQL's 63-byte identifiers.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,56}$`)

// NewOutbox creates the tables if they do not exist and returns the outbox.
func NewOutbox(ctx context.Context, db *sql.DB, cfg OutboxConfig) (*Outbox, error) {
	if cfg.Table == "" {
		cfg.Table = "outbox"
	}
	if !tableName.MatchString(cfg.Table) {
		return nil, fmt.Errorf("fallback: outbox table %q: letters, digits and underscores only", cfg.Table)
	}
	if cfg.Rate == 0 {
		cfg.Rate = 500
	}
	if !(cfg.Rate > 0) {
		return nil, fmt.Errorf("fallback: outbox rate %v: want a positive rate", cfg.Rate)
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 1
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(n int) time.Duration {
			ceil := min(time.Minute, time.Second<<min(n-1, 10))
			return time.Duration(rand.Int64N(int64(ceil) + 1))
		}
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = max(1, int(math.Ceil(cfg.Rate*0.2)))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if lim := int(cfg.Rate * cfg.Lease.Seconds()); cfg.Batch > max(1, lim) {
		cfg.Batch = max(1, lim) // what the pace lets one drainer send within a lease
	}
	interval := max(1, int64(float64(time.Second)/cfg.Rate))
	o := &Outbox{cfg: cfg, db: db, interval: interval, tau: int64(cfg.Burst-1) * interval}
	t, dead, state := cfg.Table, cfg.Table+"_dead", cfg.Table+"_state"
	id, blob := "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB"
	if cfg.Dialect == Postgres {
		id, blob = "BIGSERIAL PRIMARY KEY", "BYTEA"
	}
	ddl := []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
			id %s,
			msg_key TEXT NOT NULL UNIQUE,
			topic TEXT NOT NULL,
			payload %s NOT NULL,
			created_at BIGINT NOT NULL,
			next_at BIGINT NOT NULL,
			attempts INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '',
			claim BIGINT NOT NULL DEFAULT 0)`, t, id, blob),
		fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s_due ON %s (next_at, id)`, t, t),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
			id %s,
			msg_key TEXT NOT NULL,
			topic TEXT NOT NULL,
			payload %s NOT NULL,
			created_at BIGINT NOT NULL,
			dead_at BIGINT NOT NULL,
			attempts INTEGER NOT NULL,
			last_error TEXT NOT NULL)`, dead, id, blob),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (name TEXT PRIMARY KEY, value BIGINT NOT NULL)`, state),
		fmt.Sprintf(`INSERT INTO %s (name, value) VALUES ('pace', 0), ('claim', 0) ON CONFLICT (name) DO NOTHING`, state),
	}
	for _, s := range ddl {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("fallback: outbox %s: create tables: %w", t, err)
		}
	}
	// An outbox made before claims were fenced has no claim column.
	if _, err := db.ExecContext(ctx, fmt.Sprintf(`SELECT claim FROM %s WHERE 1 = 0`, t)); err != nil {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN claim BIGINT NOT NULL DEFAULT 0`, t)); err != nil {
			return nil, fmt.Errorf("fallback: outbox %s: add the claim column: %w", t, err)
		}
	}
	claimWhere := fmt.Sprintf(`SELECT id FROM %s WHERE next_at <= ? ORDER BY id LIMIT ?`, t)
	if cfg.Dialect == Postgres {
		claimWhere += " FOR UPDATE SKIP LOCKED"
	}
	o.q = queries{
		enqueue: fmt.Sprintf(`INSERT INTO %s (msg_key, topic, payload, created_at, next_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (msg_key) DO NOTHING`, t),
		doneKey: fmt.Sprintf(`DELETE FROM %s WHERE msg_key = ?`, t),
		done:    fmt.Sprintf(`DELETE FROM %s WHERE id = ? AND claim = ?`, t),
		claimID: fmt.Sprintf(`UPDATE %s SET value = value + 1 WHERE name = 'claim' RETURNING value`, state),
		claim: fmt.Sprintf(`UPDATE %s SET next_at = ?, claim = ? WHERE id IN (%s) RETURNING id, msg_key, topic, payload, attempts`,
			t, claimWhere),
		renew:   fmt.Sprintf(`UPDATE %s SET next_at = ? WHERE id >= ? AND id <= ? AND claim = ?`, t),
		release: fmt.Sprintf(`UPDATE %s SET next_at = ? WHERE id = ? AND claim = ?`, t),
		retry:   fmt.Sprintf(`UPDATE %s SET next_at = ?, attempts = ?, last_error = ? WHERE id = ? AND claim = ?`, t),
		kill: fmt.Sprintf(`INSERT INTO %s (msg_key, topic, payload, created_at, dead_at, attempts, last_error)
			SELECT msg_key, topic, payload, created_at, ?, ?, ? FROM %s WHERE id = ? AND claim = ?`, dead, t),
		pace: fmt.Sprintf(`UPDATE %s SET value = (CASE WHEN value > ? THEN value ELSE ? END) + ? WHERE name = 'pace' RETURNING value`,
			state),
		depth: fmt.Sprintf(`SELECT COUNT(*), COALESCE(MIN(created_at), 0) FROM %s`, t),
	}
	if cfg.Dialect == Postgres {
		o.q = o.q.numbered()
	}
	return o, nil
}

// numbered rewrites ? placeholders as $1, $2, … for PostgreSQL.
func (q queries) numbered() queries {
	f := sqlq.Numbered
	for _, p := range []*string{&q.enqueue, &q.doneKey, &q.done, &q.claimID, &q.claim, &q.renew, &q.release,
		&q.retry, &q.kill, &q.pace, &q.depth} {
		*p = f(*p)
	}
	return q
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Enqueue adds m inside tx, the transaction of the business write. A
// message whose key is already queued is not added again.
func (o *Outbox) Enqueue(ctx context.Context, tx *sql.Tx, m Message) error {
	if m.Key == "" {
		return errors.New("fallback: outbox: a message needs an idempotency key")
	}
	now := o.cfg.Now()
	next := now
	if m.NotBefore.After(now) {
		next = m.NotBefore
	}
	if m.Payload == nil {
		m.Payload = []byte{} // a nil slice is SQL NULL, which the column refuses
	}
	if _, err := tx.ExecContext(ctx, o.q.enqueue, m.Key, m.Topic, m.Payload, ms(now), ms(next)); err != nil {
		return fmt.Errorf("fallback: outbox: enqueue %s: %w", m.Key, err)
	}
	return nil
}

// Done removes the message with key, e.g. after the request that enqueued
// it sent it itself. Removing a key that is not there is not an error. It
// is not fenced: whoever sent the message may say so, and a drainer that
// has it claimed then finds it gone (its send is a duplicate the receiver
// dedupes by key).
func (o *Outbox) Done(ctx context.Context, key string) error {
	if _, err := o.db.ExecContext(ctx, o.q.doneKey, key); err != nil {
		return fmt.Errorf("fallback: outbox: done %s: %w", key, err)
	}
	return nil
}

type claimed struct {
	id    int64
	claim int64     // the fencing token: the claim id stamped on the row
	until time.Time // the lease's end
	m     Message
}

// claim leases up to Batch due messages, oldest first, under a new claim
// id.
func (o *Outbox) claim(ctx context.Context) ([]claimed, error) {
	now := o.cfg.Now()
	until := now.Add(o.cfg.Lease)
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var claim int64
	if err := tx.QueryRowContext(ctx, o.q.claimID).Scan(&claim); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, o.q.claim, ms(until), claim, ms(now), o.cfg.Batch)
	if err != nil {
		return nil, err
	}
	var out []claimed
	for rows.Next() {
		c := claimed{claim: claim, until: until}
		if err := rows.Scan(&c.id, &c.m.Key, &c.m.Topic, &c.m.Payload, &c.m.Attempts); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	// RETURNING does not promise an order: oldest first.
	slices.SortFunc(out, func(a, b claimed) int { return cmp.Compare(a.id, b.id) })
	return out, tx.Commit()
}

// pace takes the next send time from the shared pace row and waits for it.
func (o *Outbox) pace(ctx context.Context) error {
	now := o.cfg.Now().UnixNano()
	var tat int64
	if err := o.db.QueryRowContext(ctx, o.q.pace, now, now, o.interval).Scan(&tat); err != nil {
		return fmt.Errorf("fallback: outbox: pace: %w", err)
	}
	// tat − T = max(tat₀, now): the send time is τ before it, not before now.
	at := max(now, tat-o.interval-o.tau)
	if at <= now {
		return nil
	}
	t := time.NewTimer(time.Duration(at - now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// renew extends the lease of cs, the claimed messages not yet handled (in
// id order, all under one claim). It reports false if the claim no longer
// holds all of them: the lease ran out and another drainer took some.
func (o *Outbox) renew(ctx context.Context, cs []claimed, now time.Time) (bool, error) {
	until := now.Add(o.cfg.Lease)
	res, err := o.db.ExecContext(ctx, o.q.renew, ms(until), cs[0].id, cs[len(cs)-1].id, cs[0].claim)
	if err != nil {
		return false, fmt.Errorf("fallback: outbox: renew lease: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(cs)) {
		return false, err
	}
	for i := range cs {
		cs[i].until = until
	}
	return true, nil
}

// DrainOnce claims due messages and sends them at the shared pace. It
// stops early when Allow says no or ctx ends (the rest are released at
// once) and returns how many were sent.
func (o *Outbox) DrainOnce(ctx context.Context, send Sender) (int, error) {
	if o.cfg.Allow != nil && !o.cfg.Allow() {
		return 0, nil
	}
	batch, err := o.claim(ctx)
	if err != nil {
		return 0, fmt.Errorf("fallback: outbox: claim: %w", err)
	}
	// Sends start at the pace, up to Concurrency in flight; each records
	// its own outcome under its claim.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		sent  int
		first error
	)
	slots := make(chan struct{}, o.cfg.Concurrency)
	finish := func() (int, error) {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return sent, first
	}
	record := func(err error) {
		mu.Lock()
		if err == nil {
			sent++
		} else if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for i := range batch {
		if err := o.pace(ctx); err != nil {
			o.releaseAll(batch[i:])
			n, ferr := finish()
			if ctx.Err() != nil {
				return n, nil
			}
			return n, errors.Join(err, ferr)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			o.releaseAll(batch[i:])
			n, _ := finish()
			return n, nil
		}
		if o.cfg.Allow != nil && !o.cfg.Allow() {
			<-slots
			o.releaseAll(batch[i:])
			return finish()
		}
		now := o.cfg.Now()
		if now.After(batch[i].until.Add(-o.cfg.Lease / 2)) {
			held, err := o.renew(ctx, batch[i:], now)
			if !held {
				<-slots
				o.releaseAll(batch[i:])
				n, ferr := finish()
				return n, errors.Join(err, ferr)
			}
		}
		c := batch[i]
		wg.Go(func() {
			defer func() { <-slots }()
			// A send must not outlive its lease: after it, another drainer
			// may send the message too.
			sctx, cancel := context.WithTimeout(ctx, c.until.Sub(now))
			err := o.sendOne(sctx, send, c.m)
			cancel()
			// What the send did is written even when the drain's ctx has
			// ended meanwhile (a shutdown): a message sent and not deleted
			// would go out again.
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
			defer cancel()
			if err != nil && notSent(err) {
				if err := o.later(bctx, c, err); err != nil {
					record(err)
				}
				return
			}
			if err != nil {
				o.failed.Add(1)
				if ctx.Err() != nil {
					o.releaseAll([]claimed{c})
					return
				}
				if err := o.fail(bctx, c, err); err != nil {
					record(err)
				}
				return
			}
			if err := o.done(bctx, c); err != nil {
				record(err)
				return
			}
			o.sent.Add(1)
			record(nil)
		})
	}
	return finish()
}

// bookkeepingTimeout bounds the write of a send's outcome, which runs on
// past the drain's context: the database's busy wait (5 s in
// fallback/sqlite) and a little more, so that a shutdown waits for it but
// never hangs on a database that is gone.
const bookkeepingTimeout = 10 * time.Second

// sendOne runs send on m, a panic turned into its error: the send runs on
// a goroutine of its own, where a panic would end the process — and, the
// message still queued, every drainer's again on every restart. As a
// failed attempt, a poison message goes to the dead letters after
// MaxAttempts.
func (o *Outbox) sendOne(ctx context.Context, send Sender, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fallback: outbox: send of %s panicked: %v", m.Key, r)
			o.cfg.Logger.Error("fallback: outbox: send panicked", "key", m.Key, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	return send(ctx, m)
}

func (o *Outbox) fencedOut(res sql.Result, c claimed, what string) {
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		o.fenced.Add(1)
		o.cfg.Logger.Warn("fallback: outbox: lease lost; another drainer holds the message", "key", c.m.Key, "claim", c.claim, "op", what)
	}
}

// done deletes a sent message, if the claim still holds it.
func (o *Outbox) done(ctx context.Context, c claimed) error {
	res, err := o.db.ExecContext(ctx, o.q.done, c.id, c.claim)
	if err != nil {
		return fmt.Errorf("fallback: outbox: delete sent %s: %w", c.m.Key, err)
	}
	o.fencedOut(res, c, "done")
	return nil
}

// releaseAll makes unsent claimed messages due again, those the claim
// still holds.
func (o *Outbox) releaseAll(cs []claimed) {
	ctx := context.Background() // the drain's ctx may be done; releasing is short
	now := ms(o.cfg.Now())
	for _, c := range cs {
		res, err := o.db.ExecContext(ctx, o.q.release, now, c.id, c.claim)
		if err != nil {
			o.cfg.Logger.Warn("fallback: outbox: release", "key", c.m.Key, "err", err)
			continue
		}
		o.fencedOut(res, c, "release")
	}
}

// later makes a message the Sender did not send due again after
// NotSentDelay, its attempts unchanged, if the claim still holds it.
func (o *Outbox) later(ctx context.Context, c claimed, cause error) error {
	res, err := o.db.ExecContext(ctx, o.q.retry, ms(o.cfg.Now().Add(NotSentDelay)), c.m.Attempts, errText(cause), c.id, c.claim)
	if err != nil {
		return fmt.Errorf("fallback: outbox: reschedule unsent %s: %w", c.m.Key, err)
	}
	o.fencedOut(res, c, "reschedule")
	return nil
}

// errText is an error as the outbox table keeps it: at most
// maxErrorText bytes.
func errText(err error) string {
	msg := err.Error()
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText]
	}
	return msg
}

// maxErrorText bounds a kept error: enough for a provider's message, and
// a flood of failures with long bodies does not grow the table.
const maxErrorText = 500

// fail schedules a retry, or moves the message to the dead letters, if the
// claim still holds it.
func (o *Outbox) fail(ctx context.Context, c claimed, cause error) error {
	attempts := c.m.Attempts + 1
	msg := errText(cause)
	now := o.cfg.Now()
	if attempts < o.cfg.MaxAttempts {
		res, err := o.db.ExecContext(ctx, o.q.retry, ms(now.Add(o.cfg.Backoff(attempts))), attempts, msg, c.id, c.claim)
		if err != nil {
			return fmt.Errorf("fallback: outbox: retry %s: %w", c.m.Key, err)
		}
		o.fencedOut(res, c, "retry")
		return nil
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, o.q.kill, ms(now), attempts, msg, c.id, c.claim); err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	res, err := tx.ExecContext(ctx, o.q.done, c.id, c.claim)
	if err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		o.fencedOut(res, c, "dead-letter")
		return nil // the rollback undoes nothing: the insert found no row either
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	o.dead.Add(1)
	o.cfg.Logger.Warn("fallback: outbox: dead letter", "key", c.m.Key, "attempts", attempts, "err", cause)
	return nil
}

// Run drains until ctx is done: claims, sends at the pace, waits Poll when
// nothing is due or the breaker is open. Drain errors are logged, not
// returned: Run returns only when ctx ends, and then returns ctx's error.
func (o *Outbox) Run(ctx context.Context, send Sender) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n, err := o.DrainOnce(ctx, send)
		if err != nil && ctx.Err() == nil {
			o.cfg.Logger.Warn("fallback: outbox: drain", "err", err)
		}
		if n > 0 {
			t.Reset(0)
		} else {
			t.Reset(o.cfg.Poll)
		}
	}
}

// OutboxStats describes an outbox.
type OutboxStats struct {
	Depth        int           // messages waiting
	OldestAge    time.Duration // age of the oldest waiting message
	Sent         uint64        // sent by this process
	Failed       uint64        // failed sends by this process
	DeadLettered uint64        // moved to dead letters by this process
	// Fenced counts this process's deletes, retries, dead letters and
	// releases that found the message no longer under its claim: the lease
	// had run out and another drainer claimed it, or it was removed
	// meanwhile (by Done, after the request sent it itself). Nothing was
	// changed; a message sent then may have gone out twice.
	Fenced uint64
}

// Stats reads the outbox's depth and counters.
func (o *Outbox) Stats(ctx context.Context) (OutboxStats, error) {
	var st OutboxStats
	var oldest int64
	if err := o.db.QueryRowContext(ctx, o.q.depth).Scan(&st.Depth, &oldest); err != nil {
		return st, fmt.Errorf("fallback: outbox: stats: %w", err)
	}
	if st.Depth > 0 {
		st.OldestAge = o.cfg.Now().Sub(time.UnixMilli(oldest))
	}
	st.Sent, st.Failed, st.DeadLettered, st.Fenced = o.sent.Load(), o.failed.Load(), o.dead.Load(), o.fenced.Load()
	return st, nil
}

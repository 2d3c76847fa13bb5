package fallback

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Dialect is the SQL flavour of an outbox's database.
type Dialect uint8

const (
	// SQLite, through modernc.org/sqlite (driver "sqlite"): the embedded
	// default. Open it with OpenSQLite for WAL and a busy timeout.
	SQLite Dialect = iota
	// Postgres, through github.com/jackc/pgx/v5/stdlib (driver "pgx"):
	// several drainers may share one outbox.
	Postgres
)

// OutboxConfig configures an Outbox. The zero value takes the defaults.
type OutboxConfig struct {
	Dialect Dialect
	// Table names the outbox table; dead letters go to Table_dead.
	// Default "outbox". Letters, digits and underscores only.
	Table string
	// Rate is the drain's pace, in messages per second: a leaky bucket,
	// one message at a time at 1/Rate intervals (the provider's contract).
	// Default 500.
	Rate float64
	// MaxAttempts sends of a message before it moves to the dead-letter
	// table. Default 8.
	MaxAttempts int
	// Backoff is the wait after a failed send. Default: full jitter,
	// uniform in [0, min(1 min, 1 s × 2^(attempts−1))).
	Backoff func(attempts int) time.Duration
	// Lease is how long a claimed message is invisible to other drainers:
	// a drainer that dies mid-send leaves it to be sent again after the
	// lease (at-least-once). Default 30 s.
	Lease time.Duration
	// Batch is how many messages one claim takes. Default 100.
	Batch int
	// Poll is the wait when nothing is due. Default 200 ms.
	Poll time.Duration
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
	// Payload is the message body.
	Payload []byte
	// NotBefore delays the first send, e.g. while the request that
	// enqueued it tries the call itself.
	NotBefore time.Time
	// Attempts made so far (set when draining).
	Attempts int
}

// Sender delivers one message. Returning nil deletes it from the outbox.
type Sender func(ctx context.Context, m Message) error

// Outbox is a transactional outbox: work for a dependency (the SMS of an
// order) is written in the same SQL transaction as the business write, so
// it exists exactly when the order does; a drain worker sends it later, at
// the provider's pace, oldest first, while the provider's breaker allows,
// retrying with backoff and moving a message to a dead-letter table after
// MaxAttempts. Delivery is at least once; with the idempotency key, a
// deduping receiver sees each message once.
//
// An Outbox must be made with NewOutbox. It is safe for concurrent use;
// several Run loops may drain one PostgreSQL outbox.
type Outbox struct {
	cfg     OutboxConfig
	db      *sql.DB
	q       queries
	sent    atomic.Uint64
	dead    atomic.Uint64
	failed  atomic.Uint64
	limiter *rate.Limiter
}

type queries struct {
	enqueue, done, claim, release, retry, kill, depth string
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	o := &Outbox{cfg: cfg, db: db, limiter: rate.NewLimiter(rate.Limit(cfg.Rate), 1)}
	t, dead := cfg.Table, cfg.Table+"_dead"
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
			last_error TEXT NOT NULL DEFAULT '')`, t, id, blob),
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
	}
	for _, s := range ddl {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("fallback: outbox %s: create tables: %w", t, err)
		}
	}
	claimWhere := fmt.Sprintf(`SELECT id FROM %s WHERE next_at <= ? ORDER BY id LIMIT ?`, t)
	if cfg.Dialect == Postgres {
		claimWhere += " FOR UPDATE SKIP LOCKED"
	}
	o.q = queries{
		enqueue: fmt.Sprintf(`INSERT INTO %s (msg_key, topic, payload, created_at, next_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (msg_key) DO NOTHING`, t),
		done:    fmt.Sprintf(`DELETE FROM %s WHERE msg_key = ?`, t),
		claim: fmt.Sprintf(`UPDATE %s SET next_at = ? WHERE id IN (%s) RETURNING id, msg_key, topic, payload, attempts`,
			t, claimWhere),
		release: fmt.Sprintf(`UPDATE %s SET next_at = ? WHERE id = ?`, t),
		retry:   fmt.Sprintf(`UPDATE %s SET next_at = ?, attempts = ?, last_error = ? WHERE id = ?`, t),
		kill: fmt.Sprintf(`INSERT INTO %s (msg_key, topic, payload, created_at, dead_at, attempts, last_error)
			SELECT msg_key, topic, payload, created_at, ?, ?, ? FROM %s WHERE id = ?`, dead, t),
		depth: fmt.Sprintf(`SELECT COUNT(*), COALESCE(MIN(created_at), 0) FROM %s`, t),
	}
	if cfg.Dialect == Postgres {
		o.q = o.q.numbered()
	}
	return o, nil
}

// numbered rewrites ? placeholders as $1, $2, … for PostgreSQL.
func (q queries) numbered() queries {
	f := func(s string) string {
		var b strings.Builder
		n := 0
		for _, r := range s {
			if r == '?' {
				n++
				b.WriteString("$" + strconv.Itoa(n))
				continue
			}
			b.WriteRune(r)
		}
		return b.String()
	}
	return queries{f(q.enqueue), f(q.done), f(q.claim), f(q.release), f(q.retry), f(q.kill), f(q.depth)}
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
	if _, err := tx.ExecContext(ctx, o.q.enqueue, m.Key, m.Topic, m.Payload, ms(now), ms(next)); err != nil {
		return fmt.Errorf("fallback: outbox: enqueue %s: %w", m.Key, err)
	}
	return nil
}

// Done removes the message with key, e.g. after the request that enqueued
// it sent it itself. Removing a key that is not there is not an error.
func (o *Outbox) Done(ctx context.Context, key string) error {
	if _, err := o.db.ExecContext(ctx, o.q.done, key); err != nil {
		return fmt.Errorf("fallback: outbox: done %s: %w", key, err)
	}
	return nil
}

type claimed struct {
	id int64
	m  Message
}

// claim leases up to Batch due messages, oldest first.
func (o *Outbox) claim(ctx context.Context) ([]claimed, error) {
	now := o.cfg.Now()
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, o.q.claim, ms(now.Add(o.cfg.Lease)), ms(now), o.cfg.Batch)
	if err != nil {
		return nil, err
	}
	var out []claimed
	for rows.Next() {
		var c claimed
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
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].id < out[j-1].id; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, tx.Commit()
}

// DrainOnce claims due messages and sends them at the configured pace. It
// stops early when Allow says no (the rest are released at once) and
// returns how many were sent.
func (o *Outbox) DrainOnce(ctx context.Context, send Sender) (int, error) {
	if o.cfg.Allow != nil && !o.cfg.Allow() {
		return 0, nil
	}
	batch, err := o.claim(ctx)
	if err != nil {
		return 0, fmt.Errorf("fallback: outbox: claim: %w", err)
	}
	sent := 0
	for i, c := range batch {
		if err := o.limiter.Wait(ctx); err != nil {
			o.releaseAll(batch[i:])
			return sent, nil
		}
		if o.cfg.Allow != nil && !o.cfg.Allow() {
			o.releaseAll(batch[i:])
			return sent, nil
		}
		if err := send(ctx, c.m); err != nil {
			o.failed.Add(1)
			if ctx.Err() != nil {
				o.releaseAll(batch[i:])
				return sent, nil
			}
			if err := o.fail(ctx, c, err); err != nil {
				return sent, err
			}
			continue
		}
		if _, err := o.db.ExecContext(ctx, o.q.done, c.m.Key); err != nil {
			return sent, fmt.Errorf("fallback: outbox: delete sent %s: %w", c.m.Key, err)
		}
		o.sent.Add(1)
		sent++
	}
	return sent, nil
}

// releaseAll makes unsent claimed messages due again.
func (o *Outbox) releaseAll(cs []claimed) {
	ctx := context.Background() // the drain's ctx may be done; releasing is short
	now := ms(o.cfg.Now())
	for _, c := range cs {
		if _, err := o.db.ExecContext(ctx, o.q.release, now, c.id); err != nil {
			o.cfg.Logger.Warn("fallback: outbox: release", "key", c.m.Key, "err", err)
		}
	}
}

// fail schedules a retry, or moves the message to the dead letters.
func (o *Outbox) fail(ctx context.Context, c claimed, cause error) error {
	attempts := c.m.Attempts + 1
	msg := cause.Error()
	if len(msg) > 500 {
		msg = msg[:500]
	}
	now := o.cfg.Now()
	if attempts < o.cfg.MaxAttempts {
		_, err := o.db.ExecContext(ctx, o.q.retry, ms(now.Add(o.cfg.Backoff(attempts))), attempts, msg, c.id)
		if err != nil {
			return fmt.Errorf("fallback: outbox: retry %s: %w", c.m.Key, err)
		}
		return nil
	}
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, o.q.kill, ms(now), attempts, msg, c.id); err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	if _, err := tx.ExecContext(ctx, o.q.done, c.m.Key); err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fallback: outbox: dead-letter %s: %w", c.m.Key, err)
	}
	o.dead.Add(1)
	o.cfg.Logger.Warn("fallback: outbox: dead letter", "key", c.m.Key, "attempts", attempts, "err", cause)
	return nil
}

// Run drains until ctx is done: claims, sends at the pace, waits Poll when
// nothing is due or the breaker is open. It returns nil when ctx ends.
func (o *Outbox) Run(ctx context.Context, send Sender) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
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
	st.Sent, st.Failed, st.DeadLettered = o.sent.Load(), o.failed.Load(), o.dead.Load()
	return st, nil
}

// OpenSQLite opens (creating) an SQLite database for an outbox: WAL
// journal, a 5 s busy timeout, synchronous NORMAL (durable across process
// crashes; a power loss may lose the last transactions).
func OpenSQLite(path string) (*sql.DB, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("fallback: open sqlite %s: %w", path, err)
	}
	return db, nil
}

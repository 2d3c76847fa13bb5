package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/brownout/brownout/fallback"
	"github.com/brownout/brownout/internal/sqlq"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors the store returns, wrapped with details: test them with
// errors.Is.
var (
	// ErrNotFound: no product (or order) with that id.
	ErrNotFound = errors.New("store: not found")
	// ErrBadInput: a request the store refuses before touching the data:
	// an empty user, a user id or idempotency key that is not UTF-8 text
	// (control characters included), a quantity outside 1..MaxQty, no
	// items, too many items, a cart line that would exceed MaxQty, no
	// Payer.
	ErrBadInput = errors.New("store: bad input")
	// ErrOutOfStock: a checkout asked for more units than are left. Nothing
	// was written and nobody was charged.
	ErrOutOfStock = errors.New("store: out of stock")
	// ErrIdempotencyConflict: the checkout's idempotency key was already
	// used by another user or for other items. Nothing was written and
	// nobody was charged.
	ErrIdempotencyConflict = errors.New("store: idempotency key reused for another request")
	// ErrInProgress: a checkout with the same idempotency key is under
	// way (within its lease); retry in a moment.
	ErrInProgress = errors.New("store: a checkout with this idempotency key is in progress")
	// ErrPriceChanged: a price changed between the charge and the order;
	// the charge was voided.
	ErrPriceChanged = errors.New("store: the prices changed during checkout")
	// ErrCancelled: the checkout under this key was abandoned unfinished
	// and its charge cancelled (see Reconcile): nothing is charged; buy
	// again with a new key.
	ErrCancelled = errors.New("store: checkout cancelled: its payment was given back; use a new idempotency key")
	// ErrChargeVoided is what a Payer's Charge returns (wrapped) when the
	// gateway refuses to charge under a key whose charge was voided or
	// that was cancelled.
	ErrChargeVoided = errors.New("store: the charge under this key was voided")
	// ErrNotCharged is what a Payer's Charge returns (wrapped) when it did
	// not ask the gateway at all (a circuit breaker open, a bulkhead full,
	// the caller gone): nothing can have been charged.
	ErrNotCharged = errors.New("store: the gateway was not asked: nothing charged")
)

// Limits on the input.
const (
	// MaxQty is the largest quantity of one product in a checkout or a
	// cart line; the smallest is 1.
	MaxQty = 10
	// MaxItems is the largest number of distinct products in a checkout.
	MaxItems = 20
	// MaxKeyLen bounds the length, in bytes, of a user id and of an
	// idempotency key.
	MaxKeyLen = 200
	// MaxCartLines is the most products one user's cart holds: a
	// checkout takes at most MaxItems, so a longer cart could not be
	// bought whole.
	MaxCartLines = MaxItems
)

// The carts' lifetime (ExpireCarts): a user needs no account, any
// X-User-ID is a user, so carts would otherwise pile up for ever — a
// client rotating user ids grew the database by 1.3 GB an hour.
const (
	// CartTTL is how long a cart lives after its last add: a shopper's
	// day, as long as a sale.
	CartTTL = 24 * time.Hour
	// MaxStoredCartLines bounds every cart's lines together: past it,
	// ExpireCarts drops the carts idle longest. A line of a 190-byte user
	// id takes about 460 bytes on SQLite (the id in the table and its
	// key), so 100 000 lines are under 50 MB; a sale's 20 minutes at
	// twice the shop's capacity add about 40 000. A client rotating user
	// ids (600 new carts a second) fills them in minutes, and then only
	// churns them.
	MaxStoredCartLines = 100_000
)

// Store is the shop's data: the product catalogue with its stock, carts,
// orders and idempotency keys, in SQLite or PostgreSQL. Make it with Open.
// It is safe for concurrent use.
type Store struct {
	db *sql.DB
	pg bool
	q  queries
	// write is the process-local writer slot for SQLite: one writing
	// transaction at a time takes it, in arrival order, instead of polling
	// the file lock (SQLite has one writer anyway). The BEGIN IMMEDIATE
	// behind it still orders writers across processes and against the
	// outbox's drainers. Nil on PostgreSQL.
	write chan struct{}
	ids   idGen
	// now is the clock of leases and order times; time.Now but in tests.
	now func() time.Time
}

// Open opens the shop's database, creates its tables if they do not
// exist and seeds the Catalogue if there are no products yet.
//
// A dsn starting with postgres:// or postgresql:// is a PostgreSQL
// connection string (driver pgx; at most 32 open connections, all kept
// when idle, which DB().SetMaxOpenConns and SetMaxIdleConns change). Anything else is the path of an SQLite
// file, created if missing, opened with fallback/sqlite.Open's settings (WAL, a 5 s
// busy timeout, synchronous NORMAL) and with every writing transaction
// begun IMMEDIATE, so that it takes the write lock at BEGIN rather than
// failing to upgrade a read later (see the package documentation).
// ":memory:" is refused: each pooled connection would get its own empty
// database.
func Open(ctx context.Context, dsn string) (*Store, error) {
	kind, src, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	s := &Store{pg: kind == kindPostgres, now: time.Now}
	driver := "sqlite"
	if s.pg {
		driver = "pgx"
	} else {
		s.write = make(chan struct{}, 1)
	}
	s.db, err = sql.Open(driver, src)
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if s.pg {
		s.db.SetMaxOpenConns(32)
		s.db.SetMaxIdleConns(32) // database/sql keeps 2: a burst would reconnect
	}
	s.q = newQueries(s.pg)
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// DB is the store's database handle, for the outbox that shares it:
// fallback.NewOutbox(ctx, s.DB(), fallback.OutboxConfig{Dialect: s.Dialect()}).
func (s *Store) DB() *sql.DB { return s.db }

// Dialect is the outbox dialect of the store's database: fallback.SQLite
// or fallback.Postgres.
func (s *Store) Dialect() fallback.Dialect {
	if s.pg {
		return fallback.Postgres
	}
	return fallback.SQLite
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

type dsnKind uint8

const (
	kindSQLite dsnKind = iota
	kindPostgres
)

// parseDSN tells PostgreSQL URLs from SQLite paths and, for a path,
// returns the modernc DSN: a file: URI (the path with %, ? and #
// escaped, so that it cannot be read as URI syntax) with fallback/sqlite.Open's
// pragmas and _txlock=immediate.
func parseDSN(dsn string) (dsnKind, string, error) {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if len(dsn) >= len(scheme) && strings.EqualFold(dsn[:len(scheme)], scheme) {
			return kindPostgres, dsn, nil
		}
	}
	switch {
	case dsn == "":
		return 0, "", fmt.Errorf("store: open: %w: empty dsn", ErrBadInput)
	case dsn == ":memory:":
		return 0, "", fmt.Errorf("store: open: %w: an in-memory SQLite database is per connection; give a file path", ErrBadInput)
	case strings.IndexByte(dsn, 0) >= 0:
		return 0, "", fmt.Errorf("store: open: %w: NUL in the path", ErrBadInput)
	}
	path := filepath.Clean(dsn) // also turns a leading // (a URI authority) into /
	var b strings.Builder
	b.WriteString("file:")
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '%', '?', '#':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	// The same pragmas as fallback/sqlite.Open, and BEGIN IMMEDIATE for
	// every transaction that is not read-only.
	b.WriteString("?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	return kindSQLite, b.String(), nil
}

// queries are the store's statements, written with ? and numbered for
// PostgreSQL.
type queries struct {
	product, products, productStock                   string
	cartAdd, cartList, cartClear                      string
	cartQty, cartTouch, cartLock, cartExpire          string
	cartCount, cartNth                                string
	claimByKey, claimByOrder, claimInsert, claimTake  string
	claimDone, claimFail, claimRelease, claimsPending string
	claimsAbandoned, claimDrop, take                  string
	orderInsert, itemInsert, orderGet, orderItems     string
	orderPayments                                     string
	statsOrders, statsProducts, seedCount, seedInsert string
}

// claimColumns are a claim's columns, in checkoutClaim's order.
const claimColumns = `order_id, idem_key, user_id, request, amount_cents, pay_key, state, failure, attempt, lease_until`

func newQueries(pg bool) queries {
	q := queries{
		product:      `SELECT id, name, price_cents, stock, flash FROM shop_products WHERE id = ?`,
		products:     `SELECT id, name, price_cents, stock, flash FROM shop_products ORDER BY id`,
		productStock: `SELECT stock FROM shop_products WHERE id = ?`,
		// A new line only while the cart has room; a line grows only up
		// to MaxQty. Neither writes anything otherwise (no error: on
		// PostgreSQL an error would end the transaction).
		cartAdd: `INSERT INTO shop_cart_lines (user_id, product_id, qty, updated_at)
			SELECT CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS BIGINT)
			WHERE (SELECT COUNT(*) FROM shop_cart_lines WHERE user_id = ?) < ` + strconv.Itoa(MaxCartLines) + `
				OR EXISTS (SELECT 1 FROM shop_cart_lines WHERE user_id = ? AND product_id = ?)
			ON CONFLICT (user_id, product_id) DO UPDATE SET qty = shop_cart_lines.qty + excluded.qty, updated_at = excluded.updated_at
			WHERE shop_cart_lines.qty + excluded.qty <= ` + strconv.Itoa(MaxQty),
		cartQty:   `SELECT qty FROM shop_cart_lines WHERE user_id = ? AND product_id = ?`,
		cartTouch: `UPDATE shop_cart_lines SET updated_at = ? WHERE user_id = ?`,
		// One user's adds one at a time (the count of its lines holds).
		cartLock:  `SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS TEXT), 7541110112))`,
		cartList:  `SELECT product_id, qty FROM shop_cart_lines WHERE user_id = ? ORDER BY product_id`,
		cartClear: `DELETE FROM shop_cart_lines WHERE user_id = ?`,
		// Lines idle since the cutoff, a batch at a time.
		cartExpire: `DELETE FROM shop_cart_lines WHERE (user_id, product_id) IN
			(SELECT user_id, product_id FROM shop_cart_lines WHERE updated_at <= ? ORDER BY updated_at LIMIT ?)`,
		cartCount:    `SELECT COUNT(*) FROM shop_cart_lines`,
		cartNth:      `SELECT updated_at FROM shop_cart_lines ORDER BY updated_at LIMIT 1 OFFSET ?`,
		claimByKey:   `SELECT ` + claimColumns + ` FROM shop_checkouts WHERE idem_key = ?`,
		claimByOrder: `SELECT ` + claimColumns + ` FROM shop_checkouts WHERE order_id = ?`,
		// A key claimed meanwhile inserts nothing (no error: on
		// PostgreSQL an error would end the transaction).
		claimInsert: `INSERT INTO shop_checkouts (order_id, idem_key, user_id, request, amount_cents, pay_key, state, attempt, lease_until, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		// Each statement on a claim names the owner (attempt) it expects:
		// a claim taken over is no longer written by its former owner.
		claimTake: `UPDATE shop_checkouts SET attempt = attempt + 1, lease_until = ?
			WHERE order_id = ? AND state = 'pending' AND attempt = ? AND lease_until <= ?`,
		claimDone:    `UPDATE shop_checkouts SET state = 'done' WHERE order_id = ? AND state = 'pending' AND attempt = ?`,
		claimFail:    `UPDATE shop_checkouts SET state = 'failed', failure = ? WHERE order_id = ? AND state = 'pending' AND attempt = ?`,
		claimRelease: `UPDATE shop_checkouts SET lease_until = ? WHERE order_id = ? AND state = 'pending' AND attempt = ?`,
		// Only a claim never taken over: no other owner can have charged.
		claimDrop: `DELETE FROM shop_checkouts WHERE order_id = ? AND state = 'pending' AND attempt = 1`,
		claimsAbandoned: `SELECT ` + claimColumns + ` FROM shop_checkouts
			WHERE state = 'pending' AND lease_until <= ? ORDER BY lease_until LIMIT ?`,
		claimsPending: `SELECT COUNT(*) FROM shop_checkouts WHERE state = 'pending'`,
		// The conditional decrement: it never takes stock below zero, and
		// returns the price the order is charged at.
		take:          `UPDATE shop_products SET stock = stock - ? WHERE id = ? AND stock >= ? RETURNING price_cents`,
		orderInsert:   `INSERT INTO shop_orders (id, user_id, total_cents, payment_ref, idem_key, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		itemInsert:    `INSERT INTO shop_order_items (order_id, product_id, qty, price_cents) VALUES (?, ?, ?, ?)`,
		orderGet:      `SELECT id, user_id, total_cents, payment_ref, idem_key, created_at FROM shop_orders WHERE id = ?`,
		orderItems:    `SELECT product_id, qty, price_cents FROM shop_order_items WHERE order_id = ? ORDER BY product_id`,
		orderPayments: `SELECT id, payment_ref FROM shop_orders ORDER BY id`,
		statsOrders:   `SELECT COUNT(*), CAST(COALESCE(SUM(total_cents), 0) AS BIGINT) FROM shop_orders`,
		statsProducts: `SELECT p.id, p.initial_stock, p.stock, CAST(COALESCE(SUM(i.qty), 0) AS BIGINT)
			FROM shop_products p LEFT JOIN shop_order_items i ON i.product_id = p.id
			GROUP BY p.id, p.initial_stock, p.stock ORDER BY p.id`,
		seedCount: `SELECT COUNT(*) FROM shop_products`,
		seedInsert: `INSERT INTO shop_products (id, name, price_cents, stock, initial_stock, flash) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
	}
	if pg {
		for _, p := range []*string{&q.product, &q.products, &q.productStock, &q.cartAdd, &q.cartList, &q.cartClear,
			&q.cartQty, &q.cartTouch, &q.cartLock, &q.cartExpire, &q.cartCount, &q.cartNth,
			&q.claimByKey, &q.claimByOrder, &q.claimInsert, &q.claimTake, &q.claimDone, &q.claimFail, &q.claimRelease,
			&q.claimsAbandoned, &q.claimsPending, &q.claimDrop, &q.take, &q.orderInsert, &q.itemInsert, &q.orderGet, &q.orderItems,
			&q.orderPayments, &q.statsOrders, &q.statsProducts, &q.seedCount, &q.seedInsert} {
			*p = numbered(*p)
		}
	}
	return q
}

// numbered rewrites ? placeholders as $1, $2, … for PostgreSQL.
func numbered(s string) string { return sqlq.Numbered(s) }

// schema is the same SQL on both databases. Stock can never be negative:
// the conditional UPDATE never tries, and the CHECK refuses it anyway.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS shop_products (
		id BIGINT PRIMARY KEY,
		name TEXT NOT NULL,
		price_cents BIGINT NOT NULL CHECK (price_cents > 0),
		stock BIGINT NOT NULL CHECK (stock >= 0),
		initial_stock BIGINT NOT NULL,
		flash INTEGER NOT NULL DEFAULT 0)`,
	// A cart line with the time of its cart's last add (Unix µs), which
	// ExpireCarts reads through its index.
	`CREATE TABLE IF NOT EXISTS shop_cart_lines (
		user_id TEXT NOT NULL,
		product_id BIGINT NOT NULL REFERENCES shop_products (id),
		qty INTEGER NOT NULL CHECK (qty BETWEEN 1 AND 10),
		updated_at BIGINT NOT NULL,
		PRIMARY KEY (user_id, product_id))`,
	`CREATE INDEX IF NOT EXISTS shop_cart_lines_updated ON shop_cart_lines (updated_at)`,
	// The carts of an older version, without their time: they become
	// lines of time 0, the first ExpireCarts drops them, and the old table
	// goes (created first, empty, where it never was).
	`CREATE TABLE IF NOT EXISTS shop_cart (
		user_id TEXT NOT NULL,
		product_id BIGINT NOT NULL,
		qty INTEGER NOT NULL,
		PRIMARY KEY (user_id, product_id))`,
	`INSERT INTO shop_cart_lines (user_id, product_id, qty, updated_at)
		SELECT user_id, product_id, qty, 0 FROM shop_cart WHERE true
		ON CONFLICT DO NOTHING`,
	`DROP TABLE shop_cart`,
	`CREATE TABLE IF NOT EXISTS shop_orders (
		id TEXT PRIMARY KEY,
		user_id TEXT NOT NULL,
		total_cents BIGINT NOT NULL,
		payment_ref TEXT NOT NULL,
		idem_key TEXT NOT NULL DEFAULT '',
		created_at BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS shop_order_items (
		order_id TEXT NOT NULL REFERENCES shop_orders (id),
		product_id BIGINT NOT NULL REFERENCES shop_products (id),
		qty INTEGER NOT NULL CHECK (qty > 0),
		price_cents BIGINT NOT NULL,
		PRIMARY KEY (order_id, product_id))`,
	`CREATE INDEX IF NOT EXISTS shop_order_items_product ON shop_order_items (product_id)`,
	// A checkout's claim: written before anything is charged, so before
	// its order exists (order_id is the id the order will have); the
	// idempotency key under a UNIQUE constraint (NULL for a checkout
	// without one). See Checkout and Reconcile.
	`CREATE TABLE IF NOT EXISTS shop_checkouts (
		order_id TEXT PRIMARY KEY,
		idem_key TEXT UNIQUE,
		user_id TEXT NOT NULL,
		request TEXT NOT NULL,
		amount_cents BIGINT NOT NULL,
		pay_key TEXT NOT NULL,
		state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'failed')),
		failure TEXT NOT NULL DEFAULT '',
		attempt BIGINT NOT NULL,
		lease_until BIGINT NOT NULL,
		created_at BIGINT NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS shop_checkouts_pending ON shop_checkouts (lease_until) WHERE state = 'pending'`,
	// The keys of an older version, which claimed a key in the order's
	// own transaction: they become finished claims, and the old table
	// goes (created first, empty, where it never was).
	`CREATE TABLE IF NOT EXISTS shop_idempotency (
		idem_key TEXT PRIMARY KEY,
		user_id TEXT NOT NULL,
		request TEXT NOT NULL,
		order_id TEXT NOT NULL,
		created_at BIGINT NOT NULL)`,
	`INSERT INTO shop_checkouts (order_id, idem_key, user_id, request, amount_cents, pay_key, state, attempt, lease_until, created_at)
		SELECT k.order_id, k.idem_key, k.user_id, k.request, o.total_cents, '', 'done', 1, 0, k.created_at
		FROM shop_idempotency k JOIN shop_orders o ON o.id = k.order_id WHERE true
		ON CONFLICT DO NOTHING`,
	`DROP TABLE shop_idempotency`,
}

// migrate creates the tables and seeds the catalogue, in one
// transaction (serialized between processes on PostgreSQL by an advisory
// lock, on SQLite by BEGIN IMMEDIATE).
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create schema: %w", err)
	}
	defer tx.Rollback()
	if s.pg {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7541110111)`); err != nil {
			return fmt.Errorf("store: create schema: %w", err)
		}
	}
	for _, ddl := range schema {
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("store: create schema: %w", err)
		}
	}
	var n int64
	if err := tx.QueryRowContext(ctx, s.q.seedCount).Scan(&n); err != nil {
		return fmt.Errorf("store: seed: %w", err)
	}
	if n == 0 {
		for _, p := range Catalogue() {
			flash := 0
			if p.Flash {
				flash = 1
			}
			if _, err := tx.ExecContext(ctx, s.q.seedInsert, p.ID, p.Name, p.PriceCents, p.Stock, p.Stock, flash); err != nil {
				return fmt.Errorf("store: seed: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create schema: %w", err)
	}
	return nil
}

// lock takes the SQLite writer slot; on PostgreSQL it does nothing.
func (s *Store) lock(ctx context.Context) error {
	if s.write == nil {
		return nil
	}
	select {
	case s.write <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) unlock() {
	if s.write != nil {
		<-s.write
	}
}

// isRetryable reports an error after which the whole transaction may run
// again: a PostgreSQL serialization failure or deadlock, SQLite busy.
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_BUSY
	}
	return false
}

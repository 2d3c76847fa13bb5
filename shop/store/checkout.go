package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CheckoutRequest is one purchase.
type CheckoutRequest struct {
	User string
	// Items: 1 to MaxItems entries, each a product id and a quantity of 1
	// to MaxQty. The same product listed twice counts once with the
	// quantities added (at most MaxQty); the order of the entries does not
	// matter.
	Items []Item
	// IdempotencyKey makes retries safe: a checkout with a key that
	// already bought something returns that order instead of buying again
	// (see Checkout). At most MaxKeyLen bytes. Empty: not idempotent,
	// every call is a new purchase.
	IdempotencyKey string
}

// OrderItem is a line of an order, at the price it was charged.
type OrderItem struct {
	ProductID  int64
	Qty        int64
	PriceCents int64 // per unit
}

// Order is a completed purchase.
type Order struct {
	// ID is unique and sorts by creation time (see Checkout).
	ID             string
	User           string
	Items          []OrderItem // by product id
	TotalCents     int64
	PaymentRef     string // what PayFunc returned
	IdempotencyKey string
	CreatedAt      time.Time
}

// PayFunc charges the customer amountCents and returns the payment's
// reference. Checkout calls it inside its transaction, after the stock is
// taken and before the order is written: an error rolls everything back.
// It must not write to the database except through tx (on SQLite the
// transaction holds the write lock). ctx is the caller's; give the call
// its own timeout (the payment gateway's guard does).
type PayFunc func(ctx context.Context, tx *sql.Tx, amountCents int64) (paymentRef string, err error)

// EnqueueFunc queues the order's follow-up work — the SMS — inside the
// order's transaction, typically with fallback.Outbox.Enqueue(ctx, tx, …):
// the message exists exactly when the order does. An error rolls the
// checkout back (after the payment: see Checkout).
type EnqueueFunc func(ctx context.Context, tx *sql.Tx, orderID string) error

const (
	// attempts bounds the runs of a checkout transaction that failed, before
	// the payment, with a serialization failure, a deadlock or SQLite busy.
	attempts = 5
	// finishTimeout bounds the writes after a successful payment, which run
	// even if the caller's context has ended: a charged customer gets the
	// order.
	finishTimeout = 10 * time.Second
)

// Checkout buys req.Items for req.User in one database transaction:
//
//  1. with an IdempotencyKey, look the key up: if a checkout already
//     used it, return that order with created false — the same user and
//     the same items (in any order) — without charging again, or
//     ErrIdempotencyConflict for another user or other items. Otherwise
//     claim the key (a row under a UNIQUE constraint, written before
//     anything is charged): a concurrent checkout with the same key waits
//     for this one, or finds the key taken, rolls back and returns the
//     order of the one that committed, so that concurrent retries make
//     one order and one payment;
//  2. take the stock of each product, in product id order (so that
//     concurrent multi-item checkouts cannot deadlock), with
//     UPDATE … SET stock = stock − qty WHERE id = ? AND stock >= qty: no
//     row means ErrOutOfStock (or ErrNotFound), and everything rolls back;
//  3. pay(ctx, tx, total), the total at the current prices: an error rolls
//     everything back and is returned wrapped;
//  4. write the order and its items;
//  5. enqueue(ctx, tx, orderID), if not nil: an error rolls back;
//  6. commit, and return the order with created true.
//
// No order ever takes more than the stock, and stock is never negative,
// under any number of concurrent checkouts, on SQLite and PostgreSQL (see
// the package documentation). Input is checked first (ErrBadInput); pay
// must not be nil.
//
// Before the payment, a serialization failure, deadlock or SQLite busy
// error reruns the transaction (at most 5 runs). Once pay has been called,
// nothing is rerun: a checkout never calls pay twice. From then on, the
// order is written under a context of its own (10 s) even if ctx ends, so
// that a charged customer is not left without an order because the
// client went away; if a write after a successful payment still fails,
// the error says so, and the caller must refund (or have charged with the
// idempotency key, so that a retry is not charged twice by the gateway).
func (s *Store) Checkout(ctx context.Context, req CheckoutRequest, pay PayFunc, enqueue EnqueueFunc) (Order, bool, error) {
	items, request, err := normalize(req)
	if err != nil {
		return Order{}, false, fmt.Errorf("store: checkout: %w", err)
	}
	if pay == nil {
		return Order{}, false, fmt.Errorf("store: checkout: %w: no pay function", ErrBadInput)
	}
	key := req.IdempotencyKey
	if key != "" {
		// A retry of a finished checkout needs neither a transaction nor,
		// on SQLite, the writer slot.
		if o, found, err := s.replay(ctx, s.db, key, req.User, request); found || err != nil {
			return o, false, err
		}
	}
	for run := 1; ; run++ {
		o, created, paid, err := s.checkout(ctx, req.User, key, items, request, pay, enqueue)
		if err == nil || paid || !isRetryable(err) || run == attempts {
			return o, created, err
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(run) * int64(5*time.Millisecond))))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Order{}, false, err
		}
	}
}

// checkout runs the checkout transaction once. paid reports that pay was
// called: from then on the checkout is never rerun.
func (s *Store) checkout(ctx context.Context, user, key string, items []Item, request string,
	pay PayFunc, enqueue EnqueueFunc) (o Order, created, paid bool, err error) {
	fail := func(err error) (Order, bool, bool, error) {
		return Order{}, false, paid, fmt.Errorf("store: checkout: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return fail(err)
	}
	defer s.unlock()
	// The connection is taken under ctx; the transaction is not bound to
	// it (database/sql would roll back when ctx ends, even after the
	// payment): the statements before the payment take ctx, and end with
	// it.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	var opts *sql.TxOptions
	if s.pg {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), opts)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()

	now := time.Now()
	id := s.ids.next(now)
	if key != "" {
		if o, found, err := s.replay(ctx, tx, key, user, request); found || err != nil {
			return o, false, false, err
		}
		if _, err := tx.ExecContext(ctx, s.q.keyClaim, key, user, request, id, now.UnixMicro()); err != nil {
			if !isUniqueViolation(err) {
				return fail(err)
			}
			// A checkout with the same key committed meanwhile (on
			// PostgreSQL this INSERT waited for it): its order is the
			// answer.
			// On this connection: another one from the pool could wait
			// forever while every checkout holds one.
			tx.Rollback()
			o, found, err := s.replay(ctx, conn, key, user, request)
			if err == nil && !found {
				err = fmt.Errorf("store: checkout: idempotency key %q taken, then gone", key)
			}
			return o, false, false, err
		}
	}

	o = Order{ID: id, User: user, IdempotencyKey: key, CreatedAt: time.UnixMicro(now.UnixMicro()),
		Items: make([]OrderItem, len(items))}
	for i, it := range items {
		var price int64
		err := tx.QueryRowContext(ctx, s.q.take, it.Qty, it.ProductID, it.Qty).Scan(&price)
		if errors.Is(err, sql.ErrNoRows) {
			var left int64
			switch err := tx.QueryRowContext(ctx, s.q.productStock, it.ProductID).Scan(&left); {
			case errors.Is(err, sql.ErrNoRows):
				return fail(fmt.Errorf("product %d: %w", it.ProductID, ErrNotFound))
			case err != nil:
				return fail(err)
			default:
				return fail(fmt.Errorf("product %d: %d left, want %d: %w", it.ProductID, left, it.Qty, ErrOutOfStock))
			}
		}
		if err != nil {
			return fail(err)
		}
		o.Items[i] = OrderItem{ProductID: it.ProductID, Qty: it.Qty, PriceCents: price}
		o.TotalCents += price * it.Qty
	}

	paid = true
	if o.PaymentRef, err = pay(ctx, tx, o.TotalCents); err != nil {
		return fail(fmt.Errorf("pay: %w", err))
	}
	// Charged: finish even if ctx ends.
	fin, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	after := func(err error) (Order, bool, bool, error) {
		return fail(fmt.Errorf("after payment %q of %d cents (not recorded: refund): %w", o.PaymentRef, o.TotalCents, err))
	}
	if _, err := tx.ExecContext(fin, s.q.orderInsert, o.ID, user, o.TotalCents, o.PaymentRef, key, now.UnixMicro()); err != nil {
		return after(err)
	}
	for _, it := range o.Items {
		if _, err := tx.ExecContext(fin, s.q.itemInsert, o.ID, it.ProductID, it.Qty, it.PriceCents); err != nil {
			return after(err)
		}
	}
	if enqueue != nil {
		if err := enqueue(fin, tx, o.ID); err != nil {
			return after(fmt.Errorf("enqueue: %w", err))
		}
	}
	if err := tx.Commit(); err != nil {
		return after(err)
	}
	return o, true, true, nil
}

// querier is a *sql.DB, *sql.Conn or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// replay looks an idempotency key up. found: the key is used; then the
// order it made, or ErrIdempotencyConflict if it was another user's or for
// other items.
func (s *Store) replay(ctx context.Context, q querier, key, user, request string) (Order, bool, error) {
	var owner, made, orderID string
	err := q.QueryRowContext(ctx, s.q.keyGet, key).Scan(&owner, &made, &orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("store: checkout: idempotency key: %w", err)
	}
	if owner != user || made != request {
		return Order{}, true, fmt.Errorf("store: checkout: key %q: %w", key, ErrIdempotencyConflict)
	}
	o, err := s.order(ctx, q, orderID)
	if err != nil {
		return Order{}, true, fmt.Errorf("store: checkout: key %q: %w", key, err)
	}
	return o, true, nil
}

// Order reads an order; ErrNotFound if there is none with id.
func (s *Store) Order(ctx context.Context, id string) (Order, error) {
	o, err := s.order(ctx, s.db, id)
	if err != nil {
		return Order{}, fmt.Errorf("store: %w", err)
	}
	return o, nil
}

func (s *Store) order(ctx context.Context, q querier, id string) (Order, error) {
	var o Order
	var created int64
	err := q.QueryRowContext(ctx, s.q.orderGet, id).Scan(&o.ID, &o.User, &o.TotalCents, &o.PaymentRef, &o.IdempotencyKey, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, fmt.Errorf("order %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Order{}, fmt.Errorf("order %q: %w", id, err)
	}
	o.CreatedAt = time.UnixMicro(created)
	rows, err := q.QueryContext(ctx, s.q.orderItems, id)
	if err != nil {
		return Order{}, fmt.Errorf("order %q: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var it OrderItem
		if err := rows.Scan(&it.ProductID, &it.Qty, &it.PriceCents); err != nil {
			return Order{}, fmt.Errorf("order %q: %w", id, err)
		}
		o.Items = append(o.Items, it)
	}
	if err := rows.Err(); err != nil {
		return Order{}, fmt.Errorf("order %q: %w", id, err)
	}
	return o, nil
}

// normalize checks a checkout request and returns its items merged by
// product and sorted by id, and their canonical form ("1x3,7x1"), which
// the idempotency key records: two requests with the same canonical form
// buy the same thing.
func normalize(req CheckoutRequest) ([]Item, string, error) {
	if err := checkUser(req.User); err != nil {
		return nil, "", err
	}
	if len(req.IdempotencyKey) > MaxKeyLen {
		return nil, "", fmt.Errorf("%w: idempotency key longer than %d bytes", ErrBadInput, MaxKeyLen)
	}
	if len(req.Items) == 0 || len(req.Items) > MaxItems {
		return nil, "", fmt.Errorf("%w: %d items, want 1 to %d", ErrBadInput, len(req.Items), MaxItems)
	}
	items := slices.Clone(req.Items)
	for _, it := range items {
		if it.ProductID < 1 {
			return nil, "", fmt.Errorf("%w: product id %d", ErrBadInput, it.ProductID)
		}
		if it.Qty < 1 || it.Qty > MaxQty {
			return nil, "", fmt.Errorf("%w: product %d: quantity %d, want 1 to %d", ErrBadInput, it.ProductID, it.Qty, MaxQty)
		}
	}
	slices.SortFunc(items, func(a, b Item) int { return cmp.Compare(a.ProductID, b.ProductID) })
	merged := items[:1]
	for _, it := range items[1:] {
		if last := &merged[len(merged)-1]; last.ProductID == it.ProductID {
			last.Qty += it.Qty
			continue
		}
		merged = append(merged, it)
	}
	var b strings.Builder
	for i, it := range merged {
		if it.Qty > MaxQty {
			return nil, "", fmt.Errorf("%w: product %d: quantity %d in all, want at most %d", ErrBadInput, it.ProductID, it.Qty, MaxQty)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(it.ProductID, 10))
		b.WriteByte('x')
		b.WriteString(strconv.FormatInt(it.Qty, 10))
	}
	return merged, b.String(), nil
}

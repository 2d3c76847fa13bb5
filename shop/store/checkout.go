package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
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
	// ID is unique and sorts by the time its checkout began (see
	// Checkout).
	ID             string
	User           string
	Items          []OrderItem // by product id
	TotalCents     int64
	PaymentRef     string // the charge's id, from Payer.Charge
	IdempotencyKey string
	CreatedAt      time.Time
}

// Payer is the payment gateway as a checkout uses it. Every method is
// idempotent, and may be called again after any error (a retry of the
// checkout, or Reconcile, does).
type Payer interface {
	// Charge charges amountCents for order under key: a call with a key
	// already charged returns the same charge, not charged again. A key
	// whose charge was voided, or that was cancelled, must fail with an
	// error matching ErrChargeVoided, never return the voided charge; a
	// call that did not reach the gateway at all may say so with
	// ErrNotCharged (the checkout then leaves nothing to reconcile).
	Charge(ctx context.Context, key, order string, amountCents int64) (ref string, err error)
	// Void gives the charge ref back.
	Void(ctx context.Context, ref string) error
	// Cancel voids the charge made under key, if one was, and makes sure
	// none will be: for a checkout that does not know whether its charge
	// was made.
	Cancel(ctx context.Context, key string) error
}

// EnqueueFunc queues the order's follow-up work — the SMS — inside the
// order's transaction, typically with fallback.Outbox.Enqueue(ctx, tx, …):
// the message exists exactly when the order does. An error rolls the
// order back and voids its charge.
type EnqueueFunc func(ctx context.Context, tx *sql.Tx, orderID string) error

const (
	// attempts bounds the runs of a transaction that failed with a
	// serialization failure, a deadlock or SQLite busy.
	attempts = 5
	// finishTimeout bounds the writes after a successful charge, which run
	// even if the caller's context has ended: a charged customer gets the
	// order.
	finishTimeout = 10 * time.Second
	// Lease is how long a checkout owns its claim: longer than a checkout
	// takes (the payment guard's three attempts of at most 1 s each with
	// their backoff, then the order's transaction, tens of milliseconds).
	// A retry with the key that finds the claim's lease run out — its
	// checkout crashed, or gave up unsure whether it was charged — takes
	// the claim over and finishes it, charged under the same gateway key.
	// Too short a lease costs a second call to the gateway, answered with
	// the same charge, never a second charge.
	Lease = 10 * time.Second
	// AbandonAfter is how long a claim whose lease ran out waits for a
	// retry before Reconcile cancels its charge: far longer than a client
	// that lost its answer takes to retry (seconds; the sale's clients
	// give up within 4 s), short enough that money taken for nothing
	// comes back within minutes.
	AbandonAfter = time.Minute
	// inProgressWait bounds how long a checkout waits for another one
	// with its key, still within its lease, before ErrInProgress: a
	// checkout takes tens of milliseconds, the duplicate of an impatient
	// client usually gets the order instead of the error.
	inProgressWait = 2 * time.Second
)

// The states of a claim (shop_checkouts.state).
const (
	statePending = "pending" // claimed; the charge may or may not be made
	stateDone    = "done"    // the order is written, on a live charge
	stateFailed  = "failed"  // no order; any charge made was voided
)

// The failures a claim records, replayed to a retry with its key.
const (
	failOutOfStock = "out-of-stock"
	failPrice      = "price-changed"
	failCancelled  = "cancelled"
)

// Checkout buys req.Items for req.User. The charge is the one step the
// database cannot undo, so everything that can refuse the purchase comes
// first, and the charge sits between two short transactions rather than
// inside one:
//
//  1. check the request (ErrBadInput: the user, the quantities merged by
//     product, the per-order limits); nothing is written, nobody charged;
//  2. with an IdempotencyKey, look the key up. Used by another user or
//     for other items: ErrIdempotencyConflict. Used and finished: its
//     order (created false), or its failure again (ErrOutOfStock,
//     ErrPriceChanged, ErrCancelled). Claimed by a checkout still within
//     its lease: wait for it (at most 2 s), else ErrInProgress; a lease
//     run out: take the claim over and go on from 4;
//  3. price the items at the catalogue's prices (ErrNotFound) and look at
//     their stock (ErrOutOfStock if it is already short), then claim: a
//     row that records the user, the items, the amount, the order id and
//     the gateway key — written before anything is charged, under the
//     key's UNIQUE constraint, so that concurrent checkouts with one key
//     make one claim (a checkout without a key gets a claim of its own);
//  4. pay.Charge under the claim's gateway key (scoped to the user and the
//     idempotency key, or to the order without one): an error leaves the
//     claim to a retry with the same key (charged under the same gateway
//     key: the gateway answers with the charge if it was made, never a
//     second one), or to Reconcile, which cancels it after AbandonAfter;
//  5. in one transaction, under a context of its own (10 s) even if ctx
//     ends: finish the claim (only if still ours), take the stock of each
//     product in id order with a conditional UPDATE (ErrOutOfStock if a
//     concurrent checkout took the last units), check the total against
//     the amount charged (ErrPriceChanged), write the order and its items,
//     enqueue(ctx, tx, orderID) if not nil, commit. If the stock or the
//     price refuses it, the charge is voided and the claim failed; if the
//     database fails, the claim is left to a retry or to Reconcile.
//
// So every order stands on exactly one live charge, and a voided charge
// backs no order: a key is charged under one gateway key, for one basket
// and amount, and a voided charge is never replayed (the Payer refuses
// it). No order ever takes more than the stock, on SQLite and PostgreSQL
// (see the package documentation). pay must not be nil.
func (s *Store) Checkout(ctx context.Context, req CheckoutRequest, pay Payer, enqueue EnqueueFunc) (Order, bool, error) {
	items, request, err := normalize(req)
	if err != nil {
		return Order{}, false, fmt.Errorf("store: checkout: %w", err)
	}
	if pay == nil {
		return Order{}, false, fmt.Errorf("store: checkout: %w: no payer", ErrBadInput)
	}
	c, replay, err := s.claim(ctx, req.User, req.IdempotencyKey, items, request)
	if err != nil || replay != nil {
		if replay != nil {
			return *replay, false, nil
		}
		return Order{}, false, err
	}
	ref, err := pay.Charge(ctx, c.payKey, c.orderID, c.amount)
	if err != nil {
		if errors.Is(err, ErrChargeVoided) {
			// Cancelled meanwhile (by Reconcile, the claim having been
			// ours too long): nothing is charged, and nothing will be.
			s.settle(ctx, c, stateFailed, failCancelled)
			return Order{}, false, fmt.Errorf("store: checkout: %w: %w", ErrCancelled, err)
		}
		if errors.Is(err, ErrNotCharged) && c.attempt == 1 {
			// Nobody asked the gateway under this claim: it goes, and the
			// key is free for a retry.
			s.drop(ctx, c)
		} else {
			s.settle(ctx, c, statePending, "")
		}
		return Order{}, false, fmt.Errorf("store: checkout: pay: %w", err)
	}
	o, err := s.finish(ctx, c, ref, items, enqueue)
	var fail string
	switch {
	case err == nil:
		return o, true, nil
	case errors.Is(err, errNotOurs):
		// Taken over (our lease ran out): the claim says what became of
		// the checkout.
		return s.outcome(ctx, c)
	case errors.Is(err, ErrOutOfStock):
		fail = failOutOfStock
	case errors.Is(err, ErrPriceChanged):
		fail = failPrice
	}
	if fail == "" {
		// The database failed after the charge: a retry with the key
		// finishes it (the gateway answers with the same charge), or
		// Reconcile cancels it.
		s.settle(ctx, c, statePending, "")
		return Order{}, false, fmt.Errorf("store: checkout: after payment %q of %d cents (not recorded: retry with the key, or it is cancelled after %v): %w",
			ref, c.amount, AbandonAfter, err)
	}
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if verr := pay.Void(vctx, ref); verr != nil {
		// The claim stays pending: Reconcile cancels the charge.
		s.settle(ctx, c, statePending, "")
		return Order{}, false, fmt.Errorf("%w (and voiding charge %q failed: it is cancelled later: %v)", err, ref, verr)
	}
	s.settle(ctx, c, stateFailed, fail)
	return Order{}, false, err
}

// errNotOurs: the claim is no longer the checkout's (its lease ran out and
// another checkout or Reconcile took it over).
var errNotOurs = errors.New("store: checkout: the claim was taken over")

// checkoutClaim is a claimed checkout, as a row of shop_checkouts holds
// it.
type checkoutClaim struct {
	orderID, key, user, request, payKey string
	amount                              int64
	state, failure                      string
	attempt                             int64 // which owner: each take-over adds one
	leaseUntil                          int64 // unix µs
}

// claim looks the key up and claims the checkout (steps 2 and 3 of
// Checkout). It returns the claim, now ours, or the order the key made.
func (s *Store) claim(ctx context.Context, user, key string, items []Item, request string) (checkoutClaim, *Order, error) {
	waited := time.Duration(0)
	for pause := 10 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		if key != "" {
			c, found, err := s.getClaim(ctx, s.q.claimByKey, key)
			if err != nil {
				return checkoutClaim{}, nil, err
			}
			if found {
				if c.user != user || c.request != request {
					return checkoutClaim{}, nil, fmt.Errorf("store: checkout: key %q: %w", key, ErrIdempotencyConflict)
				}
				now := s.now()
				switch c.state {
				case stateDone:
					o, err := s.order(ctx, s.db, c.orderID)
					if err != nil {
						return checkoutClaim{}, nil, fmt.Errorf("store: checkout: key %q: %w", key, err)
					}
					return checkoutClaim{}, &o, nil
				case stateFailed:
					return checkoutClaim{}, nil, failure(c)
				}
				if c.leaseUntil <= now.UnixMicro() {
					ok, err := s.take(ctx, &c, now)
					if err != nil || ok {
						return c, nil, err
					}
					continue // taken by another: look again
				}
				if waited >= inProgressWait {
					return checkoutClaim{}, nil, fmt.Errorf("store: checkout: key %q: %w", key, ErrInProgress)
				}
				t := time.NewTimer(pause)
				select {
				case <-t.C:
					waited += pause
				case <-ctx.Done():
					t.Stop()
					return checkoutClaim{}, nil, fmt.Errorf("store: checkout: key %q: waiting for the checkout in progress: %w", key, ctx.Err())
				}
				continue
			}
		}
		amount, err := s.price(ctx, items)
		if err != nil {
			return checkoutClaim{}, nil, fmt.Errorf("store: checkout: %w", err)
		}
		now := s.now()
		c := checkoutClaim{orderID: s.ids.next(now), key: key, user: user, request: request, amount: amount,
			state: statePending, attempt: 1, leaseUntil: now.Add(Lease).UnixMicro()}
		c.payKey = gatewayKey(user, key, c.orderID)
		var k any = key
		if key == "" {
			k = nil // NULL: no key, no UNIQUE to meet
		}
		n, err := s.exec(ctx, s.q.claimInsert, c.orderID, k, user, request, amount, c.payKey, statePending, c.attempt, c.leaseUntil, now.UnixMicro())
		if err != nil {
			return checkoutClaim{}, nil, fmt.Errorf("store: checkout: claim: %w", err)
		}
		if n == 1 {
			return c, nil, nil
		}
		// Claimed meanwhile by a checkout with the same key: look again.
	}
}

// price prices items at the catalogue's prices, and refuses a checkout
// whose stock is already short (a look, not a reservation: finish takes
// the stock).
func (s *Store) price(ctx context.Context, items []Item) (int64, error) {
	var total int64
	for _, it := range items {
		p, err := s.Product(ctx, it.ProductID)
		if err != nil {
			return 0, fmt.Errorf("product %d: %w", it.ProductID, err)
		}
		if p.Stock < it.Qty {
			return 0, fmt.Errorf("product %d: %d left, want %d: %w", it.ProductID, p.Stock, it.Qty, ErrOutOfStock)
		}
		total += p.PriceCents * it.Qty
	}
	return total, nil
}

// gatewayKey is the payment gateway's idempotency key of a checkout: a
// digest of the user and the idempotency key (of the user and the order
// without one), so that no two users, and no two keys, can meet in the
// gateway; fixed length, within any gateway's limit.
func gatewayKey(user, key, orderID string) string {
	h := sha256.New()
	part := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	part("checkout")
	part(user)
	if key != "" {
		part("key")
		part(key)
	} else {
		part("order")
		part(orderID)
	}
	return "ck_" + hex.EncodeToString(h.Sum(nil))
}

// getClaim reads a claim by key or by order id.
func (s *Store) getClaim(ctx context.Context, query string, arg string) (checkoutClaim, bool, error) {
	c, err := scanClaim(s.db.QueryRowContext(ctx, query, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return checkoutClaim{}, false, nil
	}
	if err != nil {
		return checkoutClaim{}, false, fmt.Errorf("store: checkout: claim: %w", err)
	}
	return c, true, nil
}

// scanClaim reads a claim's columns (claimColumns).
func scanClaim(row interface{ Scan(...any) error }) (checkoutClaim, error) {
	var c checkoutClaim
	var key sql.NullString
	err := row.Scan(&c.orderID, &key, &c.user, &c.request, &c.amount, &c.payKey, &c.state, &c.failure, &c.attempt, &c.leaseUntil)
	c.key = key.String
	return c, err
}

// take takes a claim whose lease ran out over: it is ours, with a lease
// of its own, unless another took it first (false).
func (s *Store) take(ctx context.Context, c *checkoutClaim, now time.Time) (bool, error) {
	lease := now.Add(Lease).UnixMicro()
	n, err := s.exec(ctx, s.q.claimTake, lease, c.orderID, c.attempt, now.UnixMicro())
	if err != nil {
		return false, fmt.Errorf("store: checkout: take over: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	c.attempt++
	c.leaseUntil = lease
	return true, nil
}

// settle writes what became of a claim still ours: failed (with why), or
// left pending with its lease ended now, for a retry with its key or for
// Reconcile. It runs even if ctx has ended; an error is not returned: the
// lease runs out anyway, and then the claim is a retry's or Reconcile's.
func (s *Store) settle(ctx context.Context, c checkoutClaim, state, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if state == stateFailed {
		s.exec(ctx, s.q.claimFail, why, c.orderID, c.attempt)
		return
	}
	s.exec(ctx, s.q.claimRelease, s.now().UnixMicro(), c.orderID, c.attempt)
}

// drop deletes a claim under which the gateway was never asked (its first
// owner's, still ours), even if ctx has ended; if another took it over
// meanwhile, it stays theirs.
func (s *Store) drop(ctx context.Context, c checkoutClaim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	s.exec(ctx, s.q.claimDrop, c.orderID)
}

// outcome answers a checkout whose claim was taken over: the order, the
// failure, or ErrInProgress.
func (s *Store) outcome(ctx context.Context, mine checkoutClaim) (Order, bool, error) {
	c, found, err := s.getClaim(context.WithoutCancel(ctx), s.q.claimByOrder, mine.orderID)
	switch {
	case err != nil:
		return Order{}, false, err
	case !found:
		return Order{}, false, fmt.Errorf("store: checkout: claim of order %s gone", mine.orderID)
	case c.state == stateDone:
		o, err := s.order(ctx, s.db, c.orderID)
		if err != nil {
			return Order{}, false, fmt.Errorf("store: checkout: %w", err)
		}
		return o, false, nil
	case c.state == stateFailed:
		return Order{}, false, failure(c)
	}
	return Order{}, false, fmt.Errorf("store: checkout: order %s: %w", c.orderID, ErrInProgress)
}

// failure is the error a failed claim answers with.
func failure(c checkoutClaim) error {
	var err error
	switch c.failure {
	case failOutOfStock:
		err = ErrOutOfStock
	case failPrice:
		err = ErrPriceChanged
	default:
		err = ErrCancelled
	}
	return fmt.Errorf("store: checkout: key %q failed earlier, nothing charged: %w", c.key, err)
}

// finish writes the order of a charged claim (step 5 of Checkout), under
// a context of its own; a serialization failure, deadlock or SQLite busy
// error runs it again (the charge is made: only the writes are rerun).
func (s *Store) finish(ctx context.Context, c checkoutClaim, ref string, items []Item, enqueue EnqueueFunc) (Order, error) {
	fin, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	for run := 1; ; run++ {
		o, err := s.finishOnce(fin, c, ref, items, enqueue)
		if err == nil || !isRetryable(err) || run == attempts {
			return o, err
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(run) * int64(5*time.Millisecond))))
		select {
		case <-t.C:
		case <-fin.Done():
			t.Stop()
			return Order{}, err
		}
	}
}

func (s *Store) finishOnce(ctx context.Context, c checkoutClaim, ref string, items []Item, enqueue EnqueueFunc) (o Order, err error) {
	if err := s.lock(ctx); err != nil {
		return Order{}, err
	}
	defer s.unlock()
	var opts *sql.TxOptions
	if s.pg {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return Order{}, err
	}
	defer tx.Rollback()
	// The claim first: on PostgreSQL its row lock orders this against a
	// take-over, and nothing is written if it is no longer ours.
	res, err := tx.ExecContext(ctx, s.q.claimDone, c.orderID, c.attempt)
	if err != nil {
		return Order{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return Order{}, cmp.Or(err, errNotOurs)
	}
	now := s.now()
	o = Order{ID: c.orderID, User: c.user, IdempotencyKey: c.key, PaymentRef: ref,
		CreatedAt: time.UnixMicro(now.UnixMicro()), Items: make([]OrderItem, len(items))}
	for i, it := range items {
		var price int64
		err := tx.QueryRowContext(ctx, s.q.take, it.Qty, it.ProductID, it.Qty).Scan(&price)
		if errors.Is(err, sql.ErrNoRows) {
			var left int64
			switch err := tx.QueryRowContext(ctx, s.q.productStock, it.ProductID).Scan(&left); {
			case errors.Is(err, sql.ErrNoRows):
				return Order{}, fmt.Errorf("store: checkout: product %d: %w", it.ProductID, ErrNotFound)
			case err != nil:
				return Order{}, err
			default:
				return Order{}, fmt.Errorf("store: checkout: product %d: %d left, want %d: %w", it.ProductID, left, it.Qty, ErrOutOfStock)
			}
		}
		if err != nil {
			return Order{}, err
		}
		o.Items[i] = OrderItem{ProductID: it.ProductID, Qty: it.Qty, PriceCents: price}
		o.TotalCents += price * it.Qty
	}
	if o.TotalCents != c.amount {
		return Order{}, fmt.Errorf("store: checkout: %w (%d charged, %d due)", ErrPriceChanged, c.amount, o.TotalCents)
	}
	if _, err := tx.ExecContext(ctx, s.q.orderInsert, o.ID, o.User, o.TotalCents, ref, c.key, now.UnixMicro()); err != nil {
		return Order{}, err
	}
	for _, it := range o.Items {
		if _, err := tx.ExecContext(ctx, s.q.itemInsert, o.ID, it.ProductID, it.Qty, it.PriceCents); err != nil {
			return Order{}, err
		}
	}
	if enqueue != nil {
		if err := enqueue(ctx, tx, o.ID); err != nil {
			return Order{}, fmt.Errorf("enqueue: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return Order{}, err
	}
	return o, nil
}

// exec runs one writing statement (on SQLite in the writer slot) and
// returns the rows it changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.unlock()
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// querier is a *sql.DB, *sql.Conn or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
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
	if err := checkText("idempotency key", req.IdempotencyKey); err != nil {
		return nil, "", err
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

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brownout/brownout/fallback"
	"github.com/brownout/brownout/internal/pgtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The behaviour tests run on both databases: TestSQLite always,
// TestPostgres on a server it starts (internal/pgtest: skipped without
// the PostgreSQL binaries, a failure in CI). Each subtest gets a fresh
// database from newDB.
type newDB func(t *testing.T) (dsn string)

func TestSQLite(t *testing.T) {
	suite(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "shop.db") })
}

func TestPostgres(t *testing.T) {
	dsn := pgtest.Start(t)
	admin, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer admin.Close()
	n := 0
	suite(t, func(t *testing.T) string {
		n++
		name := fmt.Sprintf("shop_%d", n)
		_, err := admin.Exec("CREATE DATABASE " + name)
		require.NoError(t, err)
		u, err := url.Parse(dsn)
		require.NoError(t, err)
		u.Path = "/" + name
		return u.String()
	})
}

func suite(t *testing.T, db newDB) {
	t.Run("Catalogue", func(t *testing.T) { testCatalogue(t, db(t)) })
	t.Run("Reopen", func(t *testing.T) { testReopen(t, db(t)) })
	t.Run("Cart", func(t *testing.T) { testCart(t, db(t)) })
	t.Run("CartLines", func(t *testing.T) { testCartLines(t, db(t)) })
	t.Run("ExpireCarts", func(t *testing.T) { testExpireCarts(t, db(t)) })
	t.Run("LegacyCarts", func(t *testing.T) { testLegacyCarts(t, db(t)) })
	t.Run("LastUnits", func(t *testing.T) { testLastUnits(t, db(t)) })
	t.Run("MultiItem", func(t *testing.T) { testMultiItem(t, db(t)) })
	t.Run("IdempotentRetries", func(t *testing.T) { testIdempotentRetries(t, db(t)) })
	t.Run("IdempotencyConflict", func(t *testing.T) { testConflict(t, db(t)) })
	t.Run("PaymentFailure", func(t *testing.T) { testPaymentFailure(t, db(t)) })
	t.Run("OutOfStock", func(t *testing.T) { testOutOfStock(t, db(t)) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, db(t)) })
	t.Run("CallerGoneAfterPayment", func(t *testing.T) { testCallerGone(t, db(t)) })
	t.Run("CrashBeforeCharge", func(t *testing.T) { testCrashBeforeCharge(t, db(t)) })
	t.Run("CrashAfterCharge", func(t *testing.T) { testCrashAfterCharge(t, db(t)) })
	t.Run("Reconcile", func(t *testing.T) { testReconcile(t, db(t)) })
	t.Run("TakeOverSlow", func(t *testing.T) { testTakeOverSlow(t, db(t)) })
	t.Run("ReconcileRacesSlowCheckout", func(t *testing.T) { testReconcileRacesSlowCheckout(t, db) })
	t.Run("ConcurrentKeys", func(t *testing.T) { testConcurrentKeys(t, db(t)) })
	t.Run("LegacyKeys", func(t *testing.T) { testLegacyKeys(t, db(t)) })
	t.Run("NotCharged", func(t *testing.T) { testNotCharged(t, db(t)) })
}

func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// exec runs a test's own SQL, written with ?.
func exec(t *testing.T, s *Store, query string, args ...any) {
	t.Helper()
	if s.pg {
		query = numbered(query)
	}
	_, err := s.DB().Exec(query, args...)
	require.NoError(t, err)
}

// warm opens n connections and leaves them idle in the pool, so that
// concurrent checkouts start together rather than one connection setup
// apart (PostgreSQL forks a backend for each).
func warm(t *testing.T, s *Store, n int) {
	t.Helper()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := s.DB().Conn(t.Context())
		require.NoError(t, err)
		require.NoError(t, c.PingContext(t.Context()))
		conns[i] = c
	}
	for _, c := range conns {
		c.Close()
	}
}

func outbox(t *testing.T, s *Store) *fallback.Outbox {
	t.Helper()
	o, err := fallback.NewOutbox(t.Context(), s.DB(), fallback.OutboxConfig{Dialect: s.Dialect()})
	require.NoError(t, err)
	return o
}

// sms enqueues the order's SMS in the checkout's transaction.
func sms(o *fallback.Outbox) EnqueueFunc {
	return func(ctx context.Context, tx *sql.Tx, orderID string) error {
		return o.Enqueue(ctx, tx, fallback.Message{Key: "sms-" + orderID, Topic: "sms", Payload: []byte("thanks for " + orderID)})
	}
}

func queued(t *testing.T, o *fallback.Outbox) int {
	t.Helper()
	st, err := o.Stats(t.Context())
	require.NoError(t, err)
	return st.Depth
}

// gateway is a payment gateway in memory, as the store's Payer: charges
// by key, idempotent, a voided charge (or a cancelled key) refused with
// ErrChargeVoided, and hooks to fail or crash a call.
type gateway struct {
	calls atomic.Int64 // Charge calls
	delay time.Duration

	mu      sync.Mutex
	byKey   map[string]*charge
	charges []*charge // made, in order
	// before runs at the start of Charge: an error fails the call, nothing
	// charged. after runs once the charge is made: an error is returned
	// instead of the charge (an answer lost). Either may runtime.Goexit,
	// a checkout crashing there.
	before, after func(key string) error
}

// charge is one charge made, or a cancelled key (made false).
type charge struct {
	ref, key, order string
	amount          int64
	made, voided    bool
}

func (g *gateway) Charge(ctx context.Context, key, order string, amount int64) (string, error) {
	g.calls.Add(1)
	if g.before != nil {
		if err := g.before(key); err != nil {
			return "", err
		}
	}
	if g.delay > 0 {
		time.Sleep(g.delay)
	}
	g.mu.Lock()
	if g.byKey == nil {
		g.byKey = map[string]*charge{}
	}
	c := g.byKey[key]
	switch {
	case c != nil && c.voided:
		g.mu.Unlock()
		return "", fmt.Errorf("gateway: %s: %w", key, ErrChargeVoided)
	case c != nil && (c.order != order || c.amount != amount):
		g.mu.Unlock()
		return "", fmt.Errorf("gateway: key %s reused for order %s, %d cents (made for %s, %d)", key, order, amount, c.order, c.amount)
	case c == nil:
		c = &charge{ref: fmt.Sprintf("ch-%d", len(g.charges)+1), key: key, order: order, amount: amount, made: true}
		g.byKey[key] = c
		g.charges = append(g.charges, c)
	}
	ref := c.ref
	g.mu.Unlock()
	if g.after != nil {
		if err := g.after(key); err != nil {
			return "", err
		}
	}
	return ref, nil
}

func (g *gateway) Void(ctx context.Context, ref string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.charges {
		if c.ref == ref {
			c.voided = true
			return nil
		}
	}
	return fmt.Errorf("gateway: no charge %s", ref)
}

func (g *gateway) Cancel(ctx context.Context, key string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byKey == nil {
		g.byKey = map[string]*charge{}
	}
	c := g.byKey[key]
	if c == nil {
		c = &charge{key: key}
		g.byKey[key] = c
	}
	c.voided = true
	return nil
}

// made counts the charges made; live those not voided.
func (g *gateway) made() (made, live int, liveCents int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.charges {
		if !c.voided {
			live++
			liveCents += c.amount
		}
	}
	return len(g.charges), live, liveCents
}

// books checks the invariant of the money: every order stands on exactly
// one live charge of its own total, made for it; every live charge backs
// exactly one order; a voided charge backs none. Every charge was asked
// for by a claim of the store — under the claim's gateway key, for its
// order and amount — so no refused checkout (a key of another user or
// basket) was charged.
func books(t *testing.T, s *Store, g *gateway) {
	t.Helper()
	ctx := context.Background()
	pays, err := s.Payments(ctx)
	require.NoError(t, err)
	g.mu.Lock()
	defer g.mu.Unlock()
	byRef := map[string]*charge{}
	for _, c := range g.charges {
		byRef[c.ref] = c
	}
	backs := map[string]int{}
	for id, ref := range pays {
		c := byRef[ref]
		if !assert.NotNil(t, c, "order %s: charge %q unknown to the gateway", id, ref) {
			continue
		}
		assert.False(t, c.voided, "order %s stands on voided charge %s", id, ref)
		assert.Equal(t, id, c.order, "order %s stands on the charge made for %s", id, c.order)
		o, err := s.Order(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, o.TotalCents, c.amount, "order %s: total and charge", id)
		backs[ref]++
	}
	for _, c := range g.charges {
		switch {
		case c.voided:
			assert.Zero(t, backs[c.ref], "voided charge %s backs an order", c.ref)
		default:
			assert.Equal(t, 1, backs[c.ref], "live charge %s (order %s) backs %d orders", c.ref, c.order, backs[c.ref])
		}
		cl, found, err := s.getClaim(ctx, s.q.claimByOrder, c.order)
		require.NoError(t, err)
		if assert.True(t, found, "charge %s for order %s: no claim asked for it", c.ref, c.order) {
			assert.Equal(t, cl.payKey, c.key, "charge %s: the claim's gateway key", c.ref)
			assert.Equal(t, cl.amount, c.amount, "charge %s: the claim's amount", c.ref)
		}
	}
}

func stats(t *testing.T, s *Store) Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	require.NoError(t, err)
	require.NoError(t, st.Check())
	return st
}

func stock(t *testing.T, s *Store, id int64) int64 {
	t.Helper()
	p, err := s.Product(t.Context(), id)
	require.NoError(t, err)
	return p.Stock
}

func testCatalogue(t *testing.T, dsn string) {
	s := open(t, dsn)
	ps, err := s.Products(t.Context())
	require.NoError(t, err)
	assert.Equal(t, Catalogue(), ps)
	require.Len(t, ps, CatalogueSize)
	p, err := s.Product(t.Context(), 1)
	require.NoError(t, err)
	assert.Equal(t, Product{ID: 1, Name: "Flash deal: Aurora Phone", PriceCents: 24899, Stock: FlashStock, Flash: true}, p)
	p, err = s.Product(t.Context(), 12)
	require.NoError(t, err)
	assert.Equal(t, Product{ID: 12, Name: "Nimbus Earbuds", PriceCents: 8599, Stock: RegularStock}, p)
	_, err = s.Product(t.Context(), 999)
	assert.ErrorIs(t, err, ErrNotFound)
	st := stats(t, s)
	assert.Zero(t, st.Orders)
	assert.Len(t, st.Products, CatalogueSize)
	assert.Equal(t, ProductStats{Initial: FlashStock, Stock: FlashStock}, st.Products[1])
}

// Opening again creates nothing and seeds nothing: the sales stay.
func testReopen(t *testing.T, dsn string) {
	a := open(t, dsn)
	var g gateway
	_, created, err := a.Checkout(t.Context(), CheckoutRequest{User: "u", Items: []Item{{1, 3}}}, &g, nil)
	require.NoError(t, err)
	require.True(t, created)
	b := open(t, dsn)
	assert.EqualValues(t, 97, stock(t, b, 1))
	st := stats(t, b)
	assert.EqualValues(t, 1, st.Orders)
	assert.Equal(t, ProductStats{Initial: 100, Stock: 97, Sold: 3}, st.Products[1])
	books(t, b, &g)
}

func testCart(t *testing.T, dsn string) {
	s := open(t, dsn)
	ctx := t.Context()
	require.NoError(t, s.AddToCart(ctx, "ann", 7, 2))
	require.NoError(t, s.AddToCart(ctx, "ann", 3, 1))
	require.NoError(t, s.AddToCart(ctx, "ann", 7, 8)) // 10: the most
	require.NoError(t, s.AddToCart(ctx, "bob", 7, 1))
	assert.ErrorIs(t, s.AddToCart(ctx, "ann", 7, 1), ErrBadInput, "an 11th unit in the line")
	cart, err := s.Cart(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, []Item{{3, 1}, {7, 10}}, cart)
	require.NoError(t, s.ClearCart(ctx, "ann"))
	cart, err = s.Cart(ctx, "ann")
	require.NoError(t, err)
	assert.Empty(t, cart)
	cart, err = s.Cart(ctx, "bob")
	require.NoError(t, err)
	assert.Equal(t, []Item{{7, 1}}, cart)
	assert.EqualValues(t, RegularStock, stock(t, s, 7), "a cart reserves nothing")
}

// 50 goroutines × 3 units of a flash deal with 100 units: exactly 33
// orders, 1 unit left, 33 live charges and 33 SMS; the 17 others are
// ErrOutOfStock, and whatever was charged for them is voided.
func testLastUnits(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	var g gateway
	const buyers, qty = 50, 3
	warm(t, s, 32)
	var created, sold atomic.Int64
	errs := make(chan error, buyers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buyers {
		wg.Go(func() {
			<-start
			req := CheckoutRequest{User: fmt.Sprintf("u%d", i), Items: []Item{{1, qty}}, IdempotencyKey: fmt.Sprintf("k%d", i)}
			ord, ok, err := s.Checkout(t.Context(), req, &g, sms(o))
			if err != nil {
				errs <- err
				return
			}
			if ok {
				created.Add(1)
				sold.Add(ord.Items[0].Qty)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.ErrorIs(t, err, ErrOutOfStock)
	}
	assert.EqualValues(t, 33, created.Load())
	assert.EqualValues(t, 99, sold.Load())
	_, live, cents := g.made()
	assert.Equal(t, 33, live, "live charges")
	assert.EqualValues(t, 33*Catalogue()[0].PriceCents*qty, cents)
	assert.EqualValues(t, 1, stock(t, s, 1))
	st := stats(t, s)
	assert.EqualValues(t, 33, st.Orders)
	assert.EqualValues(t, 99, st.Units)
	assert.EqualValues(t, 33*Catalogue()[0].PriceCents*qty, st.RevenueCents)
	assert.Equal(t, ProductStats{Initial: 100, Stock: 1, Sold: 99}, st.Products[1])
	assert.Equal(t, 33, queued(t, o), "one SMS an order")
	books(t, s, &g)
}

// Checkouts of two flash deals listed in opposite orders: no deadlock,
// exactly the stock sold.
func testMultiItem(t *testing.T, dsn string) {
	s := open(t, dsn)
	var g gateway
	const buyers = 60
	warm(t, s, 32)
	var created atomic.Int64
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			items := []Item{{2, 2}, {3, 2}}
			if i%2 == 1 {
				items = []Item{{3, 2}, {2, 2}}
			}
			_, ok, err := s.Checkout(t.Context(), CheckoutRequest{User: fmt.Sprintf("u%d", i), Items: items}, &g, nil)
			if err != nil {
				assert.ErrorIs(t, err, ErrOutOfStock)
				return
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 50, created.Load())
	_, live, _ := g.made()
	assert.Equal(t, 50, live, "live charges")
	st := stats(t, s)
	assert.Equal(t, ProductStats{Initial: 100, Stock: 0, Sold: 100}, st.Products[2])
	assert.Equal(t, ProductStats{Initial: 100, Stock: 0, Sold: 100}, st.Products[3])
	books(t, s, &g)
}

// The same key from 10 goroutines at once, with a slow payment: one
// order, one payment, one SMS; every caller gets that order (the others
// wait for the first).
func testIdempotentRetries(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	g := gateway{delay: 100 * time.Millisecond}
	const retries = 10
	warm(t, s, retries+1)
	cat := Catalogue()
	req := CheckoutRequest{User: "ann", Items: []Item{{4, 2}, {9, 1}}, IdempotencyKey: "ann-cart-1"}
	ids := make([]string, retries)
	var created atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range retries {
		wg.Go(func() {
			<-start
			ord, ok, err := s.Checkout(t.Context(), req, &g, sms(o))
			if !assert.NoError(t, err) {
				return
			}
			ids[i] = ord.ID
			if ok {
				created.Add(1)
			}
			assert.Equal(t, "ch-1", ord.PaymentRef)
			assert.Equal(t, []OrderItem{{4, 2, cat[3].PriceCents}, {9, 1, cat[8].PriceCents}}, ord.Items)
		})
	}
	close(start)
	wg.Wait()
	assert.EqualValues(t, 1, created.Load(), "orders created")
	assert.EqualValues(t, 1, g.calls.Load(), "payments")
	for _, id := range ids {
		assert.Equal(t, ids[0], id)
	}
	// A later retry, items in another order: the same order, no charge.
	ord, ok, err := s.Checkout(t.Context(), CheckoutRequest{User: "ann", Items: []Item{{9, 1}, {4, 1}, {4, 1}}, IdempotencyKey: "ann-cart-1"}, &g, sms(o))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, ids[0], ord.ID)
	assert.Equal(t, "ann-cart-1", ord.IdempotencyKey)
	assert.EqualValues(t, 1, g.calls.Load(), "payments")
	assert.EqualValues(t, FlashStock-2, stock(t, s, 4))
	st := stats(t, s)
	assert.EqualValues(t, 1, st.Orders)
	assert.Equal(t, 1, queued(t, o))
	got, err := s.Order(t.Context(), ids[0])
	require.NoError(t, err)
	assert.Equal(t, ord, got)
	_, err = s.Order(t.Context(), "o-nope")
	assert.ErrorIs(t, err, ErrNotFound)
	books(t, s, &g)
}

// A key used by another user or for another basket is refused before
// anything is charged, whatever became of its first checkout.
func testConflict(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	var g gateway
	ctx := t.Context()
	first, ok, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{1, 1}}, IdempotencyKey: "k"}, &g, sms(o))
	require.NoError(t, err)
	require.True(t, ok)
	for name, req := range map[string]CheckoutRequest{
		"another user":     {User: "bob", Items: []Item{{1, 1}}, IdempotencyKey: "k"},
		"another product":  {User: "ann", Items: []Item{{2, 1}}, IdempotencyKey: "k"},
		"another quantity": {User: "ann", Items: []Item{{1, 2}}, IdempotencyKey: "k"},
		"one more item":    {User: "ann", Items: []Item{{1, 1}, {2, 1}}, IdempotencyKey: "k"},
	} {
		_, ok, err := s.Checkout(ctx, req, &g, sms(o))
		assert.ErrorIs(t, err, ErrIdempotencyConflict, name)
		assert.False(t, ok, name)
	}
	assert.EqualValues(t, 1, g.calls.Load(), "payments")
	assert.EqualValues(t, FlashStock-1, stock(t, s, 1))
	assert.EqualValues(t, FlashStock, stock(t, s, 2))
	assert.EqualValues(t, 1, stats(t, s).Orders)
	assert.Equal(t, 1, queued(t, o))
	again, ok, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{1, 1}}, IdempotencyKey: "k"}, &g, sms(o))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, first, again)

	// A key whose checkout failed after its charge (the stock went
	// meanwhile: the charge voided) answers its failure again, and
	// another basket or user under it is refused: none is charged, and
	// the voided charge never backs an order.
	exec(t, s, `UPDATE shop_products SET stock = 1, initial_stock = 1 WHERE id = ?`, 5)
	g.after = func(string) error {
		exec(t, s, `UPDATE shop_products SET stock = 0, initial_stock = 0 WHERE id = ?`, 5)
		return nil
	}
	_, _, err = s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{5, 1}}, IdempotencyKey: "k5"}, &g, sms(o))
	assert.ErrorIs(t, err, ErrOutOfStock)
	g.after = nil
	calls := g.calls.Load()
	exec(t, s, `UPDATE shop_products SET stock = 1, initial_stock = 1 WHERE id = ?`, 5)
	_, _, err = s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{5, 1}}, IdempotencyKey: "k5"}, &g, sms(o))
	assert.ErrorIs(t, err, ErrOutOfStock, "the failure, replayed")
	_, _, err = s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{6, 1}}, IdempotencyKey: "k5"}, &g, sms(o))
	assert.ErrorIs(t, err, ErrIdempotencyConflict, "another basket")
	_, _, err = s.Checkout(ctx, CheckoutRequest{User: "bob", Items: []Item{{5, 1}}, IdempotencyKey: "k5"}, &g, sms(o))
	assert.ErrorIs(t, err, ErrIdempotencyConflict, "another user")
	assert.Equal(t, calls, g.calls.Load(), "no charge asked for")
	made, live, _ := g.made()
	assert.Equal(t, 2, made)
	assert.Equal(t, 1, live)
	books(t, s, &g)
}

// A declined payment, or a failure after the charge, leaves stock, orders
// and outbox as they were; a retry with the key goes through, charged
// once.
func testPaymentFailure(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	ctx := t.Context()
	req := CheckoutRequest{User: "ann", Items: []Item{{1, 2}, {10, 1}}, IdempotencyKey: "k"}
	declined := errors.New("card declined")
	g := gateway{before: func(string) error { return declined }}
	_, ok, err := s.Checkout(ctx, req, &g, sms(o))
	assert.ErrorIs(t, err, declined)
	assert.False(t, ok)
	check := func(what string) {
		t.Helper()
		assert.EqualValues(t, FlashStock, stock(t, s, 1), what)
		assert.EqualValues(t, RegularStock, stock(t, s, 10), what)
		st := stats(t, s)
		assert.Zero(t, st.Orders, what)
		assert.Zero(t, st.Units, what)
		assert.Zero(t, queued(t, o), what)
	}
	check("declined")
	assert.EqualValues(t, 1, g.calls.Load())
	g.before = nil

	// Charged, the SMS written, then the enqueue fails: all rolled back.
	broken := func(ctx context.Context, tx *sql.Tx, id string) error {
		if err := sms(o)(ctx, tx, id); err != nil {
			return err
		}
		return errors.New("outbox full")
	}
	_, ok, err = s.Checkout(ctx, req, &g, broken)
	assert.ErrorContains(t, err, "outbox full")
	assert.ErrorContains(t, err, `after payment "ch-1"`)
	assert.False(t, ok)
	check("enqueue failed")

	// The retry with the same key goes through on the same charge: one
	// order, one SMS, one charge.
	ord, ok, err := s.Checkout(ctx, req, &g, sms(o))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "ch-1", ord.PaymentRef)
	assert.EqualValues(t, FlashStock-2, stock(t, s, 1))
	assert.Equal(t, 1, queued(t, o))
	assert.EqualValues(t, 1, stats(t, s).Orders)
	made, live, _ := g.made()
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, live)
	books(t, s, &g)
}

func testOutOfStock(t *testing.T, dsn string) {
	s := open(t, dsn)
	var g gateway
	exec(t, s, `UPDATE shop_products SET stock = 2, initial_stock = 2 WHERE id = ?`, 5)
	// The first product is taken, the second is short: both roll back.
	_, ok, err := s.Checkout(t.Context(), CheckoutRequest{User: "ann", Items: []Item{{20, 1}, {5, 3}}}, &g, nil)
	assert.ErrorIs(t, err, ErrOutOfStock)
	assert.ErrorContains(t, err, "product 5: 2 left, want 3")
	assert.False(t, ok)
	assert.Zero(t, g.calls.Load(), "refused before any charge")
	assert.EqualValues(t, RegularStock, stock(t, s, 20))
	_, ok, err = s.Checkout(t.Context(), CheckoutRequest{User: "ann", Items: []Item{{5, 2}}}, &g, nil)
	require.NoError(t, err)
	assert.True(t, ok)
	_, _, err = s.Checkout(t.Context(), CheckoutRequest{User: "ann", Items: []Item{{5, 1}}}, &g, nil)
	assert.ErrorIs(t, err, ErrOutOfStock)
	assert.Equal(t, ProductStats{Initial: 2, Sold: 2}, stats(t, s).Products[5])

	// Sold out between the charge and the order: the charge is voided.
	exec(t, s, `UPDATE shop_products SET stock = 1, initial_stock = 1 WHERE id = ?`, 4)
	g.after = func(string) error {
		exec(t, s, `UPDATE shop_products SET stock = 0, initial_stock = 0 WHERE id = ?`, 4)
		return nil
	}
	_, _, err = s.Checkout(t.Context(), CheckoutRequest{User: "ann", Items: []Item{{4, 1}}}, &g, nil)
	assert.ErrorIs(t, err, ErrOutOfStock)
	assert.ErrorContains(t, err, "product 4: 0 left, want 1")
	made, live, _ := g.made()
	assert.Equal(t, 2, made)
	assert.Equal(t, 1, live, "the second charge voided")
	books(t, s, &g)
}

func testBadInput(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	var g gateway
	ctx := t.Context()
	for name, req := range map[string]CheckoutRequest{
		"quantity 0":           {User: "ann", Items: []Item{{1, 0}}},
		"quantity -1":          {User: "ann", Items: []Item{{1, -1}}},
		"quantity 11":          {User: "ann", Items: []Item{{1, 11}}},
		"11 in two lines":      {User: "ann", Items: []Item{{1, 6}, {1, 5}}},
		"no items":             {User: "ann"},
		"21 items":             {User: "ann", Items: make21()},
		"no user":              {Items: []Item{{1, 1}}},
		"product 0":            {User: "ann", Items: []Item{{0, 1}}},
		"idempotency key long": {User: "ann", Items: []Item{{1, 1}}, IdempotencyKey: strings.Repeat("k", MaxKeyLen+1)},
		"user not UTF-8":       {User: "ann\xff", Items: []Item{{1, 1}}},
		"key not UTF-8":        {User: "ann", Items: []Item{{1, 1}}, IdempotencyKey: "k\xff"},
		"user with NUL":        {User: "ann\x00", Items: []Item{{1, 1}}},
	} {
		_, ok, err := s.Checkout(ctx, req, &g, sms(o))
		assert.ErrorIs(t, err, ErrBadInput, name)
		assert.False(t, ok, name)
	}
	_, _, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{1, 1}}}, nil, nil)
	assert.ErrorIs(t, err, ErrBadInput, "no payer")
	// An unknown product after a known one: not found, nothing kept.
	_, ok, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{1, 1}, {999, 1}}, IdempotencyKey: "k"}, &g, sms(o))
	assert.ErrorIs(t, err, ErrNotFound)
	assert.False(t, ok)
	assert.Zero(t, g.calls.Load())
	assert.EqualValues(t, FlashStock, stock(t, s, 1))
	assert.Zero(t, stats(t, s).Orders)
	assert.Zero(t, queued(t, o))

	assert.ErrorIs(t, s.AddToCart(ctx, "ann", 1, 0), ErrBadInput)
	assert.ErrorIs(t, s.AddToCart(ctx, "ann", 1, 11), ErrBadInput)
	assert.ErrorIs(t, s.AddToCart(ctx, "", 1, 1), ErrBadInput)
	assert.ErrorIs(t, s.AddToCart(ctx, "ann\xff", 1, 1), ErrBadInput)
	assert.ErrorIs(t, s.AddToCart(ctx, "ann", 999, 1), ErrNotFound)
	cart, err := s.Cart(ctx, "ann")
	require.NoError(t, err)
	assert.Empty(t, cart)

	// Refused requests claimed nothing: the key buys the next basket.
	_, ok, err = s.Checkout(ctx, CheckoutRequest{User: "bob", Items: []Item{{2, 1}}, IdempotencyKey: "k"}, &g, sms(o))
	require.NoError(t, err)
	assert.True(t, ok)
	books(t, s, &g)
}

func make21() []Item {
	items := make([]Item, MaxItems+1)
	for i := range items {
		items[i] = Item{int64(i + 1), 1}
	}
	return items
}

// The caller's context ends while the payment succeeds (the client went
// away): the charged customer still gets the order and the SMS.
func testCallerGone(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	g := gateway{after: func(string) error { cancel(); return nil }}
	ord, ok, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{1, 1}}, IdempotencyKey: "k"}, &g, sms(o))
	require.NoError(t, err)
	assert.True(t, ok)
	got, err := s.Order(t.Context(), ord.ID)
	require.NoError(t, err)
	assert.Equal(t, "ch-1", got.PaymentRef)
	assert.Equal(t, 1, queued(t, o))

	// Gone before the payment: nothing happens.
	g.after = nil
	_, _, err = s.Checkout(ctx, CheckoutRequest{User: "bob", Items: []Item{{1, 1}}}, &g, sms(o))
	assert.ErrorIs(t, err, context.Canceled)
	assert.EqualValues(t, 1, g.calls.Load())
	assert.EqualValues(t, FlashStock-1, stock(t, s, 1))
	books(t, s, &g)
}

// A cart holds at most MaxCartLines products, even under concurrent adds
// of one user; a full cart's lines still grow.
func testCartLines(t *testing.T, dsn string) {
	s := open(t, dsn)
	ctx := t.Context()
	warm(t, s, 16)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for p := range 2 * MaxCartLines {
		wg.Go(func() {
			err := s.AddToCart(ctx, "ann", int64(p+1), 1)
			if errors.Is(err, ErrBadInput) {
				refused.Add(1)
				assert.ErrorContains(t, err, "at most 20 products in a cart")
				return
			}
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	cart, err := s.Cart(ctx, "ann")
	require.NoError(t, err)
	assert.Len(t, cart, MaxCartLines)
	assert.EqualValues(t, MaxCartLines, refused.Load())
	require.NoError(t, s.AddToCart(ctx, "ann", cart[0].ProductID, 2), "a line of a full cart grows")
	require.NoError(t, s.AddToCart(ctx, "bob", 1, 1), "another user's cart is another")
}

// Carts live CartTTL after their last add, which renews the whole cart;
// past MaxStoredCartLines lines in all, the carts idle longest go.
func testExpireCarts(t *testing.T, dsn string) {
	s := open(t, dsn)
	clk := newClock(s)
	ctx := t.Context()
	require.NoError(t, s.AddToCart(ctx, "ann", 3, 1))
	require.NoError(t, s.AddToCart(ctx, "bob", 3, 1))
	clk.advance(CartTTL / 2)
	require.NoError(t, s.AddToCart(ctx, "bob", 7, 1)) // renews bob's line of product 3 too
	clk.advance(CartTTL / 2)
	n, err := s.ExpireCarts(ctx, clk.now())
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "ann's cart, idle for CartTTL")
	cart, err := s.Cart(ctx, "ann")
	require.NoError(t, err)
	assert.Empty(t, cart)
	cart, err = s.Cart(ctx, "bob")
	require.NoError(t, err)
	assert.Equal(t, []Item{{3, 1}, {7, 1}}, cart, "renewed whole")

	// A client rotating user ids: more lines than kept, each its own
	// user, all within CartTTL, older than bob's cart (a second before
	// it, a µs apart).
	const extra = 100
	base := clk.now().Add(-CartTTL/2 - time.Second).UnixMicro()
	exec(t, s, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO shop_cart_lines (user_id, product_id, qty, updated_at) SELECT 'u' || i, 1, 1, CAST(? AS BIGINT) + i FROM n`,
		MaxStoredCartLines+extra, base)
	n, err = s.ExpireCarts(ctx, clk.now())
	require.NoError(t, err)
	assert.EqualValues(t, extra+2, n, "the lines idle longest, down to the bound: the extra and two more, as bob's two count too")
	var kept int64
	require.NoError(t, s.DB().QueryRow(`SELECT COUNT(*) FROM shop_cart_lines`).Scan(&kept))
	assert.EqualValues(t, MaxStoredCartLines, kept)
	cart, err = s.Cart(ctx, "bob")
	require.NoError(t, err)
	assert.Len(t, cart, 2, "the newest cart stays")
}

// Carts of a version without their time become lines of time 0: kept
// until the first ExpireCarts.
func testLegacyCarts(t *testing.T, dsn string) {
	s := open(t, dsn)
	exec(t, s, `CREATE TABLE shop_cart (user_id TEXT NOT NULL, product_id BIGINT NOT NULL, qty INTEGER NOT NULL, PRIMARY KEY (user_id, product_id))`)
	exec(t, s, `INSERT INTO shop_cart VALUES ('ann', 3, 2)`)
	b := open(t, dsn)
	cart, err := b.Cart(t.Context(), "ann")
	require.NoError(t, err)
	assert.Equal(t, []Item{{3, 2}}, cart)
	_, err = b.ExpireCarts(t.Context(), time.Now())
	require.NoError(t, err)
	cart, err = b.Cart(t.Context(), "ann")
	require.NoError(t, err)
	assert.Empty(t, cart)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a store's clock in a test: it moves only when told.
type clock struct{ at atomic.Int64 }

func newClock(s ...*Store) *clock {
	c := &clock{}
	c.at.Store(time.Date(2025, 11, 11, 0, 0, 0, 0, time.UTC).UnixNano())
	for _, st := range s {
		st.now = c.now
	}
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *clock) advance(d time.Duration) { c.at.Add(int64(d)) }

// crash runs a checkout that dies inside a gateway hook (runtime.Goexit):
// what a process killed there leaves behind.
func crash(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func die(string) error {
	runtime.Goexit()
	return nil
}

func pending(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.Pending(context.Background())
	require.NoError(t, err)
	return n
}

// A checkout that crashed after claiming its key and before charging:
// a retry with the key waits while the claim's lease runs, then takes it
// over and buys, charged once.
func testCrashBeforeCharge(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	clk := newClock(s)
	req := CheckoutRequest{User: "ann", Items: []Item{{3, 2}}, IdempotencyKey: "k"}
	g := gateway{before: die}
	crash(func() { s.Checkout(t.Context(), req, &g, sms(o)) })
	g.before = nil
	assert.EqualValues(t, 1, pending(t, s))

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err := s.Checkout(ctx, req, &g, sms(o))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the lease still runs: the retry waits")

	clk.advance(Lease)
	ord, created, err := s.Checkout(t.Context(), req, &g, sms(o))
	require.NoError(t, err)
	assert.True(t, created)
	again, created, err := s.Checkout(t.Context(), req, &g, sms(o))
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, ord.ID, again.ID)
	made, live, _ := g.made()
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, live)
	assert.Zero(t, pending(t, s))
	assert.Equal(t, 1, queued(t, o))
	assert.EqualValues(t, FlashStock-2, stock(t, s, 3))
	books(t, s, &g)
}

// A checkout that crashed after its charge was made, before the order: a
// retry with the key, once the lease has run out, finishes it on the same
// charge (the gateway answers with it): one charge, one order.
func testCrashAfterCharge(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	clk := newClock(s)
	req := CheckoutRequest{User: "ann", Items: []Item{{3, 2}}, IdempotencyKey: "k"}
	g := gateway{after: die}
	crash(func() { s.Checkout(t.Context(), req, &g, sms(o)) })
	g.after = nil
	made, live, _ := g.made()
	require.Equal(t, 1, made)
	require.Equal(t, 1, live, "charged, and no order yet")

	clk.advance(Lease)
	ord, created, err := s.Checkout(t.Context(), req, &g, sms(o))
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "ch-1", ord.PaymentRef, "the charge made before the crash")
	made, live, _ = g.made()
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, live)
	assert.EqualValues(t, 2, g.calls.Load())
	assert.Zero(t, pending(t, s))
	books(t, s, &g)
}

// Checkouts abandoned unfinished — crashed before or after the charge,
// with a key or without, and no retry — are settled by Reconcile once
// their lease and AbandonAfter have passed: the charge voided, or the key
// cancelled so that nothing is charged under it; a late retry gets
// ErrCancelled and charges nothing.
func testReconcile(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	clk := newClock(s)
	ctx := t.Context()
	var g gateway
	after := CheckoutRequest{User: "ann", Items: []Item{{3, 1}}, IdempotencyKey: "after"}
	before := CheckoutRequest{User: "bob", Items: []Item{{4, 1}}, IdempotencyKey: "before"}
	keyless := CheckoutRequest{User: "cat", Items: []Item{{5, 1}}}
	g.after = die
	crash(func() { s.Checkout(ctx, after, &g, sms(o)) })
	crash(func() { s.Checkout(ctx, keyless, &g, sms(o)) })
	g.after, g.before = nil, die
	crash(func() { s.Checkout(ctx, before, &g, sms(o)) })
	g.before = nil
	// A checkout that finished, and one in flight within its lease:
	// Reconcile leaves both alone.
	_, _, err := s.Checkout(ctx, CheckoutRequest{User: "dan", Items: []Item{{6, 1}}, IdempotencyKey: "done"}, &g, sms(o))
	require.NoError(t, err)
	require.EqualValues(t, 3, pending(t, s))

	n, err := s.Reconcile(ctx, &g, clk.now().Add(Lease+AbandonAfter-time.Microsecond))
	require.NoError(t, err)
	assert.Zero(t, n, "not abandoned yet")
	clk.advance(Lease + AbandonAfter)
	flight := gatewayKey("eve", "flight", "")
	g.before = func(key string) error { // the gateway never answers this one
		if key == flight {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	go s.Checkout(ctx, CheckoutRequest{User: "eve", Items: []Item{{7, 1}}, IdempotencyKey: "flight"}, &g, sms(o))
	require.Eventually(t, func() bool { return pending(t, s) == 4 }, 5*time.Second, time.Millisecond)
	n, err = s.Reconcile(ctx, &g, clk.now())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.EqualValues(t, 1, pending(t, s), "the one in flight")

	made, live, _ := g.made()
	assert.Equal(t, 3, made, "after, keyless, done")
	assert.Equal(t, 1, live, "done")
	calls := g.calls.Load()
	for _, req := range []CheckoutRequest{after, before} {
		_, _, err := s.Checkout(ctx, req, &g, sms(o))
		assert.ErrorIs(t, err, ErrCancelled, req.IdempotencyKey)
	}
	assert.Equal(t, calls, g.calls.Load(), "a late retry charges nothing")
	_, err = g.Charge(ctx, gatewayKey(before.User, before.IdempotencyKey, ""), "o-any", 1)
	assert.ErrorIs(t, err, ErrChargeVoided, "nothing will be charged under a cancelled key")
	assert.Equal(t, 1, queued(t, o))
	books(t, s, &g)
}

// A checkout slower than its lease is taken over by a retry with its key,
// which finishes it; the slow one then answers with that order. The
// gateway made one charge.
func testTakeOverSlow(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	clk := newClock(s)
	req := CheckoutRequest{User: "ann", Items: []Item{{3, 1}}, IdempotencyKey: "k"}
	var g gateway
	var calls atomic.Int64
	inCharge, release := make(chan struct{}), make(chan struct{})
	g.before = func(string) error {
		if calls.Add(1) == 1 {
			close(inCharge)
			<-release
		}
		return nil
	}
	type result struct {
		o       Order
		created bool
		err     error
	}
	slow := make(chan result, 1)
	go func() {
		o, created, err := s.Checkout(t.Context(), req, &g, sms(o))
		slow <- result{o, created, err}
	}()
	<-inCharge
	clk.advance(Lease)
	ord, created, err := s.Checkout(t.Context(), req, &g, sms(o))
	require.NoError(t, err)
	assert.True(t, created)
	close(release)
	r := <-slow
	require.NoError(t, r.err)
	assert.False(t, r.created, "the order was made by the retry")
	assert.Equal(t, ord.ID, r.o.ID)
	made, live, _ := g.made()
	assert.Equal(t, 1, made)
	assert.Equal(t, 1, live)
	assert.Equal(t, 1, queued(t, o))
	books(t, s, &g)
}

// Reconcile cancels a checkout that was only slow, not dead, while its
// charge is being made: the checkout then finishes nothing — whether its
// charge came back made (now voided) or refused — and answers
// ErrCancelled; no order stands on the voided charge.
func testReconcileRacesSlowCheckout(t *testing.T, db newDB) {
	for _, hook := range []string{"before", "after"} {
		t.Run(hook, func(t *testing.T) {
			s := open(t, db(t))
			clk := newClock(s)
			req := CheckoutRequest{User: "ann", Items: []Item{{3, 1}}, IdempotencyKey: "k"}
			var g gateway
			inCharge, release := make(chan struct{}), make(chan struct{})
			stall := func(string) error {
				close(inCharge)
				<-release
				return nil
			}
			if hook == "before" {
				g.before = stall
			} else {
				g.after = stall
			}
			slow := make(chan error, 1)
			go func() {
				_, _, err := s.Checkout(t.Context(), req, &g, nil)
				slow <- err
			}()
			<-inCharge
			clk.advance(Lease + AbandonAfter)
			n, err := s.Reconcile(t.Context(), &g, clk.now())
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			close(release)
			assert.ErrorIs(t, <-slow, ErrCancelled)
			g.before, g.after = nil, nil
			_, _, err = s.Checkout(t.Context(), req, &g, nil)
			assert.ErrorIs(t, err, ErrCancelled)
			_, live, _ := g.made()
			assert.Zero(t, live)
			assert.Zero(t, stats(t, s).Orders)
			assert.Zero(t, pending(t, s))
			books(t, s, &g)
		})
	}
}

// The money's invariant under concurrency: 80 checkouts at once, two
// users and three baskets sharing five keys (and some without a key), on
// a flash deal of 6 units, with a gateway slow enough for them to meet.
// Every order stands on one live charge of its own, every live charge
// backs one order, no voided charge backs any, each key bought at most
// once, and the checkouts refused for another user's or basket's key were
// never charged (books: every charge was asked for by a claim).
func testConcurrentKeys(t *testing.T, dsn string) {
	s := open(t, dsn)
	o := outbox(t, s)
	exec(t, s, `UPDATE shop_products SET stock = 6, initial_stock = 6 WHERE id = ?`, 1)
	g := gateway{delay: 2 * time.Millisecond}
	warm(t, s, 32)
	users := []string{"ann", "bob"}
	baskets := [][]Item{{{1, 2}}, {{1, 1}, {12, 1}}, {{12, 3}}}
	const checkouts = 80
	var mu sync.Mutex
	outcomes := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range checkouts {
		wg.Go(func() {
			req := CheckoutRequest{User: users[i%2], Items: baskets[(i/2)%3]}
			if i%8 != 7 {
				req.IdempotencyKey = fmt.Sprintf("k%d", (i/6)%5)
			}
			<-start
			_, created, err := s.Checkout(t.Context(), req, &g, sms(o))
			what := "replayed"
			switch {
			case err == nil && created:
				what = "created"
			case err != nil:
				what = "error"
				for _, known := range []error{ErrIdempotencyConflict, ErrOutOfStock, ErrInProgress} {
					if errors.Is(err, known) {
						what = known.Error()
					}
				}
				assert.NotEqual(t, "error", what, "unexpected: %v", err)
			}
			mu.Lock()
			outcomes[what]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d checkouts: %v; gateway: %d calls", checkouts, outcomes, g.calls.Load())
	assert.Positive(t, outcomes[ErrIdempotencyConflict.Error()], "keys met other users and baskets")
	assert.Zero(t, pending(t, s))
	st := stats(t, s)
	assert.EqualValues(t, outcomes["created"], st.Orders)
	pays, err := s.Payments(t.Context())
	require.NoError(t, err)
	keys := map[string]int{}
	for id := range pays {
		ord, err := s.Order(t.Context(), id)
		require.NoError(t, err)
		if ord.IdempotencyKey != "" {
			keys[ord.IdempotencyKey]++
			assert.Equal(t, 1, keys[ord.IdempotencyKey], "key %s bought twice", ord.IdempotencyKey)
		}
	}
	assert.Equal(t, int(st.Orders), queued(t, o))
	books(t, s, &g)
}

// A database written by an older version — its keys in shop_idempotency,
// claimed in the order's own transaction — opens with its keys kept: a
// retry with one gets its order, charged nothing.
func testLegacyKeys(t *testing.T, dsn string) {
	s := open(t, dsn)
	var g gateway
	req := CheckoutRequest{User: "ann", Items: []Item{{3, 1}}, IdempotencyKey: "old"}
	ord, _, err := s.Checkout(t.Context(), req, &g, nil)
	require.NoError(t, err)
	exec(t, s, `CREATE TABLE shop_idempotency (
		idem_key TEXT PRIMARY KEY,
		user_id TEXT NOT NULL,
		request TEXT NOT NULL,
		order_id TEXT NOT NULL REFERENCES shop_orders (id) DEFERRABLE INITIALLY DEFERRED,
		created_at BIGINT NOT NULL)`)
	exec(t, s, `INSERT INTO shop_idempotency SELECT idem_key, user_id, request, order_id, created_at FROM shop_checkouts`)
	exec(t, s, `DELETE FROM shop_checkouts`)

	b := open(t, dsn)
	again, created, err := b.Checkout(t.Context(), req, &g, nil)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, ord, again)
	_, _, err = b.Checkout(t.Context(), CheckoutRequest{User: "bob", Items: []Item{{3, 1}}, IdempotencyKey: "old"}, &g, nil)
	assert.ErrorIs(t, err, ErrIdempotencyConflict)
	assert.EqualValues(t, 1, g.calls.Load())
	var n int
	require.NoError(t, b.DB().QueryRow(`SELECT COUNT(*) FROM shop_checkouts`).Scan(&n))
	assert.Equal(t, 1, n)
}

// A charge the Payer never asked of the gateway (ErrNotCharged: a breaker
// open) leaves no claim: the key is free, and nothing is left to
// reconcile. A claim taken over is kept though — its earlier owner may
// have charged.
func testNotCharged(t *testing.T, dsn string) {
	s := open(t, dsn)
	clk := newClock(s)
	ctx := t.Context()
	open := fmt.Errorf("breaker open: %w", ErrNotCharged)
	g := gateway{before: func(string) error { return open }}
	_, _, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{3, 1}}, IdempotencyKey: "k"}, &g, nil)
	assert.ErrorIs(t, err, ErrNotCharged)
	assert.Zero(t, pending(t, s), "nothing to reconcile")
	g.before = nil
	_, created, err := s.Checkout(ctx, CheckoutRequest{User: "ann", Items: []Item{{4, 1}}, IdempotencyKey: "k"}, &g, nil)
	require.NoError(t, err, "the key is free: another basket under it")
	assert.True(t, created)

	// Charged, then cut: the retry that takes the claim over is refused
	// before the gateway; the claim stays, and the next retry finishes it
	// on the first charge.
	req := CheckoutRequest{User: "bob", Items: []Item{{5, 1}}, IdempotencyKey: "k2"}
	g.after = die
	crash(func() { s.Checkout(ctx, req, &g, nil) })
	g.after = nil
	clk.advance(Lease)
	g.before = func(string) error { return open }
	_, _, err = s.Checkout(ctx, req, &g, nil)
	assert.ErrorIs(t, err, ErrNotCharged)
	assert.EqualValues(t, 1, pending(t, s), "kept: charged before the cut")
	g.before = nil
	ord, created, err := s.Checkout(ctx, req, &g, nil)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "ch-2", ord.PaymentRef)
	books(t, s, &g)
}

package shop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/shop/deps"
)

// TestCheckoutChargesBackTheirOrders is the three ways a checkout
// voided the charge of an order that stands, or took a voided charge,
// played on one shop: a key reused by another user; a basket that fails
// its per-order limit, then the same key with another basket of the same
// total (another user); the same user editing the cart under one key.
// Product 7 costs 5899 cents: 10 + 1 of it (11 in all, over the limit of
// 10) costs what 5 of product 8 and 6 of product 29 cost. Every order
// stands on a live charge and no charge is voided: the refusals come
// before any charge.
func TestCheckoutChargesBackTheirOrders(t *testing.T) {
	s, srv := newShop(t, Brownout)
	const (
		one      = `{"items":[{"product":12,"qty":1}]}`
		overLine = `{"items":[{"product":7,"qty":10},{"product":7,"qty":1}]}`
		sameSum  = `{"items":[{"product":8,"qty":5},{"product":29,"qty":6}]}`
	)
	checkout := func(user, key, body string) (int, CheckoutResponse) {
		t.Helper()
		resp, b := send(t, srv, call{"POST", "/api/checkout", body, map[string]string{UserHeader: user, IdempotencyHeader: key}})
		var o CheckoutResponse
		if resp.StatusCode/100 == 2 {
			require.NoError(t, json.Unmarshal(b, &o))
		}
		return resp.StatusCode, o
	}

	// 1. Another user's key: refused before any charge (the gateway sees
	// no request).
	code, a := checkout("ann", "k1", one)
	require.Equal(t, http.StatusCreated, code)
	before := s.Payment.Stats().Requests
	code, _ = checkout("bob", "k1", one)
	assert.Equal(t, http.StatusUnprocessableEntity, code, "a key already used by another user")
	code, _ = checkout("ann", "k1", sameSum)
	assert.Equal(t, http.StatusUnprocessableEntity, code, "a key already used for another basket")
	assert.Equal(t, before, s.Payment.Stats().Requests, "no charge asked for")
	// 2. Over the per-order limit, then the key with another basket of
	// the same total, by another user.
	code, _ = checkout("cat", "k2", overLine)
	assert.Equal(t, http.StatusBadRequest, code, "11 of one product")
	code, b := checkout("dan", "k2", sameSum)
	assert.Equal(t, http.StatusCreated, code)
	// 3. The same user edits the cart under one key.
	code, _ = checkout("eve", "k3", overLine)
	assert.Equal(t, http.StatusBadRequest, code, "11 of one product")
	code, e := checkout("eve", "k3", sameSum)
	assert.Equal(t, http.StatusCreated, code)

	ps := s.Payment.Stats()
	st, err := s.store.Stats(context.Background())
	require.NoError(t, err)
	t.Logf("gateway: %d charges, %d voided, %d replayed, %d conflicts; %d orders (%s, %s, %s)",
		ps.Charges, ps.Voided, ps.Replayed, ps.Conflicts, st.Orders, a.Order, b.Order, e.Order)
	assert.Zero(t, ps.Voided, "charges voided")
	assert.Equal(t, st.Orders, ps.Charges, "one charge an order")
	assert.EqualValues(t, 3, st.Orders)
	pays, err := s.store.Payments(context.Background())
	require.NoError(t, err)
	assert.NoError(t, CheckCharges(pays, s.Payment.Charges()))
}

// TestCheckoutBooksBalanceConcurrently: checkouts over HTTP at once, on
// SQLite and on PostgreSQL — six users and three baskets sharing keys,
// each request sent twice (a client retrying with its key), a flash deal
// selling out — leave every order on exactly one live charge, every live
// charge behind exactly one order, and no voided charge behind any; each
// key buys at most once.
func TestCheckoutBooksBalanceConcurrently(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			cfg := Config{Protect: Brownout}
			if db == "postgres" {
				cfg.DB = pgtest.Start(t)
			}
			s, srv := newShopWith(t, cfg)
			_, err := s.store.DB().Exec(`UPDATE shop_products SET stock = 8, initial_stock = 8 WHERE id = 2`)
			require.NoError(t, err)
			baskets := []string{`{"items":[{"product":2,"qty":2}]}`, `{"items":[{"product":2,"qty":1},{"product":14,"qty":1}]}`, `{"items":[{"product":14,"qty":3}]}`}
			const clients = 48
			var mu sync.Mutex
			codes := map[int]int{}
			orders := map[string]string{} // key → order
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					key := fmt.Sprintf("k%d", (i/5)%8)
					user := fmt.Sprintf("u%d", i%6) // six users: within their rate limit
					for range 2 {
						code := http.StatusServiceUnavailable
						var o CheckoutResponse
						for try := 0; code == http.StatusServiceUnavailable && try < 50; try++ {
							req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/checkout", strings.NewReader(baskets[(i/2)%3]))
							req.Header.Set("Content-Type", "application/json")
							req.Header.Set(UserHeader, user)
							req.Header.Set(IdempotencyHeader, key)
							resp, err := srv.Client().Do(req)
							if !assert.NoError(t, err) {
								return
							}
							body, _ := io.ReadAll(resp.Body)
							resp.Body.Close()
							if code = resp.StatusCode; code/100 == 2 {
								require.NoError(t, json.Unmarshal(body, &o))
							}
						}
						mu.Lock()
						codes[code]++
						if o.Order != "" {
							if prev, ok := orders[key]; ok {
								assert.Equal(t, prev, o.Order, "key %s: one order", key)
							}
							orders[key] = o.Order
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			require.Eventually(t, func() bool {
				rep, err := s.Report(context.Background(), time.Time{})
				return err == nil && rep.Pending == 0
			}, 10*time.Second, 10*time.Millisecond, "every checkout settled")
			pays, err := s.store.Payments(context.Background())
			require.NoError(t, err)
			ps := s.Payment.Stats()
			t.Logf("%d clients × 2: %v; %d orders; gateway: %d requests, %d charges, %d voided, %d replayed",
				clients, codes, len(pays), ps.Requests, ps.Charges, ps.Voided, ps.Replayed)
			assert.Len(t, pays, len(orders), "one order per key that bought")
			assert.Positive(t, codes[http.StatusUnprocessableEntity], "keys met other users and baskets")
			assert.Zero(t, codes[http.StatusInternalServerError]+codes[http.StatusBadGateway])
			assert.NoError(t, CheckCharges(pays, s.Payment.Charges()))
			st, err := s.store.Stats(context.Background())
			require.NoError(t, err)
			assert.NoError(t, st.Check())
		})
	}
}

// TestCheckoutRefusedByOpenBreakerLeavesNothing: with the payment
// gateway failing, the payment guard's breaker opens; a checkout it
// refuses never reaches the gateway and leaves no claim to reconcile
// (the 503 is a fast honest error, and its key stays free).
func TestCheckoutRefusedByOpenBreakerLeavesNothing(t *testing.T) {
	s, srv := newShop(t, Brownout)
	require.NoError(t, s.Payment.UpdateFault(func(f *deps.Fault) { f.ErrorRate = 1 }))
	checkout := func(key string) int {
		resp, _ := send(t, srv, call{"POST", "/api/checkout", `{"items":[{"product":12,"qty":1}]}`, map[string]string{UserHeader: "u-" + key, IdempotencyHeader: key}})
		return resp.StatusCode
	}
	for i := 0; s.payG.Allows() && i < 50; i++ {
		assert.Contains(t, []int{http.StatusBadGateway, http.StatusServiceUnavailable}, checkout(fmt.Sprintf("fail-%d", i)))
	}
	require.False(t, s.payG.Allows(), "the breaker opened")
	asked := s.Payment.Stats().Requests
	unsettled, err := s.store.Pending(context.Background())
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, checkout("refused"))
	assert.Equal(t, asked, s.Payment.Stats().Requests, "the gateway was not asked")
	now, err := s.store.Pending(context.Background())
	require.NoError(t, err)
	assert.Equal(t, unsettled, now, "no claim left behind")
}

package shop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/pgtest"
	"github.com/brownout/brownout/shop/store"
)

// TestShopOnPostgres runs the shop on PostgreSQL (--db postgres://…):
// concurrent checkouts over HTTP on a flash deal never oversell, retries
// with one Idempotency-Key make one order, and every order's SMS leaves
// the outbox once.
func TestShopOnPostgres(t *testing.T) {
	dsn := pgtest.Start(t)
	s, err := New(context.Background(), Config{Protect: Brownout, DB: dsn})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	const buyers, tries = 40, 4 // 160 checkouts of 1 unit on a stock of 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	status := map[int]int{}
	orders := map[string]string{} // idempotency key → order
	for b := range buyers {
		wg.Go(func() {
			for i := range tries {
				key := fmt.Sprintf("k-%d-%d", b, i)
				for attempt := range 2 { // a retrying client: the same key twice
					var o CheckoutResponse
					code := 0
					// A 503 (the shedder's) is retried with the same key.
					for try := 0; try < 50; try++ {
						req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/checkout", strings.NewReader(`{"items":[{"product":1,"qty":1}]}`))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set(UserHeader, fmt.Sprintf("buyer-%d", b))
						req.Header.Set(IdempotencyHeader, key)
						resp, err := srv.Client().Do(req)
						if !assert.NoError(t, err) {
							return
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						code = resp.StatusCode
						if code != http.StatusServiceUnavailable {
							json.Unmarshal(body, &o)
							break
						}
						time.Sleep(20 * time.Millisecond)
					}
					mu.Lock()
					status[code]++
					if o.Order != "" {
						if prev, ok := orders[key]; ok {
							assert.Equal(t, prev, o.Order, "attempt %d of %s: the same order", attempt, key)
						}
						orders[key] = o.Order
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	st, err := s.store.Stats(context.Background())
	require.NoError(t, err)
	require.NoError(t, st.Check(), "no product sold more than its stock")
	assert.Equal(t, int64(store.FlashStock), st.Products[1].Sold, "the flash deal sold out, exactly")
	assert.Equal(t, store.FlashStock, len(orders), "one order per key that got one")
	assert.Equal(t, store.FlashStock, status[http.StatusCreated])
	assert.Equal(t, store.FlashStock, status[http.StatusOK], "each retry answered with its order")
	assert.Equal(t, buyers*tries-store.FlashStock, status[http.StatusConflict]/2, "the rest: out of stock, twice each")
	require.Eventually(t, func() bool {
		for _, id := range orders {
			if s.SMS.Delivered("sms-"+id) != 1 {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "every order's SMS delivered")
	rep, err := s.Report(context.Background(), time.Time{})
	require.NoError(t, err)
	assert.Zero(t, rep.Lost)
	assert.Zero(t, rep.Twice)
	ps := s.Payment.Stats()
	assert.Equal(t, ps.Charges-ps.Voided, int64(store.FlashStock), "one live charge an order, retries included")
	assert.Zero(t, rep.Unmatched, "nobody charged without an order")
	assert.Zero(t, rep.Pending, "every checkout settled")
	pays, err := s.store.Payments(context.Background())
	require.NoError(t, err)
	assert.NoError(t, CheckCharges(pays, s.Payment.Charges()))
	t.Logf("%d buyers × %d checkouts (each sent twice): %v; %d orders, SMS delivered %d", buyers, tries, status, len(orders), rep.Delivered)
}

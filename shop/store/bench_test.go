package store

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/brownout/brownout/fallback"
)

// BenchmarkCheckoutSQLite: one checkout (the key claimed, a payment in
// memory, the stock taken, the order and its SMS in the outbox) per op,
// on SQLite, from GOMAXPROCS goroutines.
func BenchmarkCheckoutSQLite(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "shop.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	o, err := fallback.NewOutbox(b.Context(), s.DB(), fallback.OutboxConfig{Dialect: s.Dialect()})
	if err != nil {
		b.Fatal(err)
	}
	var pay gateway
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			req := CheckoutRequest{User: fmt.Sprintf("u%d", i%1000), Items: []Item{{int64(FlashDeals + 1 + i%10), 1}},
				IdempotencyKey: fmt.Sprintf("k%d", i)}
			if _, _, err := s.Checkout(b.Context(), req, &pay, sms(o)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

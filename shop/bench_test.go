package shop

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkProtection is the shop's protection stack (signals, shed with
// its routes, the per-client rate limit, the flash deal's per-user and
// per-address limits) on the flash-deal route — no dependency call, so
// both sides do the same work — beside the same route unprotected: the
// overhead is the difference. Work costs 1 ns; each request comes from a
// user and an address of its own (behind the trusted 127.0.0.1), as in a
// sale. A product page adds three flag evaluations (provider's
// BenchmarkBooleanEvaluation: ~90 ns each).
func BenchmarkProtection(b *testing.B) {
	tiny := Costs{Page: 1, Recommendations: 1, Reviews: 1, Gallery: 1, Cart: 1, Checkout: 1, Deal: 1, Beacon: 1}
	for _, p := range []Protect{None, Brownout} {
		b.Run(string(p), func(b *testing.B) {
			s, err := New(context.Background(), Config{Protect: p, StateDir: b.TempDir(), Costs: tiny, Workers: 64})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			h := s.Handler()
			req := httptest.NewRequest(http.MethodGet, "/api/deals/flash", nil)
			req.RemoteAddr = "127.0.0.1:1234"
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				req.Header.Set(UserHeader, "u"+strconv.Itoa(i))
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

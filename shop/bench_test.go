package shop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/brownout/brownout/fallback"
)

// BenchmarkProtection is the shop's protection stack — signals, shed with
// its routes and per-client rate limit, a product page's flag evaluation
// (one SDK evaluation of the features flag for its three sections) and
// its recommendations through the stale cache and the guard — around a
// handler that does nothing else, beside the same handler unprotected:
// the overhead is the difference (none is the anchor). The store and the
// worker pool are left out on both sides: they are the page's own work,
// the same with or without protection, and a database read's noise is
// larger than what is measured. Each request comes from a user and an
// address (behind the trusted 127.0.0.1): users=1048576 each request a
// new user, the rate limiter's dearest case; users=50000 the same 50 000
// users returning every 50 000 requests (a few pages a second each, under
// their limit), as in a sale.
func BenchmarkProtection(b *testing.B) {
	for _, p := range []Protect{None, Brownout} {
		for _, users := range []int{1 << 20, 50000} {
			b.Run(string(p)+"/users="+strconv.Itoa(users), func(b *testing.B) {
				s, err := New(context.Background(), Config{Protect: p, StateDir: b.TempDir(), TrustedProxies: LocalProxies()})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				e := echo.New()
				e.GET("/api/products/:id", func(c echo.Context) error {
					ctx := c.Request().Context()
					on := s.sectionsOn(ctx, c.Request().Header.Get(UserHeader))
					if on[0] && s.cache != nil {
						// A fresh cache hit, as for all but one page in ten
						// seconds per product; a miss goes through the guard.
						s.cache.Get(ctx, "7", func(ctx context.Context) ([]string, error) {
							return fallback.Call(ctx, s.recsG, func(context.Context) ([]string, error) { return []string{"1"}, nil })
						})
					}
					return c.NoContent(http.StatusOK)
				})
				h := s.guard(e)
				reqs := make([]*http.Request, 1024)
				for i := range reqs {
					reqs[i] = httptest.NewRequest(http.MethodGet, "/api/products/7", nil)
					reqs[i].RemoteAddr = "127.0.0.1:1234"
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					u := i % users
					req := reqs[i&1023]
					req.Header.Set(UserHeader, "u"+strconv.Itoa(u))
					req.Header.Set("X-Forwarded-For", "10."+strconv.Itoa(u>>16&255)+"."+strconv.Itoa(u>>8&255)+"."+strconv.Itoa(u&255))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d: %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}

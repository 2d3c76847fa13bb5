package sale

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/shop"
	"github.com/brownout/brownout/shop/store"
)

// targetShop is a shop on 127.0.0.1 over the state directory dir, trusting
// the generator as its proxy, as `shop-demo serve --state dir
// --trusted-proxies 127.0.0.1` runs it; stop closes its server and it.
func targetShop(t *testing.T, dir string) (url string, s *shop.Shop, stop func()) {
	t.Helper()
	s, err := shop.New(context.Background(), shop.Config{Protect: shop.Brownout, StateDir: dir, TrustedProxies: shop.LocalProxies()})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler()}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), s, func() {
		srv.Close()
		s.Close()
	}
}

// okCheckouts counts a load's logical checkouts answered 2xx.
func okCheckouts(rep *load.Report) (ok int) {
	for _, p := range rep.Phases {
		for _, name := range checkoutKinds {
			ok += p.Kinds[name].OK
		}
	}
	return ok
}

// TestSaleRerunPlacesOrders runs the sale's traffic twice, with the same
// seed, at a shop that keeps its database between the runs (restarted on
// its state directory, as `shop-demo serve` on its default one is). The
// second run's checkouts must place orders of their own: a run that sent
// the first one's Idempotency-Keys again was answered with the first
// run's orders, placing none ("orders 0 (and 80 retries answered with
// their order)", SMS 0 delivered).
func TestSaleRerunPlacesOrders(t *testing.T) {
	dir := t.TempDir()
	// One phase, light: checkouts are 5 % of the mix.
	phases := []load.Phase{{Name: "light", Rate: 60, Duration: 2 * time.Second}}
	var orders, replays [2]int64
	for run := range 2 {
		url, s, stop := targetShop(t, dir)
		lc := Load(url, phases, 1)
		lc.Skip = time.Nanosecond // count every request
		rep, err := load.Run(context.Background(), lc)
		require.NoError(t, err)
		sr, err := s.Report(context.Background(), time.Time{})
		stop()
		require.NoError(t, err)
		orders[run], replays[run] = sr.Orders, sr.Replays
		t.Logf("run %d: %d checkouts answered, the shop: %d orders, %d replays", run+1, okCheckouts(rep), sr.Orders, sr.Replays)
		require.Positive(t, okCheckouts(rep), "run %d: no checkout answered", run+1)
	}
	assert.Positive(t, orders[0], "the first run places orders")
	assert.Positive(t, orders[1], "the second run places orders of its own")
	assert.Less(t, replays[1], orders[1], "the second run's checkouts are not answered with the first run's orders")
}

// TestSaleReportCountsItsRun runs the sale at a shop that had placed
// orders before it, and answered a retry with its order: the report's
// orders and replays are the run's, not the shop's since it started
// ("orders 80 (and 80 retries …)" for a second run that placed none), and
// every order counted has its SMS counted (delivered or lost).
func TestSaleReportCountsItsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("an 8 s real-HTTP run")
	}
	url, s, stop := targetShop(t, t.TempDir())
	defer stop()
	const before = 5
	for i := range before {
		for range 2 { // the second is answered with the first's order
			req, err := http.NewRequest(http.MethodPost, url+"/api/checkout",
				strings.NewReader(fmt.Sprintf(`{"items":[{"product":%d,"qty":1}]}`, store.FlashDeals+1+i)))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(shop.UserHeader, fmt.Sprintf("before-%d", i))
			req.Header.Set(shop.IdempotencyHeader, fmt.Sprintf("before-%d", i))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Less(t, resp.StatusCode, 300, "checkout %d", i)
		}
	}
	res, err := Run(context.Background(), Config{Target: url, Duration: 8 * time.Second, Scale: 0.2, Settle: time.Millisecond})
	require.NoError(t, err)
	all, err := s.Report(context.Background(), time.Time{})
	require.NoError(t, err)
	r := res.Shop
	t.Logf("the run: %d orders, %d replays, SMS %d delivered, %d lost; the shop since it started: %d orders, %d replays",
		r.Orders, r.Replays, r.Delivered, r.Lost, all.Orders, all.Replays)
	assert.Positive(t, r.Orders, "the run placed orders")
	assert.LessOrEqual(t, r.Orders, all.Orders-before, "the orders placed before the run are not the run's")
	assert.LessOrEqual(t, r.Replays, all.Replays-before, "the replays answered before the run are not the run's")
	assert.True(t, r.Known)
	assert.GreaterOrEqual(t, r.Delivered+r.Lost, r.Orders, "every order of the run has its SMS counted")
}

package sale

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/shop"
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

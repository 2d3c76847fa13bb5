package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/brownout/brownout/shop/deps"
	"github.com/brownout/brownout/shop/store"
)

// depsShutdown bounds the wait for requests in flight when the
// dependencies stop: an SMS accepted is delivered (200 ms, 30 s when
// slow), a charge made (30 ms); past it they are abandoned.
const depsShutdown = 5 * time.Second

func runDeps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deps", flag.ContinueOnError)
	payment := fs.String("payment", "127.0.0.1:0", "the payment gateway's address (:0 picks a free port)")
	sms := fs.String("sms", "127.0.0.1:0", "the SMS provider's address")
	recs := fs.String("recs", "127.0.0.1:0", "the recommendation engine's address")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: shop-demo deps [flags]

Runs the shop's simulated dependencies on their own — the payment gateway,
the SMS provider and the recommendation engine, each on its own listener
with its fault knobs at /admin/fault and its counters at /admin/stats
(the gateway lists its charges at /admin/charges, the SMS provider its
deliveries at /admin/deliveries) — so that they outlive a shop: a shop
killed and restarted, or several. The first line printed is the flags
that point a shop at them:

  shop-demo: dependencies: --payment URL --sms URL --recs URL

They keep every idempotency key they saw, by design. The admin endpoints
have no authentication: keep them on loopback (the default); they serve
clients on this machine only (a browser's page of another site, or of a
name re-pointed at 127.0.0.1, gets 403), and writes must be
Content-Type: application/json.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	ids := make([]string, store.CatalogueSize)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	pay := deps.NewPaymentGateway(deps.Options{})
	provider := deps.NewSMSProvider(deps.Options{})
	engine := deps.NewRecsEngine(deps.Options{}, ids)
	var servers []*deps.Server
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), depsShutdown)
		defer cancel()
		for _, srv := range servers {
			srv.Shutdown(sctx)
		}
	}()
	for _, d := range []struct {
		name, addr string
		start      func(string) (*deps.Server, error)
	}{{"payment", *payment, pay.Start}, {"sms", *sms, provider.Start}, {"recs", *recs, engine.Start}} {
		srv, err := d.start(d.addr)
		if err != nil {
			return fmt.Errorf("deps: --%s %s: %w", d.name, d.addr, err)
		}
		servers = append(servers, srv)
	}
	fmt.Fprintf(stdout, "shop-demo: dependencies: --payment %s --sms %s --recs %s\n", servers[0].URL, servers[1].URL, servers[2].URL)
	<-ctx.Done()
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/shop"
	"github.com/brownout/brownout/shop/sale"
)

func runSale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sale", flag.ContinueOnError)
	target := fs.String("target", "", "a running shop's URL (default: start a fresh shop of our own for each run)")
	protect := fs.String("protect", "brownout", "protection of our own shop: none, shed, brownout (without --compare)")
	compare := fs.Bool("compare", false, "run the same traffic against none, shed and brownout (a fresh shop each) and print them side by side")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	quiet := fs.Bool("quiet", false, "no progress line a second")
	scale := fs.Float64("scale", 1, "multiply every rate")
	duration := fs.Duration("duration", 80*time.Second, "the whole timeline (warm-up 3/16, midnight 6/16, capacity dip 3/16, recovery 4/16)")
	seed := fs.Uint64("seed", 1, "seed of the users and the mix")
	workers := fs.Int("workers", 4, "our own shop's hidden worker pool")
	settle := fs.Duration("settle", 0, "wait after the traffic for the outbox before counting lost SMS (default: until 60 s after the SMS provider recovered)")
	dialAddr := fs.String("dial", "", "serve the operator dial at this address (host:port), following the brownout run of our own shops; its URL is printed first")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: shop-demo sale [flags]

Sends the 11.11 timeline to a shop, open loop: warm-up at 50 % of its
nominal capacity (every section on), the midnight spike at 200 % with the
SMS provider slowing to 30 s, a capacity dip (work takes twice as long),
recovery at 50 %. Browsing, cart and checkout users (each a stable
X-User-ID and address), impatient checkout clients that retry naively or
with backoff and a budget, a bot rotating user ids from one address on the
flash deal, analytics beacons. Prints one line a second and a report per
phase; each phase is measured apart.

Each simulated user comes from its own address, sent as X-Forwarded-For:
a shop given with --target must trust this generator as its proxy
(shop-demo serve --trusted-proxies 127.0.0.1), or every user shares the
generator's address and its per-address limits.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *target != "" && *compare {
		return usagef("sale: --compare starts its own shops; it cannot use --target")
	}
	runs := []string{*protect}
	if *compare {
		// The brownout run first, so that the dial is live as soon as it
		// is opened; the table shows them weakest first.
		runs = []string{"brownout", "shed", "none"}
	}
	var front *dialFront
	if *dialAddr != "" {
		if *target != "" {
			return usagef("sale: --dial follows our own shops; with --target open the target's /dial/")
		}
		var err error
		if front, err = startDialFront(*dialAddr); err != nil {
			return err
		}
		defer front.close()
		fmt.Fprintf(stderr, "dial: %s — the brownout run, live; open it now\n", front.url)
	}
	var results []*sale.Result
	for _, name := range runs {
		p, err := shop.ParseProtect(name)
		if err != nil {
			return usageError{err.Error()}
		}
		cfg := sale.Config{Target: *target, Scale: *scale, Duration: *duration, Seed: *seed, Settle: *settle}
		if !*quiet {
			cfg.Progress = stderr
		}
		front.running(name)
		sc := shop.Config{Protect: p, Workers: *workers}
		res, err := saleOnce(ctx, cfg, sc, stderr, front)
		if err != nil {
			return err
		}
		results = append(results, res)
		fmt.Fprintf(stderr, "== protection %s done: %s\n", p, midnight(res))
		if !*asJSON && !*compare {
			if err := sale.Write(stdout, res); err != nil {
				return err
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	if *compare {
		slices.Reverse(results) // none, shed, brownout
		return sale.WriteComparison(stdout, results)
	}
	return nil
}

// midnight is one line on a run's midnight spike, for the progress.
func midnight(r *sale.Result) string {
	for _, p := range r.Load.Phases {
		if p.Name == sale.PhaseMidnight {
			return fmt.Sprintf("at midnight (2× capacity) %.0f good answers/s, %.1f %% of critical requests in time, p99 %s",
				p.Goodput, 100*p.CriticalOK, p.P99.Round(time.Millisecond))
		}
	}
	return "no midnight phase"
}

// saleOnce runs the sale against cfg.Target, or against a fresh shop of
// its own (a temporary state directory, 127.0.0.1:0).
func saleOnce(ctx context.Context, cfg sale.Config, sc shop.Config, stderr io.Writer, front *dialFront) (*sale.Result, error) {
	if cfg.Target != "" {
		return sale.Run(ctx, cfg)
	}
	dir, err := os.MkdirTemp("", "shop-demo-sale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The generator plays the load balancer, each simulated user behind
	// its own X-Forwarded-For: our shop trusts it, as a shop behind a
	// real one would.
	sc.StateDir, sc.TrustedProxies = dir, shop.LocalProxies()
	s, err := shop.New(ctx, sc)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// The generator is the shop's only client, with as many connections
	// as the load needs: no cap per client.
	ln, err := server.ListenWith("127.0.0.1:0", server.Limits{PerClient: -1})
	if err != nil {
		return nil, err
	}
	srv := server.New(s.Handler())
	go srv.Serve(ln)
	defer srv.Close()
	cfg.Target = "http://" + ln.Addr().String()
	fmt.Fprintf(stderr, "== protection %s: shop at %s; %s\n", sc.Protect, cfg.Target, s.Capacity())
	if sc.Protect == shop.Brownout {
		front.follow(cfg.Target)
		defer front.follow("")
	}
	return sale.Run(ctx, cfg)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/brownout/brownout/shop"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to listen on (:0 or 127.0.0.1:0 picks a free port; the bound address is printed)")
	state := fs.String("state", "", "state directory for the SQLite database (default: brownout/shop under the user cache dir)")
	db := fs.String("db", "", "database: postgres://… for PostgreSQL, or an SQLite file path (default: shop.db in --state)")
	protect := fs.String("protect", "brownout", "protection: none (the baseline), shed (shedding only), brownout")
	workers := fs.Int("workers", 4, "the hidden worker pool (never told to the shedder)")
	verbose := fs.Bool("v", false, "log the controller's changes")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: shop-demo serve [flags]\n\nRuns the 11.11 shop on embedded defaults: the JSON API, the storefront at /,\n/metrics and /healthz, with its simulated payment gateway, SMS provider and\nrecommendation engine on their own 127.0.0.1 ports.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	p, err := shop.ParseProtect(*protect)
	if err != nil {
		return usageError{err.Error()}
	}
	cfg := shop.Config{Protect: p, Workers: *workers, StateDir: *state, DB: *db}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	s, err := shop.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	fmt.Fprintf(stdout, "shop-demo: serving http://%s/ (protection %s)\n", ln.Addr(), p)
	fmt.Fprintf(stdout, "nominal capacity: %s\n", s.Capacity())
	c := s.Config()
	fmt.Fprintf(stdout, "dependencies: payment %s, sms %s, recommendations %s\n", c.Payment, c.SMS, c.Recs)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

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
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/internal/replica"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/shop"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to listen on (:0 or 127.0.0.1:0 picks a free port; the bound address is printed)")
	state := fs.String("state", "", "state directory for the SQLite database, private to this user (default $STATE_DIRECTORY under systemd, else $XDG_STATE_HOME/brownout/shop, else ~/.local/state/brownout/shop)")
	db := fs.String("db", "", "database: postgres://… for PostgreSQL, or an SQLite file path (default: shop.db in --state)")
	protect := fs.String("protect", "brownout", "protection: none (the baseline), shed (shedding only), brownout")
	workers := fs.Int("workers", 4, "the hidden worker pool (never told to the shedder)")
	payment := fs.String("payment", "", "the payment gateway's base URL, http(s)://HOST:PORT[/PATH] (default: the shop starts its own simulated one)")
	sms := fs.String("sms", "", "the SMS provider's base URL, http(s)://HOST:PORT[/PATH] (default: the shop starts its own simulated one)")
	recs := fs.String("recs", "", "the recommendation engine's base URL, http(s)://HOST:PORT[/PATH] (default: the shop starts its own simulated one)")
	verbose := fs.Bool("v", false, "log every change of the controller's levels (the same as --log-level debug)")
	logf := cli.LogFlags(fs)
	brownoutd := fs.String("brownoutd", "", "fleet mode: follow the levels of the brownoutd at this base URL (http://HOST:PORT) instead of an embedded controller, and push this shop's signals to it; or its replicas' URLs separated by commas (brownoutd in HA): the levels from one at a time, another when it fails or lags, the signals to each; the storefront's script evaluates there from the visitors' browsers, so the daemon must allow this shop's origin (brownoutd serve --cors-origin http://HOST:PORT)")
	noPush := fs.Bool("brownoutd-no-push", false, "fleet mode: do not push the signals; the daemon reads this shop's /metrics (scrape or promql source)")
	brownoutdToken := fs.String("brownoutd-token", "", "token sent to --brownoutd (env BROWNOUTD_TOKEN)")
	svc := fs.String("service", "", "fleet mode: this shop's service on a brownoutd of several (its services:): the levels, the pushes and the storefront's evaluations are that service's (/services/NAME/…)")
	redisURL := fs.String("redis", "", "keep the per-client rate limits in this Redis (redis://HOST:PORT[/DB]), shared by every instance")
	perClient := fs.Int("max-conns-per-client", server.DefaultPerClient, fmt.Sprintf("connections one client address may hold open, every loopback address one client (a quarter of the %d the server holds); 0 for no cap, e.g. behind a load balancer that holds more", server.MaxConns))
	proxies := fs.String("trusted-proxies", "", "comma-separated addresses or CIDR prefixes of the load balancers in front, whose X-Forwarded-For names the client (default none: every client is its connection's address; the sale's generator on this machine needs 127.0.0.1)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: shop-demo serve [flags]

Runs the 11.11 shop on embedded defaults: the JSON API, the storefront at /,
/metrics and /healthz, the embedded controller's OFREP (/ofrep/v1/…) and
operator API (/v1/state, /v1/history, /v1/events, overrides, freeze,
shadow; writes without a token on a loopback listener only) with the
operator dial at /dial/, and its simulated payment gateway, SMS provider and
recommendation engine on their own 127.0.0.1 ports. --payment, --sms and
--recs use dependencies running elsewhere instead (e.g. ones that must
outlive the shop: shop-demo deps runs them); the shop calls their API paths (/v1/charges,
/v1/messages, /v1/recommendations) under the URL given, and the sale's
fault knobs are their /admin/fault. The sale report's SMS delivery counts
are only known with the shop's own SMS provider.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	p, err := shop.ParseProtect(*protect)
	if err != nil {
		return usageError{err.Error()}
	}
	// The embedded controller's operator API (/v1/…) takes writes without
	// a token only on a loopback listener.
	cfg := shop.Config{Protect: p, Workers: *workers, StateDir: *state, DB: *db, Loopback: loopback(*listen), Redis: *redisURL}
	if cfg.TrustedProxies, err = shed.ParseProxies(*proxies); err != nil {
		return usagef("serve: --trusted-proxies %q: %v", *proxies, err)
	}
	if *brownoutd != "" {
		if cfg.Brownoutd, err = replica.Parse(*brownoutd); err != nil {
			return usagef("serve: --brownoutd %q: %v", *brownoutd, err)
		}
		if p != shop.Brownout {
			return usageError{"--brownoutd needs --protect brownout"}
		}
		cfg.BrownoutdToken, cfg.NoPush = *brownoutdToken, *noPush
		if *svc != "" {
			if err := service.Check(*svc); err != nil {
				return usagef("serve: --service: %v", err)
			}
			cfg.Service = *svc
		}
		if cfg.BrownoutdToken == "" {
			cfg.BrownoutdToken = os.Getenv("BROWNOUTD_TOKEN")
		}
	}
	if *svc != "" && *brownoutd == "" {
		return usageError{"--service needs --brownoutd: it names a service of the daemon's"}
	}
	for _, d := range []struct {
		flag string
		in   *string
		out  *string
	}{{"payment", payment, &cfg.Payment}, {"sms", sms, &cfg.SMS}, {"recs", recs, &cfg.Recs}} {
		if *d.out, err = baseURL(d.flag, *d.in); err != nil {
			return err
		}
	}
	// Warnings and errors always reach the log (a 401 from the daemon,
	// a dependency down); the controller's changes at info.
	if cfg.Logger, err = logf.Logger(stderr); err != nil {
		return usageError{err.Error()}
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := shop.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if *perClient < 0 {
		return usagef("serve: --max-conns-per-client %d: want a number of connections, or 0 for no cap", *perClient)
	}
	limits := server.Limits{PerClient: *perClient}
	if *perClient == 0 {
		limits.PerClient = -1
	}
	ln, err := server.ListenWith(*listen, limits)
	if err != nil {
		return err
	}
	if err := s.Register(ln.Collector()); err != nil {
		ln.Close()
		return err
	}
	srv := server.New(s.Handler())
	fmt.Fprintf(stdout, "shop-demo: serving http://%s/ (protection %s)\n", ln.Addr(), p)
	if s.Controller() != nil { // embedded mode: the API and the dial
		fmt.Fprintf(stdout, "the dial at http://%s/dial/\n", ln.Addr())
	}
	switch len(cfg.Brownoutd) {
	case 0:
	case 1:
		dial := cfg.Brownoutd[0] + "/dial/"
		if cfg.Service != "" {
			dial = cfg.Brownoutd[0] + service.Base(cfg.Service) + "/"
		}
		fmt.Fprintf(stdout, "levels from brownoutd at %s (fleet mode%s): the dial at %s, this shop's links to it at http://%s/v1/state\n",
			cfg.Brownoutd[0], ofService(cfg.Service), dial, ln.Addr())
	default:
		dial := "/dial/"
		if cfg.Service != "" {
			dial = service.Base(cfg.Service) + "/"
		}
		fmt.Fprintf(stdout, "levels from brownoutd's replicas at %s (fleet mode%s): the dial at any replica's %s, this shop's links to them at http://%s/v1/state\n",
			strings.Join(cfg.Brownoutd, ", "), ofService(cfg.Service), dial, ln.Addr())
	}
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

// ofService says which service the shop follows, for the start's line.
func ofService(name string) string {
	if name == "" {
		return ""
	}
	return ", service " + name
}

// loopback reports whether addr listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// baseURL checks a dependency's --flag: empty (the shop starts its own),
// or an absolute http or https URL with a host and no query, fragment or
// credentials (the shop prints it and shows it at /api/demo/deps). A
// trailing slash is dropped: the clients append their paths to it.
func baseURL(flag, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	bad := func(why string) error {
		return usagef("serve: --%s %q: %s (want an absolute URL such as http://127.0.0.1:9090)", flag, raw, why)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("the scheme must be http or https")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return "", bad("no host")
	case u.User != nil:
		return "", bad("credentials in the URL are not supported")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", bad("no query or fragment: the shop appends its API paths")
	}
	if port := u.Port(); port == "" && strings.HasSuffix(u.Host, ":") {
		return "", bad("empty port")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

package shop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/open-feature/go-sdk/openfeature"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/fallback"
	"github.com/brownout/brownout/internal/pool"
	"github.com/brownout/brownout/internal/statedir"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/shed/redisstore"
	"github.com/brownout/brownout/shop/deps"
	"github.com/brownout/brownout/shop/store"
	"github.com/brownout/brownout/signals"
)

// Shop is the 11.11 shop: a JSON API and a storefront page over a store,
// three dependencies and a bounded worker pool, behind the protection its
// Config selects.
type Shop struct {
	cfg   Config
	store *store.Store
	pool  *pool.Pool

	// The dependencies: simulated ones the shop started (nil when their
	// URLs were given), and the clients.
	Payment *deps.PaymentGateway
	SMS     *deps.SMSProvider
	Recs    *deps.RecsEngine
	servers []*deps.Server
	pay     deps.PaymentClient
	sms     deps.SMSClient
	recs    deps.RecsClient

	// The protection; nil under None.
	stack   *brownout.Brownout
	rec     *signals.Recorder
	ctl     *dimmer.Controller // embedded mode
	api     *api.API
	remote  *provider.Remote // fleet mode (Config.Brownoutd)
	src     provider.Source  // the levels: ctl or remote
	shedder *shed.Shedder
	flags   *openfeature.Client
	payG    *fallback.Guard
	smsG    *fallback.Guard
	recsG   *fallback.Guard
	cache   *fallback.Cache[[]string]
	box     *fallback.Outbox
	byUser  *shed.RateLimiter // the flash deal, per user…
	byAddr  *shed.RateLimiter // …and per address

	reg     *prometheus.Registry
	handler http.Handler
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	counts  counts
	closers []func() error
	stores  storeMetrics // the Redis rate-limit stores, for /metrics
}

// storeMetrics collects several redisstore.Stores (their metrics share
// names, told apart by the prefix label), registered once, unchecked.
type storeMetrics []*redisstore.Store

func (storeMetrics) Describe(chan<- *prometheus.Desc) {}

func (m storeMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, st := range m {
		st.Collect(ch)
	}
}

// counts are what the shop served, for reports and tests.
type counts struct {
	pages                   atomic.Int64
	present, stale, dimmed  [3]atomic.Int64 // by section
	unavailable             [3]atomic.Int64 // on, but the dependency failed and nothing was cached
	orders, replays         atomic.Int64
	smsInline, smsInlineErr atomic.Int64 // None: sent in the request
	dealsRefused            atomic.Int64
	unmatched               atomic.Int64 // charged, the order failed, and the void failed too (reconciled later)
	voided                  atomic.Int64 // charged, the order failed or was abandoned: charge voided
	cancelled               atomic.Int64 // checkouts abandoned unfinished, settled by Reconcile
}

// smsTopic is the outbox topic of order confirmations.
const smsTopic = "sms"

var domains atomic.Int64

// New opens the store, starts the dependencies (unless their URLs are
// given) and builds the protection. Close releases everything.
func New(ctx context.Context, cfg Config) (_ *Shop, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.DB == "" {
		if cfg.StateDir == "" {
			if cfg.StateDir, err = statedir.Default(filepath.Join("brownout", "shop"), os.Getenv); err != nil {
				return nil, fmt.Errorf("shop: %w: set Config.StateDir (shop-demo serve --state DIR) to a directory private to this user, or Config.DB", err)
			}
		}
		// The orders and the outbox: another local user must not read
		// them, nor plant a database of their own.
		if err := statedir.Make(cfg.StateDir); err != nil {
			return nil, fmt.Errorf("shop: %w", err)
		}
		cfg.DB = filepath.Join(cfg.StateDir, "shop.db")
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Shop{cfg: cfg, pool: pool.New(cfg.Workers), cancel: cancel}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.store, err = store.Open(ctx, cfg.DB); err != nil {
		return nil, err
	}
	if err := s.startDeps(); err != nil {
		return nil, err
	}
	s.reg = prometheus.NewRegistry()
	// The Go runtime's usual metrics, and the heap live after the last
	// collection (go_gc_heap_live_bytes): what the shop keeps, without the
	// garbage of the moment in go_memstats_heap_inuse_bytes (a soak
	// watches it).
	s.reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})))
	if cfg.Protect != None {
		if err := s.protect(ctx); err != nil {
			return nil, err
		}
	}
	s.wg.Go(func() { s.reconcile(ctx) })
	s.handler = s.routes()
	return s, nil
}

// startDeps starts the simulated dependencies whose URLs were not given.
func (s *Shop) startDeps() error {
	hc := &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     30 * time.Second,
	}}
	urls := [3]*string{&s.cfg.Payment, &s.cfg.SMS, &s.cfg.Recs}
	if *urls[0] == "" {
		s.Payment = deps.NewPaymentGateway(deps.Options{})
		srv, err := s.Payment.Start("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("shop: payment gateway: %w", err)
		}
		s.servers, *urls[0] = append(s.servers, srv), srv.URL
	}
	if *urls[1] == "" {
		s.SMS = deps.NewSMSProvider(deps.Options{})
		if err := s.SMS.UpdateFault(func(f *deps.SMSFault) { f.Rate = s.cfg.SMSRate }); err != nil {
			return fmt.Errorf("shop: sms provider: %w", err)
		}
		srv, err := s.SMS.Start("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("shop: sms provider: %w", err)
		}
		s.servers, *urls[1] = append(s.servers, srv), srv.URL
	}
	if *urls[2] == "" {
		ids := make([]string, store.CatalogueSize)
		for i := range ids {
			ids[i] = strconv.Itoa(i + 1)
		}
		s.Recs = deps.NewRecsEngine(deps.Options{}, ids)
		srv, err := s.Recs.Start("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("shop: recommendation engine: %w", err)
		}
		s.servers, *urls[2] = append(s.servers, srv), srv.URL
	}
	s.pay = deps.PaymentClient{BaseURL: s.cfg.Payment, HTTP: hc}
	s.sms = deps.SMSClient{BaseURL: s.cfg.SMS, HTTP: hc}
	s.recs = deps.RecsClient{BaseURL: s.cfg.Recs, HTTP: hc}
	return nil
}

// protect builds the stack of this project's packages, configured as a
// user would — routes, classes, costs, targets — and never told the size
// of the worker pool.
func (s *Shop) protect(ctx context.Context) error {
	cfg := s.cfg
	// Costs relative to a product page's mandatory part, as declared from
	// the shop's own figures: a route's, and a section's (what it adds to
	// a page with every section off — the unit of Feature.Cost, which the
	// model law takes for a prior).
	rel := func(d time.Duration) float64 { return d.Seconds() / cfg.Costs.Page.Seconds() }
	features := make([]dimmer.Feature, 0, 3)
	for i, name := range Sections() {
		features = append(features, dimmer.Feature{Name: name, Rank: i, Cost: rel(cfg.Costs.sections()[i])})
	}
	routes := []brownout.Route{
		{Pattern: "GET /api/products/{id}", Class: signals.Default, Cost: 1},
		{Pattern: "GET /{$}", Class: signals.Default, Cost: 1},
		{Pattern: "POST /api/cart", Class: signals.Critical, Cost: rel(cfg.Costs.Cart)},
		{Pattern: "POST /api/checkout", Class: signals.Critical, Cost: rel(cfg.Costs.Checkout)},
		{Pattern: "GET /api/deals/flash", Class: signals.Sheddable, Cost: rel(cfg.Costs.Deal)},
		{Pattern: "POST /api/beacon", Class: signals.Sheddable, Cost: rel(cfg.Costs.Beacon)},
	}
	// Fleet-wide limits: one Redis keeps every instance's allowances.
	var store func(prefix string) shed.RateLimitStore
	if cfg.Redis != "" {
		opt, err := redis.ParseURL(cfg.Redis)
		if err != nil {
			return fmt.Errorf("shop: redis %q: %w", cfg.Redis, err)
		}
		opt.ContextTimeoutEnabled = true
		rc := redis.NewClient(opt)
		s.closers = append(s.closers, rc.Close)
		store = func(prefix string) shed.RateLimitStore {
			st, err := redisstore.New(rc, redisstore.Config{Prefix: "shop:" + prefix + ":"})
			if err != nil {
				panic(err) // only for a client without ContextTimeoutEnabled, set above
			}
			s.stores = append(s.stores, st)
			return st
		}
	} else {
		store = func(string) shed.RateLimitStore { return nil }
	}
	// The stack, as a user builds it: routes, classes, costs, targets —
	// never told the size of the worker pool. Embedded, the controller and
	// its HTTP surface (OFREP, state, history, events, the operators'
	// writes) run here; in fleet mode the levels come from brownoutd's
	// stream, evaluated here with the in-process code, and the daemon
	// reads this instance's /metrics or its pushes for its signals.
	o := brownout.Options{
		// The routes' costs are declared, not corrected by service time: a
		// checkout waits 30 ms on the payment gateway, which costs the
		// workers nothing.
		Features: features, Target: cfg.LatencyTarget, Routes: routes,
		TrustedProxies: cfg.TrustedProxies,
		// Ordinary users browse at well under a page a second; this holds
		// a client that does not. Browsers read no X-RateLimit headers:
		// they come with refusals only.
		RateLimit:  &shed.RateLimitConfig{Rate: 10, Burst: 30, HeadersOnRefusal: true, Store: store("client")},
		Domain:     "shop-" + strconv.FormatInt(domains.Add(1), 10),
		Registerer: s.reg, OperatorTokens: cfg.OperatorTokens, Loopback: cfg.Loopback, Logger: cfg.Logger,
		Daemons: cfg.Brownoutd, DaemonToken: cfg.BrownoutdToken, NoPush: cfg.NoPush, Service: cfg.Service,
	}
	if len(cfg.Brownoutd) > 0 {
		o.StateDir = cfg.StateDir // the last-known levels across restarts
	}
	b, err := brownout.New(o)
	if err != nil {
		return err
	}
	if b.Controller() != nil && cfg.Protect == ShedOnly {
		b.Controller().Freeze("shedding only: the comparison run")
	}
	s.stack, s.rec, s.ctl, s.api, s.remote, s.src, s.shedder = b, b.Recorder(), b.Controller(), b.API(), b.Remote(), b.Source(), b.Shedder()
	s.wg.Go(func() { _ = b.Run(ctx) })
	if err := b.RegisterProvider(); err != nil {
		return err
	}
	s.flags = b.Client()

	if s.byUser, err = shed.NewRateLimiter(shed.RateLimitConfig{Rate: 1, Burst: 5, Store: store("deal-user")}); err != nil {
		return err
	}
	if s.byAddr, err = shed.NewRateLimiter(shed.RateLimitConfig{Rate: 2, Burst: 10, Store: store("deal-addr")}); err != nil {
		return err
	}

	budget := fallback.NewRetryBudget(0.1, 10)
	if s.payG, err = fallback.New(fallback.Config{Name: "payment", MaxConcurrent: 128, Budget: budget}); err != nil {
		return err
	}
	// The SMS guard answers the outbox's sends: one attempt (the outbox
	// retries), a fixed timeout under its lease.
	if s.smsG, err = fallback.New(fallback.Config{Name: "sms", MaxConcurrent: 256, MaxAttempts: 1, Timeout: time.Second}); err != nil {
		return err
	}
	if s.recsG, err = fallback.New(fallback.Config{Name: "recommendations", MaxConcurrent: 128, MaxAttempts: 1}); err != nil {
		return err
	}
	s.cache = fallback.NewCache[[]string](fallback.CacheConfig{Fresh: 10 * time.Second, MaxStale: 10 * time.Minute})
	s.box, err = fallback.NewOutbox(ctx, s.store.DB(), fallback.OutboxConfig{
		Dialect: s.store.Dialect(), Rate: cfg.SMSRate, Burst: 20, Lease: 10 * time.Second,
		Allow: s.smsG.Allows, Logger: cfg.Logger,
	})
	if err != nil {
		return err
	}
	s.wg.Go(func() { s.box.Run(ctx, s.sendSMS) })

	if len(s.stores) > 0 {
		s.reg.MustRegister(s.stores)
	}
	s.reg.MustRegister(fallback.NewCollector([]*fallback.Guard{s.payG, s.smsG, s.recsG}, map[string]*fallback.Outbox{smsTopic: s.box}))
	return nil
}

// Handler returns the shop's HTTP handler: /metrics and /healthz beside
// the protected API and storefront.
func (s *Shop) Handler() http.Handler { return s.handler }

// Controller returns the embedded controller (nil under None and in
// fleet mode).
func (s *Shop) Controller() *dimmer.Controller { return s.ctl }

// Shedder returns the admission control (nil under None).
func (s *Shop) Shedder() *shed.Shedder { return s.shedder }

// Remote returns the follower of brownoutd in fleet mode (nil otherwise).
func (s *Shop) Remote() *provider.Remote { return s.remote }

// API returns the embedded controller's HTTP surface (nil under None).
func (s *Shop) API() *api.API { return s.api }

// Store returns the shop's store.
func (s *Shop) Store() *store.Store { return s.store }

// Register adds collectors to the shop's /metrics (e.g. its listener's
// connections, server.Listener.Collector).
func (s *Shop) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Config returns the configuration with defaults filled in.
func (s *Shop) Config() Config { return s.cfg }

// Capacity returns the shop's nominal capacity.
func (s *Shop) Capacity() Capacity { return s.cfg.Capacity() }

// Close stops the controller, the outbox drainer and the dependencies
// the shop started, and closes the store.
func (s *Shop) Close() error {
	s.cancel()
	s.wg.Wait()
	if s.stack != nil {
		s.stack.Close()
	}
	for _, srv := range s.servers {
		srv.Close()
	}
	var err error
	if s.store != nil {
		err = s.store.Close()
	}
	for _, c := range s.closers {
		c()
	}
	return err
}

// echoNotFound answers unknown routes with problem+json.
func echoNotFound(c echo.Context) error {
	problem(c.Response(), http.StatusNotFound, "not-found", "no such route: "+c.Request().Method+" "+c.Request().URL.Path)
	return nil
}

var errNoUser = errors.New("this route needs the X-User-ID header: the user an auth layer in front identified")

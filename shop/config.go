package shop

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Protect selects what stands in front of the shop's workers.
type Protect string

const (
	// None is the baseline, defined exactly: the same worker pool behind an
	// unbounded FIFO (handlers wait for a worker as long as their client
	// does), every section on, dependencies called directly with no
	// guard, the SMS sent inline in the checkout request. A baseline, not
	// a straw man: it is what a shop without this project looks like.
	None Protect = "none"
	// ShedOnly is the whole stack with the controller frozen at full
	// brightness: admission control, guards, stale cache and outbox, but
	// no dimming.
	ShedOnly Protect = "shed"
	// Brownout is the whole stack: the controller dims the optional
	// sections before the shedder refuses anyone.
	Brownout Protect = "brownout"
)

// Protections lists them, weakest first.
func Protections() []Protect { return []Protect{None, ShedOnly, Brownout} }

// ParseProtect parses a protection name.
func ParseProtect(s string) (Protect, error) {
	for _, p := range Protections() {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("shop: unknown protection %q (known: none, shed, brownout)", s)
}

// Costs are the worker time each piece of work holds a worker for: the
// shop's real, bounded capacity, independent of the machine's CPU.
type Costs struct {
	// Page is a product page's mandatory part: details, price, stock.
	Page time.Duration
	// Recommendations, Reviews and Gallery are the optional sections.
	Recommendations, Reviews, Gallery time.Duration
	// Cart and Checkout are the critical writes' work (besides the
	// database transaction itself).
	Cart, Checkout time.Duration
	// Deal is the flash-deal lookup, Beacon an analytics beacon.
	Deal, Beacon time.Duration
}

// DefaultCosts: a page of 12 ms, recommendations 8 ms (the expensive
// section), reviews 3 ms, gallery 2 ms; cart 4 ms, checkout 8 ms, deal
// 2 ms, beacon 0.4 ms — on 4 workers, 160 pages/s with every section on,
// 333 with them off: rates a 2-core machine serves with the load
// generator beside it and timers still accurate (at twice these rates
// the workers' timers ran ~11 % late and the shop fell short of its
// nominal capacity).
func DefaultCosts() Costs {
	return Costs{
		Page: 12 * time.Millisecond, Recommendations: 8 * time.Millisecond,
		Reviews: 3 * time.Millisecond, Gallery: 2 * time.Millisecond,
		Cart: 4 * time.Millisecond, Checkout: 8 * time.Millisecond,
		Deal: 2 * time.Millisecond, Beacon: 400 * time.Microsecond,
	}
}

func (c Costs) withDefaults() Costs {
	d := DefaultCosts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.Page, &d.Page}, {&c.Recommendations, &d.Recommendations}, {&c.Reviews, &d.Reviews},
		{&c.Gallery, &d.Gallery}, {&c.Cart, &d.Cart}, {&c.Checkout, &d.Checkout}, {&c.Deal, &d.Deal}, {&c.Beacon, &d.Beacon},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return c
}

// sections returns the optional sections' costs in shed order (the first
// dims first).
func (c Costs) sections() []time.Duration {
	return []time.Duration{c.Recommendations, c.Reviews, c.Gallery}
}

// Sections names the optional sections of a product page, in the order
// the controller dims them.
func Sections() []string { return []string{"recommendations", "reviews", "gallery"} }

// Mix is the sale's traffic: the share of requests of each kind.
type Mix struct {
	Product, Cart, Checkout, Deal, Beacon float64
}

// SaleMix is the 11.11 traffic (Mix, by kind of work): 72 % product
// pages, 8 % add-to-cart, 5 % checkouts, 7 % flash-deal lookups (the bot
// among them), 8 % beacons.
func SaleMix() Mix { return Mix{Product: 0.72, Cart: 0.08, Checkout: 0.05, Deal: 0.07, Beacon: 0.08} }

// Capacity is what the shop's workers can do.
type Capacity struct {
	Workers int
	// PagesOn and PagesOff are product pages per second with every
	// section on, and with every section off.
	PagesOn, PagesOff float64
	// MixOn and MixOff are requests per second of the sale's mix, with
	// sections on and off.
	MixOn, MixOff float64
	// UnitOn and UnitOff are the mean worker time of a request of the mix.
	UnitOn, UnitOff time.Duration
}

// CapacityOf returns the nominal capacity of workers with costs c for mix m.
func CapacityOf(workers int, c Costs, m Mix) Capacity {
	c = c.withDefaults()
	on := c.Page
	for _, d := range c.sections() {
		on += d
	}
	sum := m.Product + m.Cart + m.Checkout + m.Deal + m.Beacon
	rest := m.Cart*float64(c.Cart) + m.Checkout*float64(c.Checkout) + m.Deal*float64(c.Deal) + m.Beacon*float64(c.Beacon)
	unitOn := time.Duration((m.Product*float64(on) + rest) / sum)
	unitOff := time.Duration((m.Product*float64(c.Page) + rest) / sum)
	w := float64(workers)
	return Capacity{
		Workers: workers,
		PagesOn: w / on.Seconds(), PagesOff: w / c.Page.Seconds(),
		MixOn: w / unitOn.Seconds(), MixOff: w / unitOff.Seconds(),
		UnitOn: unitOn, UnitOff: unitOff,
	}
}

// String says it in one line.
func (c Capacity) String() string {
	return fmt.Sprintf("%d workers: %.0f product pages/s with every section on, %.0f with them off; the sale's mix %.0f req/s on, %.0f off (%.2f / %.2f ms of worker time a request)",
		c.Workers, c.PagesOn, c.PagesOff, c.MixOn, c.MixOff, float64(c.UnitOn)/1e6, float64(c.UnitOff)/1e6)
}

// Config shapes a Shop. The zero value runs on embedded defaults.
type Config struct {
	// Protect selects the protection. Default Brownout.
	Protect Protect
	// Workers is the hidden worker pool (never told to the shedder: its
	// adaptive limit finds it). Default 4.
	Workers int
	// Costs of each piece of work. Zero fields take DefaultCosts.
	Costs Costs
	// DB is a PostgreSQL URL (postgres://…) or a SQLite file path.
	// Default: shop.db under StateDir.
	DB string
	// StateDir holds the SQLite database (and, in fleet mode, the last
	// levels brownoutd sent). It must be private to this user (created
	// 0700 when missing; New refuses one that every user may write).
	// Default: $STATE_DIRECTORY (systemd), else
	// $XDG_STATE_HOME/brownout/shop, else ~/.local/state/brownout/shop;
	// with none of them New refuses to start (never a shared temporary
	// directory).
	StateDir string
	// Payment, SMS and Recs are the dependencies' base URLs. Empty: the
	// shop starts its own simulated ones on 127.0.0.1.
	Payment, SMS, Recs string
	// SMSRate is the SMS provider's contract, messages per second for the
	// fleet. Default 500.
	SMSRate float64
	// TrustedProxies are the load balancers in front of the shop, whose
	// X-Forwarded-For is read for the client's address (the per-address
	// limits' key). Default none: every client is its connection's
	// address, so that one that sets its own X-Forwarded-For cannot pose
	// as many. The sale's load generator plays the load balancer, giving
	// each simulated user its own address: a shop it drives trusts it
	// explicitly (LocalProxies when it runs on the same machine).
	TrustedProxies []netip.Prefix
	// LatencyTarget is the controller's p99 target. Default 300 ms.
	LatencyTarget time.Duration
	// OperatorTokens allow writes to the embedded controller's operator
	// API (/v1/…): name → token. Without any, writes are allowed only when
	// Loopback says the shop listens on loopback only.
	OperatorTokens map[string]string
	Loopback       bool
	// Brownoutd, when set, is the base URL of a brownoutd serving this
	// shop's levels (fleet mode), or its replicas' (brownoutd in HA): the
	// shop follows the stream of one (provider.Remote; another when it
	// fails or lags) instead of running a controller of its own, and
	// pushes its signals to each every second — unless NoPush, for a
	// daemon that reads the shop's /metrics (scrape or PromQL).
	// BrownoutdToken is sent to them.
	Brownoutd      []string
	BrownoutdToken string
	NoPush         bool
	// Service, in fleet mode, names this shop's service on a daemon of
	// several (brownoutd's services:): the stream and the pushes say it
	// (brownout.Options.Service), and the storefront's page evaluates at
	// the service's base URL (…/services/{name}), since a browser's
	// preflight carries no header to route by.
	Service string
	// Redis, when set (redis://HOST:PORT[/DB]), keeps the per-client rate
	// limits in Redis (shed/redisstore), so that a client spread over
	// several instances is held to one allowance.
	Redis string
	// Logger. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Protect == "" {
		c.Protect = Brownout
	}
	if _, err := ParseProtect(string(c.Protect)); err != nil {
		return c, err
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Workers < 0 || c.Workers > 4096 {
		return c, errors.New("shop: workers must be between 1 and 4096")
	}
	c.Costs = c.Costs.withDefaults()
	if c.SMSRate == 0 {
		c.SMSRate = 500
	}
	if !(c.SMSRate > 0) {
		return c, errors.New("shop: the SMS contract rate must be positive")
	}
	if c.LatencyTarget == 0 {
		c.LatencyTarget = 300 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// LocalProxies are 127.0.0.1 and ::1: Config.TrustedProxies for a shop
// whose load balancer — the sale's load generator — runs on the same
// machine.
func LocalProxies() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
}

// Capacity returns the shop's nominal capacity for the sale's mix.
func (c Config) Capacity() Capacity {
	w := c.Workers
	if w <= 0 {
		w = 4
	}
	return CapacityOf(w, c.Costs, SaleMix())
}

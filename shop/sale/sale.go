// Package sale is the 11.11 flash sale against a shop (package shop): the
// timeline of the sale's load (warm-up, midnight, a capacity dip,
// recovery), its traffic of browsing, carts, checkouts and beacons, the
// faults it injects through the shop's demo endpoints, and the report of
// what the shoppers got. The shop itself knows nothing of it.
package sale

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/brownout/brownout/shop"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/brownout/brownout/load"
	"github.com/brownout/brownout/shop/store"
	"github.com/brownout/brownout/signals"
)

// Config shapes a sale: the 11.11 timeline against a shop.
type Config struct {
	// Target is the shop's base URL.
	Target string
	// Scale multiplies every rate (1: the timeline below). Default 1.
	Scale float64
	// Duration stretches the timeline to this total. Default 80 s.
	Duration time.Duration
	// Seed draws the users and the mix. Default 1.
	Seed uint64
	// Timeout is the clients' timeout. Default 1 s.
	Timeout time.Duration
	// Progress receives a line a second; nil: none.
	Progress io.Writer
	// Settle is how long to wait after the traffic for the outbox to
	// deliver what is queued before counting lost SMS (the acceptance's
	// "undelivered 60 s after the provider recovers"). Default 60 s
	// after the SMS provider recovered, at least 5 s after the traffic.
	Settle time.Duration
	// HTTP is the client for the demo endpoints. Default: one with a 10 s
	// timeout.
	HTTP *http.Client
}

// Phase names of the sale's timeline.
const (
	PhaseWarmup   = "warm-up"
	PhaseMidnight = "midnight"
	PhaseDip      = "capacity dip"
	PhaseRecovery = "recovery"
)

// Result is one sale against one shop.
type Result struct {
	Protect  shop.Protect    `json:"protect"`
	Capacity shop.Capacity   `json:"capacity"`
	Load     *load.Report    `json:"load"`
	Shop     shop.SaleReport `json:"shop"`
}

// timeline returns the phases and events for a total duration d and a
// capacity c: warm-up at 50 % of the all-on capacity (3/16 of d),
// midnight at 200 % (6/16; the SMS provider slow from 1/16 into it for
// 4/16), a capacity dip (the workers slowed ×2, 3/16) at 80 %, recovery at
// 50 % (4/16).
func timeline(d time.Duration, c shop.Capacity, scale float64, pool func(f float64), sms func(slow bool)) ([]load.Phase, []load.Event) {
	u := d / 16
	base := c.MixOn * scale
	phases := []load.Phase{
		{Name: PhaseWarmup, Rate: 0.5 * base, Duration: 3 * u},
		{Name: PhaseMidnight, Rate: 2 * base, Duration: 6 * u},
		{Name: PhaseDip, Rate: 0.8 * base, Duration: 3 * u},
		{Name: PhaseRecovery, Rate: 0.5 * base, Duration: 4 * u},
	}
	events := []load.Event{
		{At: 4 * u, Name: "SMS provider slows to 30 s", Do: func(context.Context) { sms(true) }},
		{At: 8 * u, Name: "SMS provider recovers", Do: func(context.Context) { sms(false) }},
		{At: 9 * u, Name: "capacity dip: every piece of work takes twice as long", Do: func(context.Context) { pool(2) }},
		{At: 12 * u, Name: "capacity back", Do: func(context.Context) { pool(1) }},
	}
	return phases, events
}

// Traffic returns the sale's traffic: browsing, carts, checkouts (impatient
// clients retrying naively, and careful ones with backoff and a budget),
// flash-deal lookups, a bot rotating user ids from one address, beacons.
//
// run names the run in the checkouts' Idempotency-Keys (a retry keeps its
// key): a shop keeps the keys it was sent in its database, across its
// restarts, and answers a key it knows with that key's order — a run
// that sent an earlier run's keys again (the same seed draws the same
// ones) would place no order of its own (NewRun).
func Traffic(run string) []load.Kind {
	product := func(r load.Req) (string, []byte, http.Header) {
		return "/api/products/" + strconv.Itoa(1+r.Rand.IntN(store.CatalogueSize)), nil, nil
	}
	jsonHeader := func() http.Header { return http.Header{"Content-Type": {"application/json"}} }
	// Checkouts buy regular products: the flash deals sell out within
	// seconds, and a sold-out answer is not the shop failing.
	regular := func(r *rand.Rand) int { return store.FlashDeals + 1 + r.IntN(store.CatalogueSize-store.FlashDeals) }
	checkout := func(r load.Req) (string, []byte, http.Header) {
		h := jsonHeader()
		h.Set(shop.IdempotencyHeader, fmt.Sprintf("ck-%s-%d-%d", run, r.Seq, r.Rand.Uint64()))
		return "", []byte(fmt.Sprintf(`{"items":[{"product":%d,"qty":1}]}`, regular(r.Rand))), h
	}
	return []load.Kind{
		{Name: "browse", Share: 0.72, Class: signals.Default, Make: product},
		{Name: "cart", Share: 0.08, Class: signals.Critical, Method: http.MethodPost, Path: "/api/cart",
			Make: func(r load.Req) (string, []byte, http.Header) {
				return "", []byte(fmt.Sprintf(`{"product":%d,"qty":1}`, regular(r.Rand))), jsonHeader()
			}},
		{Name: "checkout", Share: 0.03, Class: signals.Critical, Method: http.MethodPost, Path: "/api/checkout", Make: checkout,
			Retry: &load.Retry{Attempts: 4, Backoff: 200 * time.Millisecond, Jitter: true, Budget: 0.2, Cap: 2 * time.Second}},
		{Name: "checkout (naive retry)", Share: 0.02, Class: signals.Critical, Method: http.MethodPost, Path: "/api/checkout", Make: checkout,
			Retry: &load.Retry{Attempts: 3}},
		{Name: "flash deal", Share: 0.04, Class: signals.Sheddable, Path: "/api/deals/flash"},
		{Name: "bot", Share: 0.03, Class: signals.Sheddable, Path: "/api/deals/flash",
			Users: func(r *rand.Rand) (int, string) { return 1_000_000 + r.IntN(1_000_000), "198.51.100.66" }},
		{Name: "beacon", Share: 0.08, Class: signals.Sheddable, Method: http.MethodPost, Path: "/api/beacon",
			Body: []byte(`{"event":"view"}`), Header: jsonHeader()},
	}
}

// Load is the sale's traffic (Traffic) against the shop at
// target, in phases, open loop: each simulated user its own address, sent
// as X-Forwarded-For (the shop must trust the generator as its proxy:
// Config.TrustedProxies), product pages' optional sections counted.
// Run runs it on the 11.11 timeline; a soak at a constant rate. Each call
// is a run of its own (NewRun): the same seed sends the same requests but
// for the checkouts' Idempotency-Keys, new ones.
func Load(target string, phases []load.Phase, seed uint64) load.Config {
	return load.Config{Target: target, Phases: phases, Mix: Traffic(NewRun()), Seed: seed, Addr: userAddr, Optional: optional}
}

// NewRun returns a new run's name for Traffic: 64 random bits.
func NewRun() string {
	var b [8]byte
	crand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// userAddr gives each simulated user an address of its own (the shop
// trusts the generator as its proxy).
func userAddr(user int) string {
	return fmt.Sprintf("10.%d.%d.%d", (user>>16)&0xff, (user>>8)&0xff, user&0xff)
}

// optional counts a product page's sections served (present or stale).
func optional(body []byte) (served, offered int) {
	var pg struct {
		Sections map[string]shop.Section `json:"sections"`
	}
	if json.Unmarshal(body, &pg) != nil || pg.Sections == nil {
		return 0, 0
	}
	for _, s := range pg.Sections {
		offered++
		if s.Status == "present" || s.Status == "stale" {
			served++
		}
	}
	return served, offered
}

// Run runs the 11.11 timeline against the shop at cfg.Target and returns
// the load's report with the shop's count of orders and SMS over the run.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Target == "" {
		return nil, errors.New("shop: sale: no target")
	}
	cfg.Target = strings.TrimRight(cfg.Target, "/")
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if !(cfg.Scale > 0) {
		return nil, errors.New("shop: sale: scale must be positive")
	}
	if cfg.Duration == 0 {
		cfg.Duration = 80 * time.Second
	}
	if cfg.Duration < 8*time.Second {
		return nil, errors.New("shop: sale: duration under 8 s leaves no phase its measure")
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	var info shop.DepsInfo
	if err := getJSON(ctx, cfg.HTTP, cfg.Target+"/api/demo/deps", &info); err != nil {
		return nil, fmt.Errorf("shop: sale: %s is not a shop-demo (GET /api/demo/deps): %w", cfg.Target, err)
	}
	// The shop's counts are since it started: the run's are their
	// increase over it (SaleReport.Since). start is taken first, so that
	// the orders whose SMS are counted (created since start) hold every
	// order counted.
	start := time.Now()
	var base shop.SaleReport
	if err := getJSON(ctx, cfg.HTTP, cfg.Target+"/api/demo/report?since="+start.Format(time.RFC3339Nano), &base); err != nil {
		return nil, err
	}
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
			if cfg.Progress != nil {
				fmt.Fprintln(cfg.Progress, "event failed:", err)
			}
		}
	}
	slow := func(f float64) {
		note(putJSON(ctx, cfg.HTTP, cfg.Target+"/api/demo/slowdown", map[string]float64{"factor": f}))
	}
	var recovered time.Time
	sms := func(on bool) {
		note(setFault(ctx, cfg.HTTP, info.SMS, on))
		if !on {
			recovered = time.Now()
		}
	}
	phases, events := timeline(cfg.Duration, info.Capacity, cfg.Scale, slow, sms)
	lc := Load(cfg.Target, phases, cfg.Seed)
	lc.Timeout, lc.Progress, lc.Events = cfg.Timeout, cfg.Progress, events
	lc.Skip = min(5*time.Second, cfg.Duration/32)
	rep, err := load.Run(ctx, lc)
	// Whatever happened, leave the shop as it was.
	slow(1)
	if recovered.IsZero() {
		sms(false)
	}
	if err != nil {
		return nil, err
	}
	settle := cfg.Settle
	if settle == 0 {
		settle = max(time.Until(recovered.Add(60*time.Second)), 5*time.Second)
	}
	res := &Result{Protect: info.Protect, Capacity: info.Capacity, Load: rep}
	// Wait for the outbox to drain (or the settle time to pass).
	deadline := time.Now().Add(settle)
	for {
		var sr shop.SaleReport
		if err := getJSON(ctx, cfg.HTTP, cfg.Target+"/api/demo/report?since="+start.Format(time.RFC3339Nano), &sr); err != nil {
			return nil, err
		}
		res.Shop = sr.Since(base)
		// Nothing queued: nothing more will be delivered (a send the
		// baseline lost inline stays lost).
		if sr.Queued == 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return res, errors.Join(errs...)
}

func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return do(hc, req, v)
}

func putJSON(ctx context.Context, hc *http.Client, url string, body any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(hc, req, nil)
}

func do(hc *http.Client, req *http.Request, v any) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, bytes.TrimSpace(b))
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}

// setFault switches a dependency's slow mode through its admin endpoint,
// keeping its other knobs.
func setFault(ctx context.Context, hc *http.Client, base string, slow bool) error {
	var knobs map[string]any
	if err := getJSON(ctx, hc, base+"/admin/fault", &knobs); err != nil {
		return err
	}
	knobs["slow"] = slow
	return putJSON(ctx, hc, base+"/admin/fault", knobs)
}

package shop

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/open-feature/go-sdk/openfeature"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brownout/brownout/fallback"
	"github.com/brownout/brownout/internal/pool"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/shop/store"
	"github.com/brownout/brownout/web"
)

// UserHeader carries the user: what an auth layer in front sets. It is
// the OpenFeature targeting key and the rate-limit key.
const UserHeader = "X-User-ID"

// GenerationHeader carries the controller's generation on product pages.
const GenerationHeader = "X-Brownout-Generation"

// sessionCookie keys anonymous browsing: the targeting key of a visitor
// without X-User-ID.
const sessionCookie = "brownout_session"

// routes builds the HTTP surface: echo for the API and the storefront,
// behind the shedder when there is one; /metrics, /healthz and the
// storefront's scripts (/static/) beside it, never shed.
func (s *Shop) routes() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.RouteNotFound("/*", echoNotFound)
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		var he *echo.HTTPError
		code := http.StatusInternalServerError
		if errors.As(err, &he) {
			code = he.Code
		}
		if !c.Response().Committed {
			problem(c.Response(), code, "error", fmt.Sprint(err))
		}
	}
	e.GET("/api/products/:id", s.product)
	e.GET("/", s.storefront)
	e.POST("/api/cart", s.cart)
	e.POST("/api/checkout", s.checkout)
	e.GET("/api/deals/flash", s.deals)
	e.POST("/api/beacon", s.beacon)

	api := s.guard(e)
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	if s.api != nil {
		// On a loopback listener, refused as the controller's reads are to
		// a page whose name was re-pointed at it (the shop's own routes
		// are for its users, wherever they come from).
		metrics = s.api.Local(metrics)
	}
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	// The storefront's scripts: small, fixed, revalidated with an ETag;
	// never shed, as a page that got through must not lose its script.
	mux.HandleFunc("GET /static/", static)
	s.demo(mux)
	if s.api != nil {
		mux.Handle("/ofrep/", s.api.Handler())
		mux.Handle("/v1/", s.api.Handler())
		// The operator dial over the same API; never shed. Its files are
		// relative, so /dial redirects to /dial/.
		mux.Handle("GET /dial", http.RedirectHandler("/dial/", http.StatusMovedPermanently))
		mux.Handle("GET /dial/", s.api.Local(http.StripPrefix("/dial", web.Handler())))
	} else if s.remote != nil {
		// Fleet mode: the operator API is the daemon's; the shop's state
		// says what it follows and how its links to the daemon fare.
		mux.Handle("GET /v1/state", s.stack.Handler())
	}
	mux.Handle("/", api)
	return mux
}

// Section is one optional part of a product page as served.
type Section struct {
	// Status is "present", "stale" (served from the cache), "dimmed" (off
	// for this request) or "unavailable" (on, but its dependency failed
	// with nothing cached).
	Status string   `json:"status"`
	Items  []string `json:"items,omitempty"`
}

// Product is a product as the API shows it.
type Product struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int64  `json:"stock"`
	Flash      bool   `json:"flash,omitempty"`
}

func view(p store.Product) Product {
	return Product{ID: p.ID, Name: p.Name, PriceCents: p.PriceCents, Stock: p.Stock, Flash: p.Flash}
}

// Page is a product page.
type Page struct {
	Product  Product            `json:"product"`
	Sections map[string]Section `json:"sections"`
	// Dimmed lists the sections dimmed for this request.
	Dimmed []string `json:"dimmed"`
	// Generation is the controller's (0 without one).
	Generation uint64 `json:"generation"`
}

// user returns the request's user and whether it came from X-User-ID; a
// visitor without one is keyed by a session cookie (set when missing).
func (s *Shop) user(c echo.Context) (string, bool) {
	if u := c.Request().Header.Get(UserHeader); u != "" {
		return u, true
	}
	if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" && len(ck.Value) <= 64 {
		return "s:" + ck.Value, false
	}
	id := newID()
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: 86400})
	return "s:" + id, false
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// page builds a product page for user: the flags decide the sections, the
// recommendation engine is called (through its guard and the stale cache
// when protected), and a worker does the page's work.
func (s *Shop) page(ctx context.Context, id int64, user string) (Page, int, error) {
	p, err := s.store.Product(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Page{}, http.StatusNotFound, fmt.Errorf("no product %d", id)
		}
		return Page{}, http.StatusInternalServerError, err
	}
	pg := Page{Product: view(p), Sections: make(map[string]Section, 3), Dimmed: []string{}}
	work := s.cfg.Costs.Page
	costs := s.cfg.Costs.sections()
	on := s.sectionsOn(ctx, user)
	for i, name := range Sections() {
		if !on[i] {
			pg.Sections[name] = Section{Status: "dimmed"}
			pg.Dimmed = append(pg.Dimmed, name)
			s.counts.dimmed[i].Add(1)
			continue
		}
		sec := Section{Status: "present"}
		if name == "recommendations" {
			sec = s.recommend(ctx, id)
		} else {
			sec.Items = []string{fmt.Sprintf("%s of %s", name, p.Name)}
		}
		switch sec.Status {
		case "present":
			s.counts.present[i].Add(1)
		case "stale":
			s.counts.stale[i].Add(1)
		default:
			s.counts.unavailable[i].Add(1)
		}
		if sec.Status != "unavailable" {
			work += costs[i]
		}
		pg.Sections[name] = sec
	}
	if s.src != nil {
		pg.Generation = s.src.State().Seq()
	}
	if err := s.pool.Do(ctx, work); err != nil {
		return Page{}, http.StatusServiceUnavailable, err
	}
	s.counts.pages.Add(1)
	return pg, http.StatusOK, nil
}

// sectionsOn evaluates the sections' flags for user, all of them in one
// evaluation of the provider's features flag (one SDK evaluation where
// three would cost three times its ~1.5 µs); all on when unprotected. A
// section the answer lacks stays on: the flags' default.
func (s *Shop) sectionsOn(ctx context.Context, user string) [3]bool {
	on := [3]bool{true, true, true}
	if s.flags == nil {
		return on
	}
	v, _ := s.flags.ObjectValue(ctx, provider.FeaturesFlag, nil, openfeature.NewEvaluationContext(user, nil))
	m, _ := v.(map[string]any)
	for i, name := range Sections() {
		if b, ok := m[name].(bool); ok {
			on[i] = b
		}
	}
	return on
}

// guard wraps the API in the admission control; unprotected, it returns h.
func (s *Shop) guard(h http.Handler) http.Handler {
	if s.shedder == nil {
		return h
	}
	return s.shedder.Middleware(h)
}

// recommend calls the recommendation engine: under protection through its
// guard and the stale cache (a fresh answer for 10 s, a stale one while
// the engine fails), else directly.
func (s *Shop) recommend(ctx context.Context, id int64) Section {
	key := strconv.FormatInt(id, 10)
	if s.cache == nil {
		items, err := s.recs.Get(ctx, key, "")
		if err != nil {
			return Section{Status: "unavailable"}
		}
		return Section{Status: "present", Items: items}
	}
	items, res, err := s.cache.Get(ctx, key, func(ctx context.Context) ([]string, error) {
		return fallback.Call(ctx, s.recsG, func(ctx context.Context) ([]string, error) { return s.recs.Get(ctx, key, "") })
	})
	switch {
	case err != nil:
		return Section{Status: "unavailable"}
	case res.Stale:
		return Section{Status: "stale", Items: items}
	}
	return Section{Status: "present", Items: items}
}

func (s *Shop) product(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		problem(c.Response(), http.StatusBadRequest, "bad-product-id", fmt.Sprintf("product id %q: want a positive integer", c.Param("id")))
		return nil
	}
	user, _ := s.user(c)
	pg, status, err := s.page(c.Request().Context(), id, user)
	if err != nil {
		problem(c.Response(), status, "product", err.Error())
		return nil
	}
	c.Response().Header().Set(GenerationHeader, strconv.FormatUint(pg.Generation, 10))
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, pg)
}

// cartRequest is POST /api/cart's body.
type cartRequest struct {
	Product int64 `json:"product"`
	Qty     int64 `json:"qty"`
}

func (s *Shop) cart(c echo.Context) error {
	w, r := c.Response(), c.Request()
	user := r.Header.Get(UserHeader)
	if user == "" {
		problem(w, http.StatusUnauthorized, "no-user", errNoUser.Error())
		return nil
	}
	var req cartRequest
	if status, err := decode(w, r, &req); err != nil {
		problem(w, status, "bad-body", err.Error())
		return nil
	}
	if err := s.pool.Do(r.Context(), s.cfg.Costs.Cart); err != nil {
		problem(w, http.StatusServiceUnavailable, "gone", err.Error())
		return nil
	}
	if err := s.store.AddToCart(r.Context(), user, req.Product, req.Qty); err != nil {
		status, typ := storeStatus(err)
		problem(w, status, typ, err.Error())
		return nil
	}
	return c.JSON(http.StatusCreated, map[string]any{"product": req.Product, "qty": req.Qty})
}

// checkoutRequest is POST /api/checkout's body.
type checkoutRequest struct {
	Items []struct {
		Product int64 `json:"product"`
		Qty     int64 `json:"qty"`
	} `json:"items"`
}

// CheckoutResponse is POST /api/checkout's answer.
type CheckoutResponse struct {
	Order      string `json:"order"`
	TotalCents int64  `json:"total_cents"`
	// Replayed: the Idempotency-Key had already bought this order.
	Replayed bool `json:"replayed,omitempty"`
}

// IdempotencyHeader makes a checkout safe to retry.
const IdempotencyHeader = "Idempotency-Key"

func (s *Shop) checkout(c echo.Context) error {
	w, r := c.Response(), c.Request()
	ctx := r.Context()
	user := r.Header.Get(UserHeader)
	if user == "" {
		problem(w, http.StatusUnauthorized, "no-user", errNoUser.Error())
		return nil
	}
	var body checkoutRequest
	if status, err := decode(w, r, &body); err != nil {
		problem(w, status, "bad-body", err.Error())
		return nil
	}
	req := store.CheckoutRequest{User: user, IdempotencyKey: r.Header.Get(IdempotencyHeader)}
	for _, it := range body.Items {
		req.Items = append(req.Items, store.Item{ProductID: it.Product, Qty: it.Qty})
	}
	if err := s.pool.Do(ctx, s.cfg.Costs.Checkout); err != nil {
		problem(w, http.StatusServiceUnavailable, "gone", err.Error())
		return nil
	}
	// The store refuses what it must before anything is charged, charges
	// between two short transactions (on SQLite the write lock is held
	// for milliseconds, not for a call to the gateway) and voids the
	// charge of an order that then fails.
	enqueue := func(ctx context.Context, tx *sql.Tx, orderID string) error {
		if s.box == nil {
			return nil // None sends inline, after the commit
		}
		m, _ := json.Marshal(smsMessage{To: phone(user), Body: confirmation(orderID)})
		return s.box.Enqueue(ctx, tx, fallback.Message{Key: "sms-" + orderID, Topic: smsTopic, Payload: m})
	}
	o, created, err := s.store.Checkout(ctx, req, payer{s}, enqueue)
	if err != nil {
		status, typ := storeStatus(err)
		if errors.Is(err, store.ErrInProgress) {
			w.Header().Set("Retry-After", "1")
		}
		problem(w, status, typ, err.Error())
		return nil
	}
	if !created {
		s.counts.replays.Add(1)
		return c.JSON(http.StatusOK, CheckoutResponse{Order: o.ID, TotalCents: o.TotalCents, Replayed: true})
	}
	s.counts.orders.Add(1)
	if s.box == nil {
		// The baseline sends the confirmation in the request, as a shop
		// without an outbox does: a slow provider makes checkout slow, and
		// a failed send is a lost SMS.
		s.counts.smsInline.Add(1)
		if err := s.sms.Send(ctx, phone(user), confirmation(o.ID), "sms-"+o.ID); err != nil {
			s.counts.smsInlineErr.Add(1)
		}
	}
	return c.JSON(http.StatusCreated, CheckoutResponse{Order: o.ID, TotalCents: o.TotalCents})
}

// smsMessage is an outbox payload.
type smsMessage struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

// sendSMS is the outbox's sender: through the SMS guard, with the
// message's key, so that a resend after a timeout is absorbed by the
// provider.
func (s *Shop) sendSMS(ctx context.Context, m fallback.Message) error {
	var msg smsMessage
	if err := json.Unmarshal(m.Payload, &msg); err != nil {
		return fmt.Errorf("shop: sms %s: bad payload: %w", m.Key, err)
	}
	_, err := fallback.Call(ctx, s.smsG, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.sms.Send(ctx, msg.To, msg.Body, m.Key)
	})
	return err
}

// phone is a user's (made-up, stable) phone number.
func phone(user string) string {
	h := fnv.New64a()
	h.Write([]byte(user))
	return fmt.Sprintf("+8801%09d", h.Sum64()%1_000_000_000)
}

func confirmation(order string) string {
	return "11.11: your order " + order + " is confirmed. Thank you!"
}

// storeStatus maps a store error to a status and a problem type.
func storeStatus(err error) (int, string) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "not-found"
	case errors.Is(err, store.ErrBadInput):
		return http.StatusBadRequest, "bad-input"
	case errors.Is(err, store.ErrOutOfStock):
		return http.StatusConflict, "out-of-stock"
	case errors.Is(err, store.ErrIdempotencyConflict):
		return http.StatusUnprocessableEntity, "idempotency-conflict"
	case errors.Is(err, store.ErrInProgress):
		return http.StatusConflict, "checkout-in-progress"
	case errors.Is(err, store.ErrPriceChanged):
		return http.StatusConflict, "price-changed"
	case errors.Is(err, store.ErrCancelled):
		return http.StatusConflict, "checkout-cancelled"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, pool.ErrGone):
		return http.StatusServiceUnavailable, "gone"
	case errors.Is(err, fallback.ErrTimeout), errors.Is(err, fallback.ErrOpen), errors.Is(err, fallback.ErrFull):
		return http.StatusServiceUnavailable, "payment-unavailable"
	}
	return http.StatusBadGateway, "upstream"
}

// deals answers the flash deals: sheddable, and held per user and per
// address (a bot rotating user ids from one address is held by the
// address).
func (s *Shop) deals(c echo.Context) error {
	w, r := c.Response(), c.Request()
	if s.byUser != nil {
		now := time.Now()
		okUser := s.byUser.AllowContext(r.Context(), w.Header(), s.shedder.ClientKey(r), now)
		okAddr := s.byAddr.AllowContext(r.Context(), http.Header{}, "ip:"+s.shedder.ClientAddr(r).String(), now)
		if !okUser || !okAddr {
			s.counts.dealsRefused.Add(1)
			if w.Header().Get("Retry-After") == "" {
				w.Header().Set("Retry-After", "1")
			}
			problem(w, http.StatusTooManyRequests, "rate-limited", "too many flash-deal lookups from this client")
			return nil
		}
	}
	if err := s.pool.Do(r.Context(), s.cfg.Costs.Deal); err != nil {
		problem(w, http.StatusServiceUnavailable, "gone", err.Error())
		return nil
	}
	out := make([]Product, 0, store.FlashDeals)
	for id := int64(1); id <= store.FlashDeals; id++ {
		p, err := s.store.Product(r.Context(), id)
		if err != nil {
			return err
		}
		out = append(out, view(p))
	}
	return c.JSON(http.StatusOK, out)
}

// beacon takes an analytics beacon: sheddable, and cheap.
func (s *Shop) beacon(c echo.Context) error {
	w, r := c.Response(), c.Request()
	var v map[string]any
	if status, err := decode(w, r, &v); err != nil {
		problem(w, status, "bad-body", err.Error())
		return nil
	}
	if err := s.pool.Do(r.Context(), s.cfg.Costs.Beacon); err != nil {
		problem(w, http.StatusServiceUnavailable, "gone", err.Error())
		return nil
	}
	return c.NoContent(http.StatusNoContent)
}

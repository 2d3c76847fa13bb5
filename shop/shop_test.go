package shop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

func newShop(t *testing.T, p Protect) (*Shop, *httptest.Server) {
	t.Helper()
	return newShopWith(t, Config{Protect: p})
}

// newShopWith starts a shop on cfg, in a state directory of the test's.
func newShopWith(t *testing.T, cfg Config) (*Shop, *httptest.Server) {
	t.Helper()
	if cfg.DB == "" {
		cfg.StateDir = t.TempDir()
	}
	s, err := New(context.Background(), cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return s, srv
}

// TestShopLaw: the shop's embedded controller runs the model law — the
// only law — and /v1/state says so.
func TestShopLaw(t *testing.T) {
	_, srv := newShopWith(t, Config{})
	_, body := send(t, srv, call{method: "GET", path: "/v1/state"})
	assert.Contains(t, string(body), `"kind":"model"`, "the state says the law")
}

type call struct {
	method, path, body string
	header             map[string]string
}

func send(t *testing.T, srv *httptest.Server, c call) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
	require.NoError(t, err)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func TestBadInputWritesNothing(t *testing.T) {
	s, srv := newShop(t, Brownout)
	u := map[string]string{UserHeader: "u1"}
	big := `{"items":[` + strings.Repeat(`{"product":7,"qty":1},`, 2000) + `{"product":7,"qty":1}]}`
	for _, c := range []struct {
		call
		status int
	}{
		{call{"POST", "/api/checkout", `{"items":[{"product":7,"qty":1}]}`, nil}, 401},
		{call{"POST", "/api/cart", `{"product":7,"qty":1}`, nil}, 401},
		{call{"POST", "/api/checkout", `{"items":[{"product":7,"qty":1}`, u}, 400},
		{call{"POST", "/api/checkout", `{"items":[{"product":7,"qty":1}]}{}`, u}, 400},
		{call{"POST", "/api/checkout", `{"items":[{"product":7,"qty":1}],"coupon":"x"}`, u}, 400},
		{call{"POST", "/api/checkout", `{"items":[{"product":9999,"qty":1}]}`, u}, 404},
		{call{"POST", "/api/checkout", `{"items":[{"product":7,"qty":0}]}`, u}, 400},
		{call{"POST", "/api/checkout", `{"items":[]}`, u}, 400},
		{call{"POST", "/api/checkout", ``, u}, 400},
		{call{"POST", "/api/checkout", big, u}, 413},
		{call{"POST", "/api/cart", `{"product":"seven","qty":1}`, u}, 400},
		{call{"POST", "/api/cart", `{"product":9999,"qty":1}`, u}, 404},
		// A name twice, or in another case: a filter in front and the shop
		// would read different bodies.
		{call{"POST", "/api/cart", `{"product":1,"qty":1,"product":2}`, u}, 400},
		{call{"POST", "/api/cart", `{"Product":1,"qty":1}`, u}, 400},
		{call{"POST", "/api/checkout", `{"items":[{"product":7,"qty":1,"product":8}]}`, u}, 400},
		{call{"GET", "/api/products/abc", "", nil}, 400},
		{call{"GET", "/api/products/9999", "", nil}, 404},
		{call{"GET", "/nowhere", "", nil}, 404},
	} {
		resp, b := send(t, srv, c.call)
		assert.Equal(t, c.status, resp.StatusCode, "%s %s %.60s: %s", c.method, c.path, c.body, b)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), "%s %s", c.method, c.path)
		var p struct{ Detail string }
		assert.NoError(t, json.Unmarshal(b, &p))
		assert.NotEmpty(t, p.Detail, "a clear error")
	}
	rep, err := s.Report(context.Background(), time.Time{})
	require.NoError(t, err)
	assert.Zero(t, rep.Orders, "no order row")
	assert.Zero(t, rep.Queued, "no SMS written")
	st, err := s.store.Stats(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Orders)
	cart, err := s.store.Cart(context.Background(), "u1")
	require.NoError(t, err)
	assert.Empty(t, cart, "nothing in the cart")
}

func TestCheckoutOnceWithItsSMS(t *testing.T) {
	s, srv := newShop(t, Brownout)
	c := call{"POST", "/api/checkout", `{"items":[{"product":12,"qty":2}]}`, map[string]string{UserHeader: "u7", IdempotencyHeader: "k-1"}}
	resp, b := send(t, srv, c)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	var first CheckoutResponse
	require.NoError(t, json.Unmarshal(b, &first))
	resp, b = send(t, srv, c)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var again CheckoutResponse
	require.NoError(t, json.Unmarshal(b, &again))
	assert.Equal(t, first.Order, again.Order, "a retry with the key gets the same order")
	assert.True(t, again.Replayed)

	// The SMS goes out through the outbox, once.
	require.Eventually(t, func() bool { return s.SMS.Delivered("sms-"+first.Order) == 1 }, 10*time.Second, 20*time.Millisecond)
	rep, err := s.Report(context.Background(), time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), rep.Orders)
	assert.Equal(t, int64(1), rep.Delivered)
	assert.Zero(t, rep.Lost)
	assert.True(t, rep.StockOK)
}

func TestProductPage(t *testing.T) {
	s, srv := newShop(t, Brownout)
	resp, b := send(t, srv, call{"GET", "/api/products/7", "", map[string]string{UserHeader: "u1"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var pg Page
	require.NoError(t, json.Unmarshal(b, &pg))
	assert.Equal(t, int64(7), pg.Product.ID)
	assert.Len(t, pg.Sections, 3)
	assert.Equal(t, "present", pg.Sections["recommendations"].Status)
	assert.Empty(t, pg.Dimmed)
	assert.Equal(t, fmt.Sprint(s.ctl.State().Seq()), resp.Header.Get(GenerationHeader))

	// Pinned off, the section is dimmed for everyone, and said so.
	_, err := s.ctl.Pin("recommendations", 0, time.Minute, "test")
	require.NoError(t, err)
	_, b = send(t, srv, call{"GET", "/api/products/7", "", map[string]string{UserHeader: "u1"}})
	require.NoError(t, json.Unmarshal(b, &pg))
	assert.Equal(t, []string{"recommendations"}, pg.Dimmed)
	assert.Equal(t, "dimmed", pg.Sections["recommendations"].Status)

	// Anonymous browsing works on a session cookie; the storefront shows
	// the same page as HTML, operator text escaped.
	resp, b = send(t, srv, call{"GET", "/?id=7", "", nil})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Set-Cookie"), sessionCookie)
	assert.Contains(t, string(b), "Switched off for now")
}

func TestBotHeldByItsAddress(t *testing.T) {
	// Behind a load balancer on this machine (the test client plays it).
	_, srv := newShopWith(t, Config{Protect: Brownout, TrustedProxies: LocalProxies()})
	ok := 0
	for i := range 40 {
		resp, _ := send(t, srv, call{"GET", "/api/deals/flash", "", map[string]string{UserHeader: fmt.Sprintf("bot-%d", i), "X-Forwarded-For": "198.51.100.66"}})
		if resp.StatusCode == http.StatusOK {
			ok++
		} else {
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		}
	}
	assert.LessOrEqual(t, ok, 10, "rotating user ids from one address: held by the address")
	for i := range 20 { // ordinary users, each from its own address, are not refused
		resp, _ := send(t, srv, call{"GET", "/api/deals/flash", "", map[string]string{UserHeader: fmt.Sprintf("u-%d", i), "X-Forwarded-For": fmt.Sprintf("10.0.0.%d", i+1)}})
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

func TestNoneSendsInline(t *testing.T) {
	s, srv := newShop(t, None)
	resp, b := send(t, srv, call{"POST", "/api/checkout", `{"items":[{"product":12,"qty":1}]}`, map[string]string{UserHeader: "u7"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	var o CheckoutResponse
	require.NoError(t, json.Unmarshal(b, &o))
	assert.Equal(t, 1, s.SMS.Delivered("sms-"+o.Order), "sent in the request: delivered before the answer")
	assert.Nil(t, s.Controller())
}

// TestEmbeddedAPI: the shop mounts the controller's API package, as
// brownoutd does: OFREP answers with the in-process provider's bucket,
// the state reads, and writes need a token (the test's server is not
// declared loopback-only).
func TestEmbeddedAPI(t *testing.T) {
	_, srv := newShop(t, Brownout)
	resp, err := http.Post(srv.URL+"/ofrep/v1/evaluate/flags/recommendations", "application/json", strings.NewReader(`{"context":{"targetingKey":"u1"}}`))
	require.NoError(t, err)
	var ev map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ev))
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, true, ev["value"], "full brightness")
	resp, err = http.Get(srv.URL + "/v1/state")
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	assert.Len(t, st["features"], 3)
	resp, err = http.Post(srv.URL+"/v1/freeze", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 403, resp.StatusCode)
}

// TestFleetMode: with Brownoutd set, the shop follows the daemon's levels
// (an operator's override there dims the section here) and keeps serving
// with the last-known levels when the daemon goes away.
func TestFleetMode(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}, {Name: "gallery", Rank: 2}},
	})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl})
	require.NoError(t, err)
	daemon := httptest.NewServer(a.Handler())
	s, err := New(context.Background(), Config{Protect: Brownout, StateDir: t.TempDir(), Brownoutd: []string{daemon.URL}})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer func() {
		srv.Close()
		s.Close()
	}()
	st, err := ctl.Pin("recommendations", 0, time.Hour, "fleet test")
	require.NoError(t, err)
	a.Publish(st)
	page := func() Page {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/products/3", nil)
		req.Header.Set(UserHeader, "u1")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var pg Page
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&pg))
		return pg
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if len(page().Dimmed) == 1 {
			break
		}
	}
	assert.Equal(t, []string{"recommendations"}, page().Dimmed, "the daemon's override, evaluated here")
	resp, err := http.Get(srv.URL + "/v1/state")
	require.NoError(t, err)
	var fs brownout.FleetState
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&fs))
	resp.Body.Close()
	assert.Equal(t, daemon.URL, fs.Daemon, "the shop's state in fleet mode")
	require.NotEmpty(t, fs.Sources)
	assert.True(t, fs.Sources[0].OK, "following the daemon's stream")
	a.Shutdown()
	daemon.Close()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && s.Remote().Connected(); time.Sleep(20 * time.Millisecond) {
	}
	assert.False(t, s.Remote().Connected())
	assert.Equal(t, []string{"recommendations"}, page().Dimmed, "last-known levels while the daemon is away")
}

// TestFleetModeService: with Service set, the shop's stream and pushes
// name its service to the daemon (X-Brownout-Service), and its
// storefront's page evaluates at the service's base URL.
func TestFleetModeService(t *testing.T) {
	a := newAPI(t, nil).Handler()
	var mu sync.Mutex
	seen := map[string]string{} // method and path → the service named
	d := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.Header.Get("X-Brownout-Service")
		mu.Unlock()
		a.ServeHTTP(w, r)
	}))
	t.Cleanup(d.Close)
	s, srv := newShopWith(t, Config{Protect: Brownout, Brownoutd: []string{d.URL}, Service: "shop-eu"})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, pushed := seen["POST /v1/signals"]
		return s.Remote().Connected() && pushed
	}, 10*time.Second, 20*time.Millisecond, "the shop follows the daemon and pushes to it")
	mu.Lock()
	assert.Equal(t, "shop-eu", seen["GET /v1/stream"], "the stream names the service")
	assert.Equal(t, "shop-eu", seen["POST /v1/signals"], "the pushes name the service")
	mu.Unlock()
	_, b := send(t, srv, call{"GET", "/", "", map[string]string{UserHeader: "u2"}})
	assert.Contains(t, string(b), fmt.Sprintf(`data-ofrep="%s/services/shop-eu" data-targeting-key="u2"`, d.URL),
		"a browser evaluates at the service's path: its preflight carries no header")
}

// TestDefaultsTrustNoProxy: on the defaults a client connecting directly
// over loopback cannot escape the flash deal's per-address limit (burst
// 10) by rotating X-Forwarded-For: no proxy is trusted unless configured.
func TestDefaultsTrustNoProxy(t *testing.T) {
	_, srv := newShop(t, Brownout)
	const lookups = 15
	ok := 0
	for i := range lookups {
		resp, _ := send(t, srv, call{"GET", "/api/deals/flash", "", map[string]string{
			UserHeader: fmt.Sprintf("u-%d", i), "X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i+1)}})
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	t.Logf("%d of %d lookups served with rotating forwarded addresses", ok, lookups)
	assert.LessOrEqual(t, ok, 11, "held by the connection's own address (burst 10, and at most one token refilled)")
}

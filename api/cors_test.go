package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

// shopOrigin is the page's origin the tests allow.
const shopOrigin = "http://127.0.0.1:8081"

// corsDo sends one request and returns its answer with the body read (a
// stream's connection dropped after its headers).
func corsDo(t *testing.T, base, method, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hostile.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// preflightOf is what a browser sends before a request it may not send
// without asking: OPTIONS with the method and headers it wants.
func preflightOf(origin, method, headers string) []string {
	return []string{"Origin", origin, "Access-Control-Request-Method", method, "Access-Control-Request-Headers", headers,
		"Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors"}
}

// corsRoutes are the routes that answer allowed origins, with what the
// OFREP web provider asks for on each.
var corsRoutes = []struct {
	method, path, body, headers string
}{
	{"POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u1"}}`, "content-type,if-none-match"},
	{"POST", "/ofrep/v1/evaluate/flags/recommendations", `{"context":{"targetingKey":"u1"}}`, "content-type"},
	{"GET", "/ofrep/v1/events", "", "last-event-id"},
}

// granted reports whether resp grants CORS to origin.
func granted(resp *http.Response, origin string) bool {
	return resp.Header.Get("Access-Control-Allow-Origin") == origin
}

// noGrant fails unless resp carries no Access-Control-* header at all.
func noGrant(t *testing.T, resp *http.Response, what string) {
	t.Helper()
	for k := range resp.Header {
		assert.False(t, strings.HasPrefix(k, "Access-Control-"), "%s: %s: %q", what, k, resp.Header.Get(k))
	}
}

// TestCORSOffByDefault: with no origin configured, a preflight on OFREP's
// routes is refused (403 problem+json, no Access-Control-* header), an
// evaluation a page sends anyway carries no grant (the browser keeps the
// answer from the page), and every answer varies by Origin; an OPTIONS
// that is no preflight says what the route takes.
func TestCORSOffByDefault(t *testing.T) {
	f := newFixture(t, Config{})
	for _, rt := range corsRoutes {
		resp, body := corsDo(t, f.srv.URL, "OPTIONS", rt.path, "", preflightOf(shopOrigin, rt.method, rt.headers)...)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "preflight %s: %s", rt.path, body)
		assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), rt.path)
		assert.Contains(t, body, "--cors-origin", rt.path)
		noGrant(t, resp, "preflight "+rt.path)
		assert.Contains(t, resp.Header.Values("Vary"), "Origin", rt.path)

		resp, _ = corsDo(t, f.srv.URL, rt.method, rt.path, rt.body, "Origin", shopOrigin)
		assert.Equal(t, http.StatusOK, resp.StatusCode, rt.path)
		noGrant(t, resp, rt.path)
		assert.Contains(t, resp.Header.Values("Vary"), "Origin", rt.path)

		resp, _ = corsDo(t, f.srv.URL, "OPTIONS", rt.path, "")
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, "OPTIONS %s without a preflight", rt.path)
		assert.Equal(t, "OPTIONS, "+rt.method, resp.Header.Get("Allow"), rt.path)
	}
}

// TestCORSGrantsEvaluations: an allowed origin gets, on each of OFREP's
// routes, a preflight's grant (204, its method, the headers the web
// provider sends, a max age) and answers it may read, the bulk ETag
// exposed and a 304 granted too; another origin gets neither, nor a
// preflight for another method.
func TestCORSGrantsEvaluations(t *testing.T) {
	f := newFixture(t, Config{CORSOrigins: []string{shopOrigin, "https://Shop.Example:443"}})
	for _, origin := range []string{shopOrigin, "https://shop.example"} {
		for _, rt := range corsRoutes {
			resp, body := corsDo(t, f.srv.URL, "OPTIONS", rt.path, "", preflightOf(origin, rt.method, rt.headers)...)
			require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s %s: %s", origin, rt.path, body)
			assert.True(t, granted(resp, origin), "%s %s", origin, rt.path)
			assert.Equal(t, rt.method, resp.Header.Get("Access-Control-Allow-Methods"), rt.path)
			for _, h := range strings.Split(rt.headers, ",") {
				assert.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), h, rt.path)
			}
			assert.Equal(t, "600", resp.Header.Get("Access-Control-Max-Age"), rt.path)
			assert.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"), "never credentials")
			assert.Subset(t, resp.Header.Values("Vary"), []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"})

			resp, _ = corsDo(t, f.srv.URL, rt.method, rt.path, rt.body, "Origin", origin)
			assert.Equal(t, http.StatusOK, resp.StatusCode, rt.path)
			assert.True(t, granted(resp, origin), "%s %s", origin, rt.path)
			assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "Retry-After", rt.path)
			assert.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"), "never credentials")
			assert.Contains(t, resp.Header.Values("Vary"), "Origin", rt.path)
		}
	}
	bulk := corsRoutes[0]
	resp, _ := corsDo(t, f.srv.URL, "POST", bulk.path, bulk.body, "Origin", shopOrigin)
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "ETag")
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	resp, _ = corsDo(t, f.srv.URL, "POST", bulk.path, bulk.body, "Origin", shopOrigin, "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	assert.True(t, granted(resp, shopOrigin), "a 304 is granted too")

	for _, other := range []string{"http://127.0.0.1:8082", "https://127.0.0.1:8081", "http://localhost:8081", "null", "https://evil.example"} {
		resp, _ := corsDo(t, f.srv.URL, "OPTIONS", bulk.path, "", preflightOf(other, "POST", "content-type")...)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, other)
		noGrant(t, resp, other)
		resp, _ = corsDo(t, f.srv.URL, "POST", bulk.path, bulk.body, "Origin", other)
		noGrant(t, resp, other)
	}
	resp, body := corsDo(t, f.srv.URL, "OPTIONS", bulk.path, "", preflightOf(shopOrigin, "PUT", "content-type")...)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "another method: %s", body)
	noGrant(t, resp, "another method")
}

// TestCORSNeverGrantsOperatorRoutes: from an allowed origin, a preflight
// for an operator's write, the push route, the state and the other reads
// gets no grant (405, as before: these routes take no OPTIONS), and the
// write sent anyway is refused on a tokenless loopback listener and
// changes nothing.
func TestCORSNeverGrantsOperatorRoutes(t *testing.T) {
	f := newFixture(t, Config{Loopback: true, CORSOrigins: []string{shopOrigin}, Push: http.NotFoundHandler()})
	gen := f.ctl.State().Generation
	paths := []struct{ method, path string }{{"GET", "/v1/state"}, {"GET", "/v1/history"}, {"GET", "/v1/events"},
		{"GET", "/v1/stream"}, {"POST", "/v1/stream/token"}, {"POST", "/v1/signals"}}
	for _, w := range writes {
		paths = append(paths, struct{ method, path string }{w.method, w.path})
	}
	for _, p := range paths {
		resp, _ := corsDo(t, f.srv.URL, "OPTIONS", p.path, "", preflightOf(shopOrigin, p.method, "content-type")...)
		assert.GreaterOrEqual(t, resp.StatusCode, 400, "preflight %s %s", p.method, p.path)
		noGrant(t, resp, "preflight "+p.method+" "+p.path)
	}
	for _, w := range writes {
		resp, body := corsDo(t, f.srv.URL, w.method, w.path, w.body, "Origin", shopOrigin, "Sec-Fetch-Site", "same-site")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s: %s", w.method, w.path, body)
		assert.Contains(t, body, "cross-site", w.path)
		noGrant(t, resp, w.method+" "+w.path)
	}
	assert.Equal(t, gen, f.ctl.State().Generation, "nothing changed")
	assert.False(t, f.api.Frozen())
	resp, _ := corsDo(t, f.srv.URL, "GET", "/v1/state", "", "Origin", shopOrigin, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "the state is no evaluation")
	noGrant(t, resp, "the state")
}

// TestCORSOnLoopback: on a loopback listener without tokens, a page of an
// allowed origin evaluates and follows OFREP's stream (a page of
// another local port is same-site, which readRefusal refuses to any
// other page); the same page under a rebound name is refused, and so is
// a page of an origin not allowed.
func TestCORSOnLoopback(t *testing.T) {
	f := newFixture(t, Config{Loopback: true, CORSOrigins: []string{shopOrigin}})
	_, port, _ := net.SplitHostPort(hostile.Addr(t, f.srv.URL))
	page := []string{"Origin", shopOrigin, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors"}
	for _, rt := range corsRoutes {
		resp, body := corsDo(t, f.srv.URL, rt.method, rt.path, rt.body, page...)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", rt.path, body)
		assert.True(t, granted(resp, shopOrigin), rt.path)

		resp, body = corsDo(t, f.srv.URL, rt.method, rt.path, rt.body, append(page, "Host", "evil.example:"+port)...)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "rebound %s: %s", rt.path, body)
		assert.Contains(t, body, "errorCode", "OFREP's shape")

		resp, body = corsDo(t, f.srv.URL, rt.method, rt.path, rt.body, "Origin", "http://127.0.0.1:8082", "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "cors")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "another port's page %s: %s", rt.path, body)
		noGrant(t, resp, "another port's page")
	}
}

// TestSetCORSOrigins: a reload replaces the origins; a bad one is an
// error that changes nothing, as New refuses one.
func TestSetCORSOrigins(t *testing.T) {
	f := newFixture(t, Config{CORSOrigins: []string{shopOrigin}})
	bulk := corsRoutes[0]
	check := func(origin string, want bool) {
		t.Helper()
		resp, _ := corsDo(t, f.srv.URL, "POST", bulk.path, bulk.body, "Origin", origin)
		assert.Equal(t, want, granted(resp, origin), origin)
	}
	check(shopOrigin, true)
	require.Error(t, f.api.SetCORSOrigins([]string{"https://shop.example", "https://shop.example/"}))
	check(shopOrigin, true)
	require.NoError(t, f.api.SetCORSOrigins([]string{"https://shop.example"}))
	check(shopOrigin, false)
	check("https://shop.example", true)
	require.NoError(t, f.api.SetCORSOrigins(nil))
	check("https://shop.example", false)

	_, err := New(Config{Controller: newController(t), CORSOrigins: []string{"*"}})
	require.ErrorContains(t, err, "wildcard")
}

// TestParseOrigin: an origin is written as a browser sends it in Origin;
// anything else is refused with what is wrong.
func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8081":       "http://127.0.0.1:8081",
		"https://shop.example":        "https://shop.example",
		"HTTPS://Shop.EXAMPLE":        "https://shop.example",
		"https://shop.example:443":    "https://shop.example",
		"http://shop.example:80":      "http://shop.example",
		"http://shop.example:443":     "http://shop.example:443",
		"https://shop.example:8443":   "https://shop.example:8443",
		"http://localhost:3000":       "http://localhost:3000",
		"http://[::1]:8080":           "http://[::1]:8080",
		"http://[0:0:0:0:0:0:0:1]":    "http://[::1]",
		"https://xn--bcher-kva.test":  "https://xn--bcher-kva.test",
		"http://a-b.c-d.example:1":    "http://a-b.c-d.example:1",
		"http://shop.example:65535":   "http://shop.example:65535",
		"https://10.0.0.5":            "https://10.0.0.5",
		"http://[2001:DB8::1]:9":      "http://[2001:db8::1]:9",
		"https://www.shop.example.bd": "https://www.shop.example.bd",
	} {
		got, err := ParseOrigin(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for in, why := range map[string]string{
		"":                                   "empty",
		"*":                                  "wildcard",
		"null":                               "opaque",
		"https://*.shop.example":             "wildcard",
		"shop.example":                       "http:// or https://",
		"127.0.0.1:8081":                     "scheme",
		"ftp://shop.example":                 "http:// or https://",
		"file:///tmp/x":                      "http:// or https://",
		"https://shop.example/":              "a path",
		"https://shop.example/shop":          "a path",
		"https://shop.example?q=1":           "a query",
		"https://shop.example?":              "a query",
		"https://shop.example#top":           "a fragment",
		"https://shop.example#":              "a fragment",
		"https://u:p@shop.example":           "user information",
		"https://shop.example:0":             "port",
		"https://shop.example:65536":         "port",
		"https://shop.example:08":            "port",
		"https://shop.example:":              "empty port",
		"https://shop.example:x":             "invalid port",
		" https://shop.example":              "spaces",
		"https://shop.example.":              "trailing dot",
		"https://bücher.test":                "xn--",
		"https://-shop.example":              "not a DNS name",
		"http://127.1":                       "four decimal numbers",
		"http://0x7f.0.0.1":                  "four decimal numbers",
		"http://[fe80::1%25eth0]":            "zone",
		"http://[127.0.0.1]":                 "IP-literal",
		"https:shop.example":                 "no host",
		"http://:8080":                       "not a DNS name",
		"http://" + strings.Repeat("a", 300): "bytes",
	} {
		_, err := ParseOrigin(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), why, in)
			assert.True(t, strings.HasPrefix(err.Error(), "api: cors origin "), err.Error())
		}
	}
}

// FuzzParseOrigin: whatever the input, ParseOrigin never panics, and what
// it accepts is an origin as a browser writes it: http or https, a host,
// no path, query or fragment, and ParseOrigin of it is itself.
func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8081", "HTTPS://Shop.Example:443", "http://[::1]", "https://shop.example/", "*", "null", "http://127.1", "http://[fe80::1%25eth0]", "https://xn--bcher-kva.test"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseOrigin(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "api: cors origin ") {
				t.Fatalf("%q: error without its prefix: %v", s, err)
			}
			return
		}
		u, err := url.Parse(got)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			t.Fatalf("%q → %q: not an origin (%v)", s, got, err)
		}
		if again, err := ParseOrigin(got); err != nil || again != got {
			t.Fatalf("%q → %q → %q, %v: not a fixed point", s, got, again, err)
		}
		if got != strings.ToLower(got) {
			t.Fatalf("%q → %q: not in lower case", s, got)
		}
	})
}

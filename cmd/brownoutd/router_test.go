package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/service"
	"github.com/brownout/brownout/signals"
)

const routerConfig = `listen: 127.0.0.1:8080
services:
  - {name: shop, features: [{name: recommendations}]}
  - {name: search, features: [{name: suggestions}]}
`

// serveRoute sends one request to rt as a client on this machine would,
// its context ended after 20 ms (a stream's handler returns then).
func serveRoute(rt http.Handler, method, path, svc string) *httptest.ResponseRecorder {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := (&http.Request{Method: method, URL: &url.URL{Path: path}, Host: "127.0.0.1:8080", Header: http.Header{},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody}).WithContext(ctx)
	r.RequestURI = path
	if svc != "" {
		r.Header.Set(service.Header, svc)
	}
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, r)
	return w
}

// TestRouteNamesTheService: which service answers, by path and by
// header, and what a request naming none, an unknown one or two gets.
func TestRouteNamesTheService(t *testing.T) {
	r := newRig(t, routerConfig, nil)
	for _, tc := range []struct {
		method, path, header string
		status               int
		service, problem     string
	}{
		{"GET", "/services/shop/v1/state", "", 200, "shop", ""},
		{"GET", "/v1/state", "search", 200, "search", ""},
		{"GET", "/services/search/v1/state", "search", 200, "search", ""},
		{"GET", "/services/search/v1/state", "shop", 400, "", "urn:brownout:api:service-mismatch"},
		{"GET", "/services/cart/v1/state", "", 404, "", "urn:brownout:api:unknown-service"},
		{"GET", "/v1/state", "cart", 404, "", "urn:brownout:api:unknown-service"},
		{"GET", "/v1/history", "", 400, "", "urn:brownout:api:service-required"},
		{"PUT", "/v1/shadow", "", 400, "", "urn:brownout:api:service-required"},
		{"GET", "/services/shop", "", 301, "", ""},
		{"GET", "/services/", "", 404, "", "urn:brownout:api:unknown-service"},
		{"GET", "/services/shop/nope", "", 404, "", ""},
	} {
		w := serveRoute(r.rt, tc.method, tc.path, tc.header)
		require.Equal(t, tc.status, w.Code, "%s %s (%s): %s", tc.method, tc.path, tc.header, w.Body.String())
		var m map[string]any
		if tc.service != "" || tc.problem != "" {
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), "%s %s", tc.method, tc.path)
		}
		if tc.service != "" {
			assert.Equal(t, tc.service, m["service"], "%s %s (%s)", tc.method, tc.path, tc.header)
		}
		if tc.problem != "" {
			assert.Equal(t, tc.problem, m["type"], "%s %s (%s)", tc.method, tc.path, tc.header)
			assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
		}
	}
	w := serveRoute(r.rt, "GET", "/v1/state", "")
	var list servicesJSON
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list))
	require.Len(t, list.Services, 2)
	assert.Equal(t, []string{"shop", "search"}, []string{list.Services[0].Name, list.Services[1].Name})
	assert.Equal(t, "/services/shop", list.Services[0].Base)
	assert.Equal(t, "search", list.Services[1].State.Service)
}

// FuzzRoute: whatever the path, the header and the method, the router
// answers without a server error, names the service it was given (or
// refuses with a problem that says why), and never answers as another
// service than the one the request named.
func FuzzRoute(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/services/shop/v1/state", ""}, {"POST", "/v1/signals", "search"}, {"GET", "/services/sh%6Fp/", ""},
		{"POST", "/ofrep/v1/evaluate/flags/x", ""}, {"GET", "/services//v1/state", "shop"}, {"GET", "/services/../v1/state", ""},
		{"OPTIONS", "/services/search/ofrep/v1/events", ""}, {"DELETE", "/v1/features/a/override", "Shop"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	r := newRig(f, routerConfig, nil)
	f.Fuzz(func(t *testing.T, method, path, svc string) {
		if !validMethod(method) || strings.ContainsAny(svc, "\r\n\x00") {
			return
		}
		w := serveRoute(r.rt, method, path, svc)
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q (%q): %d %s", method, path, svc, w.Code, w.Body.String())
		}
		if !strings.Contains(w.Header().Get("Content-Type"), "json") || w.Code != http.StatusOK {
			return
		}
		var m map[string]any
		if json.Unmarshal(w.Body.Bytes(), &m) != nil {
			return
		}
		if got, ok := m["service"].(string); ok {
			name, _, _ := strings.Cut(strings.TrimPrefix(path, "/services/"), "/")
			if svc != "" && got != svc || strings.HasPrefix(path, "/services/") && got != name {
				t.Fatalf("%s %q (%q) answered as service %q", method, path, svc, got)
			}
		}
	})
}

// validMethod reports whether m is a token net/http would take as a
// method.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, c) {
			return false
		}
	}
	return true
}

// TestRouteRefusesAmbiguousRequests: a request that names its service
// in two X-Brownout-Service headers is refused (400) whatever they say,
// rather than routed by the first (a proxy in front that checks the last
// one, or all, would have let another service's request through); so is
// one to a daemon of one service that names a service in any of them. A
// path with dot segments under a service's prefix is sent to its cleaned
// path, prefix and all (the service's mux, under the prefix stripped,
// redirected /services/shop/../search/v1/state to /search/v1/state, a
// route of nothing).
func TestRouteRefusesAmbiguousRequests(t *testing.T) {
	r := newRig(t, routerConfig, nil)
	req := func(method, path string, names ...string) *httptest.ResponseRecorder {
		rq := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, nil)
		for _, n := range names {
			rq.Header.Add(service.Header, n)
		}
		w := httptest.NewRecorder()
		r.rt.ServeHTTP(w, rq)
		return w
	}
	for _, tc := range []struct {
		path  string
		names []string
	}{
		{"/v1/state", []string{"shop", "search"}},
		{"/v1/state", []string{"shop", "shop"}},
		{"/v1/state", []string{"", "search"}},
		{"/services/shop/v1/state", []string{"shop", "search"}},
		{"/services/shop/v1/state", []string{"", "shop"}},
	} {
		w := req("GET", tc.path, tc.names...)
		assert.Equal(t, 400, w.Code, "%s %q: %s", tc.path, tc.names, w.Body.String())
		assert.Contains(t, w.Body.String(), "urn:brownout:api:service-mismatch", "%s %q", tc.path, tc.names)
	}
	w := req("POST", "/ofrep/v1/evaluate/flags/x", "shop", "search")
	assert.Equal(t, 400, w.Code)
	assert.Contains(t, w.Body.String(), `"errorCode":"GENERAL"`, "OFREP's error shape")

	one := oneService(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	for _, names := range [][]string{{"shop"}, {"", "shop"}, {"shop", ""}} {
		rq := httptest.NewRequest("GET", "http://127.0.0.1:8080/v1/state", nil)
		for _, n := range names {
			rq.Header.Add(service.Header, n)
		}
		w := httptest.NewRecorder()
		one.ServeHTTP(w, rq)
		assert.Equal(t, 404, w.Code, "a daemon of one service, %q", names)
	}

	for _, tc := range []struct{ method, path, to string }{
		{"GET", "/services/shop/../search/v1/state", "/services/search/v1/state"},
		{"PUT", "/services/shop/./v1/shadow", "/services/shop/v1/shadow"},
		{"GET", "/services/shop//v1/state?x=1", "/services/shop/v1/state?x=1"},
		{"GET", "/services/shop/v1/../", "/services/shop/"},
	} {
		w := req(tc.method, tc.path)
		require.Contains(t, []int{301, 307, 308}, w.Code, "%s %s: %s", tc.method, tc.path, w.Body.String())
		assert.Equal(t, tc.to, w.Header().Get("Location"), "%s %s", tc.method, tc.path)
	}
}

// TestUnroutedAnswersAreProblems: what no route takes — an unknown path,
// a method a route does not take, a service's prefix on a daemon of one
// service — is answered as the API's other errors are: problem+json, or
// OFREP's error shape under /ofrep/; a 405 says the methods it takes.
func TestUnroutedAnswersAreProblems(t *testing.T) {
	ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}}, Features: []dimmer.Feature{{Name: "recs"}}})
	require.NoError(t, err)
	a, err := api.New(api.Config{Controller: ctl, Loopback: true})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	e := newEcho(a, prometheus.NewRegistry())
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
		ofrep        bool
		says         string
	}{
		{"POST", "/v1/state", 405, "GET, HEAD", false, "method-not-allowed"},
		{"OPTIONS", "/v1/state", 405, "GET, HEAD", false, "method-not-allowed"},
		{"GET", "/v1/nope", 404, "", false, "not-found"},
		{"GET", "/ofrep/v1/evaluate/flags/recs", 405, "POST, OPTIONS", true, "this route takes POST"},
		{"POST", "/ofrep/v1/evaluate/flags/", 404, "", true, "no flag key"},
		{"GET", "/ofrep/v1/nope", 404, "", true, "no route"},
		{"GET", "/services/shop/v1/state", 404, "", false, "this daemon serves one service"},
		{"POST", "/services/shop/ofrep/v1/evaluate/flags/recs", 404, "", true, "this daemon serves one service"},
	} {
		req := httptest.NewRequest(tc.method, "http://127.0.0.1:8080"+tc.path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		what := tc.method + " " + tc.path
		assert.Equal(t, tc.status, w.Code, "%s: %s", what, w.Body.String())
		assert.Equal(t, tc.allow, w.Header().Get("Allow"), what)
		if tc.ofrep {
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"), what)
			assert.Contains(t, w.Body.String(), `"errorCode":"GENERAL"`, what)
		} else {
			assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"), what)
		}
		assert.Contains(t, w.Body.String(), tc.says, what)
	}
}

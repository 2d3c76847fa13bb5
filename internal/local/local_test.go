package local

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

// request is method to target on a listener at 127.0.0.1:8081 (or at
// local, when set) with headers as name, value pairs.
func request(method, host string, local string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, "http://"+host+"/api/demo/slowdown", strings.NewReader("{}"))
	if local == "" {
		local = "127.0.0.1:8081"
	}
	la, _ := net.ResolveTCPAddr("tcp", local)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, la))
	if method != "GET" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			r.Header.Del(hdr[i])
			continue
		}
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

// TestCheck: what a browser sends for another site, a rebound name or a
// proxy is refused, with the type a client branches on; curl, a page of
// the server's own and a user's navigation are local.
func TestCheck(t *testing.T) {
	const self = "127.0.0.1:8081"
	for _, tc := range []struct {
		name, method, host string
		local              string
		hdr                []string
		want               string // "" local
	}{
		{"curl", "PUT", self, "", nil, ""},
		{"curl read", "GET", self, "", nil, ""},
		{"own page", "PUT", self, "", []string{"Origin", "http://" + self, "Sec-Fetch-Site", "same-origin"}, ""},
		{"typed by the user", "GET", self, "", []string{"Sec-Fetch-Site", "none"}, ""},
		{"localhost", "PUT", "localhost:8081", "", []string{"Origin", "http://localhost:8081"}, ""},
		{"IPv6 loopback", "PUT", "[::1]:8081", "", nil, ""},
		{"the listener's own address", "PUT", "10.0.0.7:8081", "10.0.0.7:8081", nil, ""},
		{"a charset", "PUT", self, "", []string{"Content-Type", "application/json; charset=utf-8"}, ""},
		{"a navigation from another site", "GET", self, "", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}, ""},
		{"cross-site write posing as a navigation", "PUT", self, "", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate"}, "cross-site"},
		{"cross-site fetch", "GET", self, "", []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors"}, "cross-site"},
		{"foreign Origin", "PUT", self, "", []string{"Origin", "https://evil.example"}, "cross-site"},
		{"opaque Origin", "PUT", self, "", []string{"Origin", "null"}, "cross-site"},
		{"another local port", "PUT", self, "", []string{"Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"}, "cross-site"},
		{"rebound name", "GET", "evil.example:8081", "", nil, "cross-site"},
		{"another address of the machine", "PUT", "10.0.0.8:8081", "10.0.0.7:8081", nil, "cross-site"},
		{"through a proxy", "GET", self, "", []string{"X-Forwarded-For", "203.0.113.7"}, "proxied"},
		{"form post", "PUT", self, "", []string{"Content-Type", "application/x-www-form-urlencoded"}, "json-required"},
		{"untyped write", "POST", self, "", []string{"Content-Type", ""}, "json-required"},
	} {
		why := Check(request(tc.method, tc.host, tc.local, tc.hdr...))
		if tc.want == "" {
			assert.Nil(t, why, tc.name)
			continue
		}
		if assert.NotNil(t, why, tc.name) {
			assert.Equal(t, tc.want, why.Type, tc.name)
		}
	}
}

// TestOnlyRefusesTheHostileSuite: every attack of the hostile suite on a
// write gets the server's 403, and the handler never runs.
func TestOnlyRefusesTheHostileSuite(t *testing.T) {
	ran := 0
	h := Only(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran++ }),
		func(w http.ResponseWriter, status int, typ, detail string) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			w.Write([]byte(`{"type":"urn:test:` + typ + `","status":403,"detail":"` + typ + `"}`))
		})
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(hostile.Addr(t, srv.URL))
	for _, a := range hostile.Attacks(port) {
		resp, err := hostile.Client().Do(a.Request(t, "PUT", srv.URL+"/api/demo/slowdown", `{"factor":50}`))
		require.NoError(t, err)
		hostile.RequireProblem(t, resp, http.StatusForbidden, a.Name)
	}
	assert.Zero(t, ran)
	resp, err := hostile.Client().Do(hostile.Attack{Name: "curl"}.Request(t, "PUT", srv.URL+"/api/demo/slowdown", `{"factor":2}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1, ran)
}

// FuzzCheck: whatever the headers say, Check never panics, and what it
// takes as local has a local Host.
func FuzzCheck(f *testing.F) {
	f.Add("PUT", "127.0.0.1:8081", "http://127.0.0.1:8081", "same-origin", "application/json")
	f.Add("GET", "evil.example", "null", "cross-site", "")
	f.Add("POST", "[::1]", "https://[::1]:443", "none", "text/plain")
	f.Fuzz(func(t *testing.T, method, host, origin, site, ct string) {
		r := &http.Request{Method: method, Host: host, Header: http.Header{}}
		r = r.WithContext(context.Background())
		r.Header.Set("Origin", origin)
		r.Header.Set("Sec-Fetch-Site", site)
		r.Header.Set("Content-Type", ct)
		if Check(r) == nil && !Host(r) {
			t.Fatalf("took Host %q as local", host)
		}
	})
}

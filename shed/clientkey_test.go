package shed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// testProxies: a private network, a documentation IPv6 /48 and loopback.
var testProxies = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
	netip.MustParsePrefix("127.0.0.1/32"),
}

func TestParseProxies(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "", want: nil},
		{in: "10.0.0.0/8,127.0.0.1", want: []string{"10.0.0.0/8", "127.0.0.1/32"}},
		{in: " 10.1.2.3/8 , ::1 ,, fd00::/8,", want: []string{"10.0.0.0/8", "::1/128", "fd00::/8"}},
		{in: "::ffff:10.0.0.0/104", want: []string{"10.0.0.0/8"}},
		{in: "::ffff:127.0.0.1", want: []string{"127.0.0.1/32"}},
		{in: "10.0.0.0/33", err: `entry 1, "10.0.0.0/33", is not an IP address or CIDR prefix`},
		{in: "10.0.0.0/8, proxy.internal", err: `entry 2, "proxy.internal"`},
		{in: "10.0.0.0/8,1.2.3", err: `entry 2, "1.2.3"`},
		{in: "fe80::1%eth0", err: "IPv6 zone"},
		{in: "fe80::/10%eth0", err: `entry 1`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseProxies(tc.in)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "shed: trusted proxies: ")
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			assert.Equal(t, tc.want, s)
		})
	}
}

func TestNewRejectsBadProxyConfig(t *testing.T) {
	_, err := New(Config{TrustedProxies: []netip.Prefix{testProxies[0], {}}})
	assert.ErrorContains(t, err, "trusted proxies: entry 2")
	_, err = New(Config{TrustedProxies: testProxies, ProxyHeader: "X Forwarded For"})
	assert.ErrorContains(t, err, "not a header name")
	s, err := New(Config{TrustedProxies: testProxies, ProxyHeader: "x-real-ip"})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Real-Ip", "203.0.113.7")
	assert.Equal(t, "ip:203.0.113.7", s.ClientKey(r), "a header a proxy sets to one address")
}

// The client's address behind proxies: the key of rate limits and cascade.
func TestClientAddr(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remote    string
		forwarded bool // ProxyHeader "Forwarded", else X-Forwarded-For
		xff, fwd  []string
		want      string // the key
	}{
		// Who may speak.
		{name: "no header", remote: "10.0.0.1:1234", want: "ip:10.0.0.1"},
		{name: "spoofed XFF from an untrusted peer", remote: "203.0.113.9:1234",
			xff: []string{"10.0.0.2, 198.51.100.1"}, want: "ip:203.0.113.9"},
		{name: "spoofed Forwarded from an untrusted peer", remote: "203.0.113.9:1234", forwarded: true,
			fwd: []string{"for=198.51.100.1"}, want: "ip:203.0.113.9"},
		{name: "untrusted IPv6 peer", remote: "[2001:db8::9]:443", xff: []string{"198.51.100.1"}, want: "ip:2001:db8::9"},
		{name: "a trusted peer, one proxy", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7"}, want: "ip:203.0.113.7"},
		{name: "trusted IPv6 peer", remote: "[2001:db8:ffff::1]:443", xff: []string{"203.0.113.7"}, want: "ip:203.0.113.7"},
		{name: "trusted IPv4-mapped peer", remote: "[::ffff:10.0.0.1]:443", xff: []string{"203.0.113.7"}, want: "ip:203.0.113.7"},
		{name: "trusted peer without port", remote: "127.0.0.1", xff: []string{"203.0.113.7"}, want: "ip:203.0.113.7"},
		{name: "peer not an address", remote: "@", xff: []string{"203.0.113.7"}, want: "ip:@"},
		{name: "X-Forwarded-For is not the Forwarded proxies' header", remote: "10.0.0.1:1234", forwarded: true,
			xff: []string{"198.51.100.1"}, want: "ip:10.0.0.1"},
		{name: "Forwarded is not the X-Forwarded-For proxies' header", remote: "10.0.0.1:1234",
			fwd: []string{"for=198.51.100.1"}, xff: []string{"203.0.113.7"}, want: "ip:203.0.113.7"},

		// X-Forwarded-For.
		{name: "two trusted proxies", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7, 10.0.0.2"}, want: "ip:203.0.113.7"},
		{name: "the client's own entries are skipped", remote: "10.0.0.1:1234",
			xff: []string{"6.6.6.6, 10.9.9.9, 203.0.113.7, 10.0.0.2"}, want: "ip:203.0.113.7"},
		{name: "trusted proxies only: the leftmost", remote: "10.0.0.1:1234", xff: []string{"10.0.0.3,10.0.0.2"}, want: "ip:10.0.0.3"},
		{name: "lines in order", remote: "10.0.0.1:1234", xff: []string{"6.6.6.6, 203.0.113.7", "10.0.0.2"}, want: "ip:203.0.113.7"},
		{name: "the last line's last entry first", remote: "10.0.0.1:1234",
			xff: []string{"203.0.113.7", "10.0.0.2, 198.51.100.1"}, want: "ip:198.51.100.1"},
		{name: "empty elements skipped", remote: "10.0.0.1:1234", xff: []string{" 203.0.113.7 ,, 10.0.0.2,", ""}, want: "ip:203.0.113.7"},
		{name: "with port", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7:8080"}, want: "ip:203.0.113.7"},
		{name: "IPv6", remote: "10.0.0.1:1234", xff: []string{"2001:db8::1"}, want: "ip:2001:db8::1"},
		{name: "IPv6 bracketed with port", remote: "10.0.0.1:1234", xff: []string{"[2001:db8::1]:4711"}, want: "ip:2001:db8::1"},
		{name: "IPv6 trusted hop", remote: "10.0.0.1:1234", xff: []string{"2001:db8::1, 2001:db8:ffff::2"}, want: "ip:2001:db8::1"},
		{name: "IPv4-mapped unmapped", remote: "10.0.0.1:1234", xff: []string{"::ffff:203.0.113.7"}, want: "ip:203.0.113.7"},
		{name: "IPv4-mapped trusted hop", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7, ::ffff:10.0.0.2"}, want: "ip:203.0.113.7"},
		{name: "garbage rightmost: the peer", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7, garbage"}, want: "ip:10.0.0.1"},
		{name: "garbage behind a trusted hop: that hop", remote: "10.0.0.1:1234",
			xff: []string{"203.0.113.7, garbage, 10.0.0.2"}, want: "ip:10.0.0.2"},
		{name: "unknown", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7, unknown"}, want: "ip:10.0.0.1"},
		{name: "zone", remote: "10.0.0.1:1234", xff: []string{"fe80::1%eth0"}, want: "ip:10.0.0.1"},
		{name: "bad port", remote: "10.0.0.1:1234", xff: []string{"203.0.113.7:123456"}, want: "ip:10.0.0.1"},
		{name: "IPv4 in brackets", remote: "10.0.0.1:1234", xff: []string{"[203.0.113.7]"}, want: "ip:10.0.0.1"},
		{name: "a host name", remote: "10.0.0.1:1234", xff: []string{"client.example"}, want: "ip:10.0.0.1"},

		// Forwarded (RFC 7239 §7 examples among them).
		{name: "Forwarded", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{"for=192.0.2.60;proto=http;by=203.0.113.43"}, want: "ip:192.0.2.60"},
		{name: "Forwarded quoted IPv6 with port", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`For="[2001:db8:cafe::17]:4711"`}, want: "ip:2001:db8:cafe::17"},
		{name: "Forwarded quoted IPv4 with port", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for="192.0.2.60:47011"`}, want: "ip:192.0.2.60"},
		{name: "Forwarded obfuscated port", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for="192.0.2.60:_p1"`}, want: "ip:192.0.2.60"},
		{name: "Forwarded list", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{"for=192.0.2.43, for=198.51.100.17"}, want: "ip:198.51.100.17"},
		{name: "Forwarded trusted IPv6 hop", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=192.0.2.43, for="[2001:db8:ffff::2]";proto=https`}, want: "ip:192.0.2.43"},
		{name: "Forwarded lines", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{"for=6.6.6.6, for=192.0.2.43", "for=10.0.0.2"}, want: "ip:192.0.2.43"},
		{name: "Forwarded obfuscated: the peer", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=192.0.2.43, for=_hidden`}, want: "ip:10.0.0.1"},
		{name: "Forwarded obfuscated behind a trusted hop", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=192.0.2.43, for="_gazonk", for=10.0.0.2`}, want: "ip:10.0.0.2"},
		{name: "Forwarded unknown", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{"for=192.0.2.43, for=unknown"}, want: "ip:10.0.0.1"},
		{name: "Forwarded element without for", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{"for=192.0.2.43, proto=https"}, want: "ip:10.0.0.1"},
		{name: "Forwarded for twice", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{"for=192.0.2.43;for=198.51.100.17"}, want: "ip:10.0.0.1"},
		{name: "Forwarded IPv6 unbracketed", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for="2001:db8::1"`}, want: "ip:10.0.0.1"},
		{name: "Forwarded escape in for", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for="192.0.2.\43"`}, want: "ip:10.0.0.1"},
		{name: "Forwarded quoted comma elsewhere", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=192.0.2.43;ext="a, for=6.6.6.6";proto=https`}, want: "ip:192.0.2.43"},
		{name: "Forwarded escaped quote elsewhere", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`ext="a\", for=6.6.6.6";for=192.0.2.43`}, want: "ip:192.0.2.43"},
		{name: "Forwarded unterminated quote cannot swallow the proxy's element", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=6.6.6.6;ext="a, for=192.0.2.43`}, want: "ip:192.0.2.43"},
		{name: "Forwarded unterminated quote rightmost", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for="192.0.2.43`}, want: "ip:10.0.0.1"},
		{name: "Forwarded garbage after a quote", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=6.6.6.6, for="x"[2001:db8::9]"`}, want: "ip:10.0.0.1"},
		{name: "Forwarded quote in a name", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=6.6.6.6;", for=192.0.2.43`}, want: "ip:192.0.2.43"},
		{name: "Forwarded empty elements and spaces", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{` , for=192.0.2.43 ; proto=https ,, `}, want: "ip:192.0.2.43"},
		{name: "Forwarded unquoted port tolerated", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for=192.0.2.43:80`}, want: "ip:192.0.2.43"},
		{name: "Forwarded without =", remote: "10.0.0.1:1234", forwarded: true,
			fwd: []string{`for`}, want: "ip:10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{TrustedProxies: testProxies}
			if tc.forwarded {
				cfg.ProxyHeader = "Forwarded"
			}
			s, err := New(cfg)
			require.NoError(t, err)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				r.Header.Add("Forwarded", v)
			}
			assert.Equal(t, tc.want, s.ClientKey(r))

			// Without trusted proxies the headers are never read.
			s, err = New(Config{})
			require.NoError(t, err)
			host := tc.remote
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			assert.Equal(t, "ip:"+host, s.ClientKey(r))
		})
	}
}

func TestClientKeyPrecedence(t *testing.T) {
	var custom string
	s, err := New(Config{TrustedProxies: testProxies, ClientKey: func(*http.Request) string { return custom },
		RateLimit: &RateLimitConfig{KeyHeader: "X-Account"}})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	assert.Equal(t, "ip:203.0.113.7", s.ClientKey(r), "no user id: the address")
	r.Header.Set("X-User-ID", "mallory")
	assert.Equal(t, "ip:203.0.113.7", s.ClientKey(r), "the configured user header only")
	r.Header.Set("X-Account", "alice")
	assert.Equal(t, "u:alice", s.ClientKey(r), "the user id before the address")
	custom = "tenant-7"
	assert.Equal(t, "tenant-7", s.ClientKey(r), "ClientKey first, verbatim")
}

func fixedNow() time.Time { return t0 }

// Behind one trusted proxy every request comes from its address; two users
// with different X-Forwarded-For get different rate-limit buckets. Before
// TrustedProxies they shared the proxy's.
func TestRateLimitBehindTrustedProxy(t *testing.T) {
	s, err := New(Config{Now: fixedNow, TrustedProxies: testProxies, RateLimit: &RateLimitConfig{Burst: 1}})
	require.NoError(t, err)
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	do := func(remote, xff string) int {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	assert.Equal(t, http.StatusOK, do("10.0.0.1:40000", "203.0.113.1"))
	assert.Equal(t, http.StatusTooManyRequests, do("10.0.0.1:40001", "203.0.113.1"), "the same user, its bucket empty")
	assert.Equal(t, http.StatusOK, do("10.0.0.1:40002", "203.0.113.2"), "another user behind the same proxy")
	assert.Equal(t, http.StatusOK, do("10.0.0.1:40003", "6.6.6.6, 203.0.113.3"), "a third, whatever it sent")
	assert.Equal(t, http.StatusTooManyRequests, do("10.0.0.1:40004", "7.7.7.7, 203.0.113.3"), "the spoofed part does not make a new key")

	// A client connecting directly cannot pick a bucket with the header.
	assert.Equal(t, http.StatusOK, do("198.51.100.9:1", "203.0.113.50"))
	assert.Equal(t, http.StatusTooManyRequests, do("198.51.100.9:2", "203.0.113.51"), "an untrusted peer's header is ignored")
}

// Config.ClientKey decides the key of both the rate limit and the cascade,
// computed once per request; Shedder.ClientKey gives Acquire the same.
func TestClientKeyFuncSharedByRateLimitAndCascade(t *testing.T) {
	calls := 0
	key := func(r *http.Request) string { calls++; return r.Header.Get("X-Tenant") }
	level := 0.0
	s, err := New(Config{Now: fixedNow, ClientKey: key, TrustedProxies: testProxies,
		ShedLevel: func() float64 { return level }, RateLimit: &RateLimitConfig{Burst: 1}})
	require.NoError(t, err)
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := func(tenant, remote string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Tenant", tenant)
		r.Header.Set(signals.PriorityHeader, "sheddable")
		return r
	}
	do := func(r *http.Request) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}

	// Rate limit: the tenant is the bucket, whatever the address.
	assert.Equal(t, http.StatusOK, do(req("acme", "198.51.100.1:1")))
	assert.Equal(t, 1, calls, "one call per request")
	assert.Equal(t, http.StatusTooManyRequests, do(req("acme", "198.51.100.2:1")), "same tenant, other address")
	assert.Equal(t, http.StatusOK, do(req("globex", "198.51.100.1:1")), "other tenant, same address")
	// An empty key falls back to the default: here the address.
	assert.Equal(t, http.StatusOK, do(req("", "198.51.100.3:1")))
	assert.Equal(t, http.StatusTooManyRequests, do(req("", "198.51.100.3:2")))
	assert.Equal(t, http.StatusOK, do(req("", "198.51.100.4:1")))
	assert.Equal(t, 6, calls)

	// Cascade: half the sheddable clients are refused, sticky per tenant,
	// and Acquire with Shedder.ClientKey refuses the same ones. (Each
	// tenant's first request, so that the rate limit passes.)
	level = 0.5
	refused := 0
	for i := range 200 {
		tenant := "tenant-" + strconv.Itoa(i)
		r := req(tenant, "10.0.0.1:1234")
		k := s.ClientKey(r)
		require.Equal(t, tenant, k)
		code := do(r)
		if code != http.StatusOK {
			require.Equal(t, http.StatusServiceUnavailable, code)
			refused++
		}
		assert.Equal(t, s.keyFraction(tenant) < 0.5, code != http.StatusOK, "the middleware sheds %s by its ClientKey", tenant)
		release, err := s.Acquire(context.Background(), Request{Class: signals.Sheddable, Key: k})
		assert.Equal(t, code != http.StatusOK, err != nil, "Acquire sheds %s alike", tenant)
		if err == nil {
			release(false)
		}
	}
	assert.InDelta(t, 100, refused, 30)
}

// The default key costs what it did (one allocation, the string) and reads
// no header without TrustedProxies; behind them, one allocation too.
func TestClientKeyAllocs(t *testing.T) {
	plain, _ := New(Config{})
	proxied, _ := New(Config{TrustedProxies: testProxies})
	fwd, _ := New(Config{TrustedProxies: testProxies, ProxyHeader: "Forwarded"})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 2001:db8::1, 10.0.0.2")
	r.Header.Set("Forwarded", `for=6.6.6.6, for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`)
	for _, tc := range []struct {
		s    *Shedder
		want string
	}{{plain, "ip:10.0.0.1"}, {proxied, "ip:2001:db8::1"}, {fwd, "ip:2001:db8::1"}} {
		require.Equal(t, tc.want, tc.s.ClientKey(r))
		assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { tc.s.ClientKey(r) }), 1.0, tc.want)
	}
}

func BenchmarkClientKey(b *testing.B) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.2")
	r.Header.Set("Forwarded", "for=6.6.6.6, for=203.0.113.7, for=10.0.0.2")
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"direct", Config{}},
		{"x-forwarded-for", Config{TrustedProxies: testProxies}},
		{"forwarded", Config{TrustedProxies: testProxies, ProxyHeader: "Forwarded"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := New(tc.cfg)
			b.ReportAllocs()
			for b.Loop() {
				s.ClientKey(r)
			}
		})
	}
}

// refClientAddr is the walk from the right done plainly: the header's
// entries collected in order, then read from the last.
func refClientAddr(p *proxies, peer netip.Addr, lines []string) netip.Addr {
	if len(lines) == 0 || !p.trust(peer) {
		return peer
	}
	type entry struct {
		a  netip.Addr
		ok bool
	}
	var es []entry
	for _, line := range lines {
		if p.forwarded {
			for i := 0; i < len(line); {
				node, ok, found, next := forwardedElement(line, i)
				i = next
				if !found {
					break
				}
				var a netip.Addr
				if ok {
					a, ok = parseNode(node, true)
				}
				es = append(es, entry{a, ok})
			}
			continue
		}
		for _, e := range strings.Split(line, ",") {
			if e = strings.Trim(e, " \t"); e != "" {
				a, ok := parseNode(e, false)
				es = append(es, entry{a, ok})
			}
		}
	}
	last := peer
	for i := len(es) - 1; i >= 0; i-- {
		if !es[i].ok {
			return last
		}
		if !p.trust(es[i].a) {
			return es[i].a
		}
		last = es[i].a
	}
	return last
}

// FuzzClientAddr: the header parsers never panic, and the client is the
// peer or a valid address (unmapped, without zone) — the peer's own when
// the peer is not trusted — as the plain walk from the right finds it.
func FuzzClientAddr(f *testing.F) {
	for _, seed := range []string{
		"203.0.113.7", "6.6.6.6, 203.0.113.7, 10.0.0.2", "203.0.113.7, garbage, 10.0.0.2",
		"[2001:db8::1]:4711", "::ffff:10.0.0.2", "a\nb,,c", "fe80::1%eth0", "unknown",
		"for=192.0.2.60;proto=http;by=203.0.113.43", `for="[2001:db8:cafe::17]:4711"`,
		`for=192.0.2.43, for=_hidden, for=10.0.0.2`, `for=6.6.6.6;ext="a, for=192.0.2.43`,
		`ext="a\", for=6.6.6.6";for=192.0.2.43`, `for=6.6.6.6, for="x"[2001:db8::9]"`,
		"for=1.2.3.4\nfor=\"[2001:db8:ffff::2]\"", `for="192.0.2.1:_x-1"`, `;;,,for=1.2.3.4;`,
	} {
		for peer := range uint8(3) {
			f.Add(seed, false, peer)
			f.Add(seed, true, peer)
		}
	}
	peers := []netip.Addr{
		netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("2001:db8:ffff::1"),
		netip.MustParseAddr("203.0.113.9"), // untrusted
	}
	plain, err := newProxies(testProxies, "")
	require.NoError(f, err)
	fwd, err := newProxies(testProxies, "Forwarded")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, header string, forwarded bool, peerIndex uint8) {
		p := plain
		if forwarded {
			p = fwd
		}
		peer := peers[int(peerIndex)%len(peers)]
		lines := strings.Split(header, "\n")
		got := p.clientAddr(peer, lines)
		if got != peer {
			if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
				t.Fatalf("clientAddr(%v, %q) = %v: not a valid address", peer, lines, got)
			}
			if !p.trust(peer) {
				t.Fatalf("clientAddr(%v, %q) = %v: an untrusted peer's header was read", peer, lines, got)
			}
		}
		if want := refClientAddr(p, peer, lines); got != want {
			t.Fatalf("clientAddr(%v, %q) = %v, the walk from the right finds %v", peer, lines, got, want)
		}
	})
}

func TestClientAddrAndRateLimiterPerAddress(t *testing.T) {
	proxies, err := ParseProxies("127.0.0.1")
	require.NoError(t, err)
	s, err := New(Config{TrustedProxies: proxies})
	require.NoError(t, err)
	req := func(user, xff string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/deals", nil)
		r.RemoteAddr = "127.0.0.1:5555"
		r.Header.Set("X-User-ID", user)
		r.Header.Set("X-Forwarded-For", xff)
		return r
	}
	assert.Equal(t, "203.0.113.9", s.ClientAddr(req("u1", "203.0.113.9")).String())
	assert.Equal(t, "u:u1", s.ClientKey(req("u1", "203.0.113.9")), "the user id still comes first for the key")
	spoof := req("u1", "203.0.113.9")
	spoof.RemoteAddr = "198.51.100.7:1"
	assert.Equal(t, "198.51.100.7", s.ClientAddr(spoof).String(), "an untrusted peer's header is ignored")

	// A bot rotating user ids from one address is held by the address.
	rl, err := NewRateLimiter(RateLimitConfig{Rate: 1, Burst: 5})
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	allowed := 0
	for i := range 50 {
		r := req(fmt.Sprintf("bot-%d", i), "203.0.113.66")
		if rl.Allow(nil, "ip:"+s.ClientAddr(r).String(), now) {
			allowed++
		}
	}
	assert.Equal(t, 5, allowed, "the address's burst, whatever the user ids")
	h := http.Header{}
	assert.True(t, rl.Allow(h, "ip:203.0.113.1", now), "another address has its own bucket")
	assert.Equal(t, "5", h.Get("X-Ratelimit-Limit"))
	_, err = NewRateLimiter(RateLimitConfig{Burst: -1})
	assert.Error(t, err)
}

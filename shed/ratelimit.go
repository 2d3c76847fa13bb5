package shed

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimitConfig limits each client. The zero value is a token bucket of
// burst 10 refilled at 2 per second, keyed by the X-User-ID header, else the
// client's IP address (see Config.TrustedProxies behind a load balancer, and
// Config.ClientKey to choose the key yourself).
type RateLimitConfig struct {
	// SlidingWindow switches from a token bucket to a sliding-window
	// counter: at most Burst requests per Window, the previous window
	// weighted by how much of it still overlaps.
	SlidingWindow bool
	// Rate is the token bucket's refill per second. Default 2.
	Rate float64
	// Burst is the bucket's size, or the window's allowance. Default 10.
	Burst int
	// Window is the sliding window's length. Default 5 s.
	Window time.Duration
	// KeyHeader names the header that carries an authenticated user id,
	// set by an auth layer in front (the client must not be able to set
	// it). Default "X-User-ID". Without it the key is the client's IP
	// address: the connection's (RemoteAddr), or, when the connection
	// comes from one of Config.TrustedProxies, the address they forwarded.
	// The cascade's sticky shedding uses the same key.
	KeyHeader string
	// MaxClients bounds the clients remembered; the least recently seen
	// are forgotten (and start with a full allowance). Default 65536.
	MaxClients int
	// HeadersOnRefusal sends X-RateLimit-Limit/-Remaining/-Reset only
	// with refusals (which always carry them and Retry-After), not on
	// every admitted answer: for sites whose clients are browsers, which
	// read none of them. It saves writing three headers a request (about
	// 0.8 µs on this project's 2-core machine: the answer's header map
	// outgrows its first group). Default: on every answer, for API
	// clients that pace themselves by them.
	HeadersOnRefusal bool
	// Store keeps the clients' allowances. Default nil: this process's
	// memory, the MaxClients most recently seen clients. A store shared by
	// the instances of a fleet (package shed/redisstore) holds a client to
	// one allowance across all of them instead of one per instance. When
	// the store cannot decide (it returns an error: unreachable, slower
	// than its timeout), this process's memory decides that request, so a
	// failing store neither refuses nor waves through: each instance
	// enforces the limit on its own until the store is back. The
	// semantics (Quota) and the headers are the same whichever decides.
	Store RateLimitStore
}

// quota is c's allowance, for a store.
func (c *RateLimitConfig) quota() Quota {
	return Quota{SlidingWindow: c.SlidingWindow, Rate: c.Rate, Burst: c.Burst, Window: c.Window}
}

func (c RateLimitConfig) withDefaults() (RateLimitConfig, error) {
	if c.Rate == 0 {
		c.Rate = 2
	}
	if c.Burst == 0 {
		c.Burst = 10
	}
	if c.Window == 0 {
		c.Window = 5 * time.Second
	}
	if c.KeyHeader == "" {
		c.KeyHeader = "X-User-ID"
	}
	if c.MaxClients == 0 {
		c.MaxClients = 65536
	}
	switch {
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return c, errors.New("shed: rate limit: rate must be positive")
	case c.Burst < 1:
		return c, errors.New("shed: rate limit: burst must be at least 1")
	case c.Window <= 0:
		return c, errors.New("shed: rate limit: window must be positive")
	case c.MaxClients < 1:
		return c, errors.New("shed: rate limit: max clients must be at least 1")
	}
	return c, nil
}

// ParseProxies parses a comma-separated list of trusted proxies for
// Config.TrustedProxies: CIDR prefixes ("10.0.0.0/8", "fd00::/8") and
// single addresses ("127.0.0.1", "::1"), spaces around the commas allowed,
// empty entries skipped. A prefix's host bits are masked off ("10.1.2.3/8"
// is 10.0.0.0/8). An entry that is neither, or has an IPv6 zone, is an
// error naming the entry and its position.
func ParseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(e, "/") {
			p, err = netip.ParsePrefix(e)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(e); err == nil {
				if a.Zone() != "" {
					err = errors.New("an address with an IPv6 zone")
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("shed: trusted proxies: entry %d, %q, is not an IP address or CIDR prefix: %w", i+1, e, err)
		}
		out = append(out, canonicalPrefix(p))
	}
	return out, nil
}

// canonicalPrefix masks p and writes an IPv4-mapped prefix as IPv4:
// addresses are unmapped before they are matched.
func canonicalPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// keyer computes a request's client key: the one key of the rate limits
// and the cascade.
type keyer struct {
	custom  func(*http.Request) string
	header  string   // the authenticated user id header, canonical
	proxies *proxies // nil: the connection's address, no header read
}

func newKeyer(cfg *Config) (keyer, error) {
	k := keyer{custom: cfg.ClientKey, header: "X-User-ID"}
	if cfg.RateLimit != nil && cfg.RateLimit.KeyHeader != "" {
		k.header = cfg.RateLimit.KeyHeader
	}
	k.header = http.CanonicalHeaderKey(k.header) // looked up without Get's copy
	var err error
	k.proxies, err = newProxies(cfg.TrustedProxies, cfg.ProxyHeader)
	return k, err
}

// key returns r's client key: Config.ClientKey's, else "u:" and the user id
// header, else "ip:" and the client's address.
func (k *keyer) key(r *http.Request) string {
	if k.custom != nil {
		if v := k.custom(r); v != "" {
			return v
		}
	}
	if vs := r.Header[k.header]; len(vs) > 0 && vs[0] != "" {
		return "u:" + vs[0]
	}
	if k.proxies != nil {
		if peer, ok := peerAddr(r.RemoteAddr); ok {
			if a := k.proxies.clientAddr(peer, r.Header[k.proxies.header]); a != peer {
				var buf [3 + 46]byte // "ip:" and the longest IPv6 text
				return string(a.AppendTo(append(buf[:0], "ip:"...)))
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// addr returns r's client address: the connection's, or the one trusted
// proxies forwarded. The zero Addr when RemoteAddr does not parse.
func (k *keyer) addr(r *http.Request) netip.Addr {
	peer, ok := peerAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}
	}
	if k.proxies != nil {
		return k.proxies.clientAddr(peer, r.Header[k.proxies.header])
	}
	return peer
}

// RateLimiter is a per-key rate limit on its own — a token bucket or a
// sliding window per client key, the least recently seen forgotten past
// MaxClients — for limits the Shedder's one does not cover: a route of its
// own (a flash deal), or a second key (the client's address beside its
// user id, so that a bot rotating user ids from one address is held too).
// It is safe for concurrent use.
type RateLimiter struct{ l *rateLimits }

// NewRateLimiter returns a limiter; cfg's zero fields take
// RateLimitConfig's defaults (KeyHeader is not used: the caller gives the
// key).
func NewRateLimiter(cfg RateLimitConfig) (*RateLimiter, error) {
	l, err := newRateLimits(cfg)
	if err != nil {
		return nil, err
	}
	return &RateLimiter{l: l}, nil
}

// Allow takes one request of key at now, and writes X-RateLimit-Limit,
// -Remaining, -Reset (and Retry-After when refused) to h when h is not nil.
// It is AllowContext with context.Background().
func (rl *RateLimiter) Allow(h http.Header, key string, now time.Time) bool {
	return rl.AllowContext(context.Background(), h, key, now)
}

// AllowContext is Allow with a context for RateLimitConfig.Store (the
// request's: a store gives up when it is done, and this process's memory
// decides).
func (rl *RateLimiter) AllowContext(ctx context.Context, h http.Header, key string, now time.Time) bool {
	if h == nil {
		h = http.Header{}
	}
	return rl.l.allowContext(ctx, h, key, now)
}

// peerAddr parses a RemoteAddr ("192.0.2.1:1234", "[2001:db8::1]:1234" or
// a bare address) to an unmapped address without zone.
func peerAddr(remote string) (netip.Addr, bool) {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(remote); err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// proxies finds the client's address behind trusted proxies.
type proxies struct {
	trusted   []netip.Prefix // canonical
	header    string         // canonical header name
	forwarded bool           // header is RFC 7239's Forwarded
}

func newProxies(trusted []netip.Prefix, header string) (*proxies, error) {
	if header == "" {
		header = "X-Forwarded-For"
	}
	for i := 0; i < len(header); i++ {
		if !isTchar(header[i]) {
			return nil, fmt.Errorf("shed: proxy header %q is not a header name", header)
		}
	}
	if len(trusted) == 0 {
		return nil, nil
	}
	p := &proxies{trusted: make([]netip.Prefix, len(trusted)), header: http.CanonicalHeaderKey(header)}
	p.forwarded = p.header == "Forwarded"
	for i, t := range trusted {
		if !t.IsValid() {
			return nil, fmt.Errorf("shed: trusted proxies: entry %d, %v, is not a valid prefix", i+1, t)
		}
		p.trusted[i] = canonicalPrefix(t)
	}
	return p, nil
}

func (p *proxies) trust(a netip.Addr) bool {
	for _, t := range p.trusted {
		if t.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the client's address for a request from peer (an
// unmapped address without zone) carrying the proxy header's lines. From a
// trusted peer it walks the list from the right, skipping trusted proxies:
// the first untrusted address is the client; an entry that is not an
// address stops the walk at the last trusted hop (the peer when it is the
// rightmost); a list of trusted proxies only gives its leftmost. From an
// untrusted peer, or without the header, it is the peer.
func (p *proxies) clientAddr(peer netip.Addr, lines []string) netip.Addr {
	if len(lines) == 0 || !p.trust(peer) {
		return peer
	}
	if p.forwarded {
		return p.forwardedAddr(peer, lines)
	}
	return p.listAddr(peer, lines)
}

// listAddr walks X-Forwarded-For from the right: no quoting there, so the
// commas split it, and the walk stops at the first untrusted address.
// Empty list elements are skipped (RFC 9110 §5.6.1).
func (p *proxies) listAddr(peer netip.Addr, lines []string) netip.Addr {
	last := peer
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for {
			j := strings.LastIndexByte(rest, ',')
			if e := trimOWS(rest[j+1:]); e != "" {
				a, ok := parseNode(e, false)
				if !ok {
					return last
				}
				if !p.trust(a) {
					return a
				}
				last = a
			}
			if j < 0 {
				break
			}
			rest = rest[:j]
		}
	}
	return last
}

// forwardedAddr is the walk from the right over Forwarded's elements, made
// in one pass from the left (quoted strings can be scanned only forwards):
// client is the last untrusted address, after the first trusted one after
// it or after the last malformed element.
func (p *proxies) forwardedAddr(peer netip.Addr, lines []string) netip.Addr {
	var client, after netip.Addr
	for _, s := range lines {
		for i := 0; i < len(s); {
			node, ok, found, next := forwardedElement(s, i)
			i = next
			if !found {
				break
			}
			var a netip.Addr
			if ok {
				a, ok = parseNode(node, true)
			}
			switch {
			case !ok:
				client, after = netip.Addr{}, netip.Addr{}
			case !p.trust(a):
				client, after = a, netip.Addr{}
			case !after.IsValid():
				after = a
			}
		}
	}
	switch {
	case client.IsValid():
		return client
	case after.IsValid():
		return after
	}
	return peer
}

// forwardedElement scans the element of a Forwarded header line s that
// starts at or after i (RFC 7239 §4: pairs token=value, the value a token
// or a quoted string, separated by ";"; elements by ","), skipping empty
// elements. It returns the element's for= node, ok when the element is
// well formed with exactly one for= and no escapes in it, found when there
// was an element, and the index after it. After a syntax error the element
// ends at the next comma, quoted or not: an unterminated quote cannot
// swallow the elements proxies appended after it.
func forwardedElement(s string, i int) (node string, ok, found bool, next int) {
	n := len(s)
	bad, haveFor := false, false
	for {
		i = skipOWS(s, i)
		if i >= n {
			return node, found && haveFor && !bad, found, n
		}
		switch s[i] {
		case ',':
			if !found {
				i++
				continue
			}
			return node, haveFor && !bad, true, i + 1
		case ';':
			found = true
			i++
			continue
		}
		found = true
		j := i
		for j < n && isTchar(s[j]) {
			j++
		}
		if j == i || j == n || s[j] != '=' {
			return "", false, true, skipToComma(s, i)
		}
		isFor := j-i == 3 && strings.EqualFold(s[i:j], "for")
		j++
		var v string
		if j < n && s[j] == '"' {
			k, esc := j+1, false
			for k < n && s[k] != '"' {
				if s[k] == '\\' {
					esc = true
					k++
				}
				k++
			}
			if k >= n {
				return "", false, true, skipToComma(s, j)
			}
			v = s[j+1 : k]
			bad = bad || (isFor && esc)
			j = k + 1
		} else {
			k := j
			// Tolerated unquoted: ':' and brackets, which RFC 7239 wants
			// quoted (an address still has to parse).
			for k < n && (isTchar(s[k]) || s[k] == ':' || s[k] == '[' || s[k] == ']') {
				k++
			}
			if k == j {
				return "", false, true, skipToComma(s, i)
			}
			v = s[j:k]
			j = k
		}
		if isFor {
			bad = bad || haveFor
			haveFor, node = true, v
		}
		i = skipOWS(s, j)
		if i < n && s[i] != ',' && s[i] != ';' {
			return "", false, true, skipToComma(s, i)
		}
	}
}

// parseNode parses a forwarded node: an IPv4 address or a bracketed IPv6
// one, either with an optional port; X-Forwarded-For's (forwarded false)
// also a bare IPv6 address, Forwarded's (true) also an obfuscated port
// ("_abc"). "unknown", obfuscated identifiers and zones are not addresses.
// The address is unmapped.
func parseNode(v string, forwarded bool) (netip.Addr, bool) {
	var a netip.Addr
	var err error
	port := ""
	if v != "" && v[0] == '[' {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if a, err = netip.ParseAddr(v[1:end]); err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		port = v[end+1:]
	} else if a, err = netip.ParseAddr(v); err == nil && (a.Is4() || !forwarded) {
		// a bare address
	} else {
		c := strings.IndexByte(v, ':')
		if c < 0 {
			return netip.Addr{}, false
		}
		if a, err = netip.ParseAddr(v[:c]); err != nil || !a.Is4() {
			return netip.Addr{}, false
		}
		port = v[c:]
	}
	if a.Zone() != "" || !validPort(port, forwarded) {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// validPort reports whether p is empty or ':' and a port: 1 to 5 digits,
// or with obfuscated, '_' and letters, digits, '.', '_', '-'.
func validPort(p string, obfuscated bool) bool {
	if p == "" {
		return true
	}
	if p[0] != ':' || len(p) < 2 {
		return false
	}
	p = p[1:]
	if obfuscated && p[0] == '_' {
		for i := 1; i < len(p); i++ {
			if c := p[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return len(p) > 1
	}
	if len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

// isTchar reports whether c may be in an HTTP token (RFC 9110 §5.6.2).
func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

// skipToComma returns the index after the first comma at or after i, or
// len(s).
func skipToComma(s string, i int) int {
	if j := strings.IndexByte(s[i:], ','); j >= 0 {
		return i + j + 1
	}
	return len(s)
}

// rateLimits is a per-client limit: a store's decisions, or this
// process's memory's, written as headers.
type rateLimits struct {
	limit string         // X-RateLimit-Limit's value
	quiet bool           // HeadersOnRefusal
	quota Quota          // given to store
	store RateLimitStore // nil: mem only
	mem   *memory
}

func newRateLimits(cfg RateLimitConfig) (*rateLimits, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &rateLimits{limit: strconv.Itoa(cfg.Burst), quiet: cfg.HeadersOnRefusal, quota: cfg.quota(),
		store: cfg.Store, mem: newMemory(cfg)}, nil
}

// allowContext takes one request of client key at now and writes the
// X-RateLimit-* headers (and Retry-After when refused) to h. The store,
// if any, is bounded by ctx and its own timeout.
func (l *rateLimits) allowContext(ctx context.Context, h http.Header, key string, now time.Time) bool {
	var d RateDecision
	if l.store != nil {
		var err error
		if d, err = l.store.Take(ctx, StoreKey(key), l.quota, now); err != nil {
			d = l.mem.take(key, now)
		}
	} else {
		d = l.mem.take(key, now)
	}
	if d.Allowed && l.quiet {
		return true
	}
	// One backing array for the values (each slice capped at its own
	// element, so an Add to one header cannot reach the next).
	v := make([]string, 4)
	v[0], v[1], v[2] = l.limit, strconv.Itoa(max(d.Remaining, 0)), strconv.Itoa(ceilSeconds(d.Reset))
	h["X-Ratelimit-Limit"] = v[0:1:1]
	h["X-Ratelimit-Remaining"] = v[1:2:2]
	h["X-Ratelimit-Reset"] = v[2:3:3]
	if !d.Allowed {
		v[3] = strconv.Itoa(max(ceilSeconds(d.RetryAfter), 1))
		h["Retry-After"] = v[3:4:4]
	}
	return d.Allowed
}

// memory is the default RateLimitStore: a token bucket (x/time/rate's) or
// a sliding window per client, the least recently seen forgotten past
// MaxClients — and, as each new client comes, up to forgetBatch of the
// least recently seen whose allowance is whole again: a new client would
// start the same, so they are worth nothing (as the Redis store's keys
// expire once full). The table holds the clients of the last few seconds
// (Burst/Rate, or two Windows), not every client of the last 65 536: a
// bot rotating user ids no longer grows it for as long as it runs.
// Clients are kept by a keyed hash of their key (8 bytes, whatever the
// client sent; see keyhash.go), so MaxClients bounds its memory: about
// 250 bytes a client.
type memory struct {
	cfg  RateLimitConfig
	hash hashKey // drawn at random: nobody outside can aim two keys at one allowance
	mu   sync.Mutex
	m    map[uint64]*list.Element // of *client
	lru  list.List                // front: most recently seen
}

var _ RateLimitStore = (*memory)(nil)

type client struct {
	key    uint64 // memory.hash of the client key
	bucket *rate.Limiter
	// sliding window
	start     time.Time
	cur, prev int
}

// newMemory returns a memory for cfg, its defaults applied.
func newMemory(cfg RateLimitConfig) *memory {
	return &memory{cfg: cfg, hash: randomHashKey(), m: map[uint64]*list.Element{}}
}

// Take implements RateLimitStore; it never fails. q is the quota the
// memory was made with: a memory serves its one limiter.
func (l *memory) Take(_ context.Context, key string, _ Quota, now time.Time) (RateDecision, error) {
	return l.take(key, now), nil
}

// take takes one request of client key at now.
func (l *memory) take(key string, now time.Time) RateDecision {
	var d RateDecision
	h := l.hash.sum(key)
	l.mu.Lock()
	c := l.get(h, now)
	if l.cfg.SlidingWindow {
		d = c.window(now, l.cfg.Burst, l.cfg.Window)
	} else {
		d.Allowed = c.bucket.AllowN(now, 1)
		tokens := c.bucket.TokensAt(now)
		d.Remaining = max(int(tokens), 0)
		d.Reset = time.Duration((float64(l.cfg.Burst) - tokens) / l.cfg.Rate * float64(time.Second))
		if !d.Allowed {
			d.RetryAfter = time.Duration(max(1-tokens, 0) / l.cfg.Rate * float64(time.Second))
		}
	}
	l.mu.Unlock()
	return d
}

func ceilSeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// get returns the state of the client whose key hashes to key,
// remembering it. Callers hold l.mu.
func (l *memory) get(key uint64, now time.Time) *client {
	if e, ok := l.m[key]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*client)
	}
	l.forget(now)
	if l.lru.Len() >= l.cfg.MaxClients {
		old := l.lru.Back()
		delete(l.m, old.Value.(*client).key)
		l.lru.Remove(old)
	}
	c := &client{key: key, start: now}
	if !l.cfg.SlidingWindow {
		c.bucket = rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)
	}
	l.m[c.key] = l.lru.PushFront(c)
	return c
}

// forgetBatch bounds the clients forgotten for each new one: two, so that
// the table shrinks back while new clients come (one for one would only
// hold it), at a bounded cost per request.
const forgetBatch = 2

// forget drops up to forgetBatch of the least recently seen clients whose
// allowance is whole again at now. Callers hold l.mu.
func (l *memory) forget(now time.Time) {
	for range forgetBatch {
		e := l.lru.Back()
		if e == nil || !e.Value.(*client).whole(now, &l.cfg) {
			return
		}
		delete(l.m, e.Value.(*client).key)
		l.lru.Remove(e)
	}
}

// whole reports whether the client's allowance is what a new client's
// would be: its bucket full, or both its windows past.
func (c *client) whole(now time.Time, cfg *RateLimitConfig) bool {
	if cfg.SlidingWindow {
		return now.Sub(c.start) >= 2*cfg.Window
	}
	return c.bucket.TokensAt(now) >= float64(cfg.Burst)
}

// window is the sliding-window counter: the current window's count plus
// the previous window's, weighted by the share of it still inside the
// sliding window.
func (c *client) window(now time.Time, limit int, w time.Duration) RateDecision {
	for el := now.Sub(c.start); el >= w; el = now.Sub(c.start) {
		if el >= 2*w {
			c.prev, c.cur = 0, 0
			c.start = now.Add(-(el % w))
			break
		}
		c.prev, c.cur = c.cur, 0
		c.start = c.start.Add(w)
	}
	frac := 1 - float64(now.Sub(c.start))/float64(w)
	used := float64(c.prev)*frac + float64(c.cur)
	reset := w - now.Sub(c.start)
	if used+1 > float64(limit) {
		return RateDecision{Reset: reset, RetryAfter: reset}
	}
	c.cur++
	return RateDecision{Allowed: true, Remaining: max(int(float64(limit)-used-1), 0), Reset: reset}
}

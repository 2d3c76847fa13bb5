// Package local tells a request from a client on this machine — curl, a
// script, a page this very server served — from one a browser sends on
// behalf of another site, for the endpoints that trust a loopback
// listener instead of a token: the shop's demo endpoints, the simulated
// dependencies' admin and API routes (and brownoutd's tokenless writes,
// whose rule this is: api's localRefusal).
//
// A loopback listener is reachable from every page a browser on the same
// machine has open: a form post or a no-cors fetch from another site, or
// a page of another site whose name the attacker re-points at 127.0.0.1
// (DNS rebinding). So a request is taken as local only when
//
//   - its Host is loopback, localhost or the listener's own address (a
//     rebound name is same-origin for the browser, but its Host is the
//     attacker's);
//   - its Origin, when present, is its own scheme://Host;
//   - its Sec-Fetch-Site, when present, is same-origin or none (typed by
//     the user); for a read, a navigation (Sec-Fetch-Mode navigate) from
//     anywhere passes too: the page it opens is the user's, and no other
//     site can read it;
//   - it names no proxy (Forwarded, X-Forwarded-*, X-Real-IP): a proxy's
//     client may be anywhere the proxy listens;
//   - a write (any method but GET, HEAD and OPTIONS) declares
//     Content-Type application/json: a page can send a cross-site request
//     without a CORS preflight only as a form or text/plain, and a JSON one
//     needs a preflight that these servers never grant. An empty body is no
//     exception.
//
// A request with neither Origin nor Sec-Fetch-Site is not from a browser
// (browsers send at least one on every write) and passes the two checks.
package local

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/brownout/brownout/internal/server"
)

// Refusal is why a request is not taken as local: a problem type (the
// last part of its URI: "cross-site", "proxied", "json-required") and a
// detail for the client.
type Refusal struct {
	Type, Detail string
}

// Check says why r is not a local client's request, or nil when it is.
func Check(r *http.Request) *Refusal {
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	const only = "only this server's own pages and clients on this machine are served here"
	if o := r.Header.Get("Origin"); o != "" && !SameOrigin(r, o) {
		return &Refusal{"cross-site", "Origin " + Quote(o) + " is not this server's (" + Quote(Scheme(r)+"://"+r.Host) + "): " + only}
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" &&
		(write || r.Header.Get("Sec-Fetch-Mode") != "navigate") {
		return &Refusal{"cross-site", "Sec-Fetch-Site " + Quote(s) + ": " + only}
	}
	for _, h := range ProxyHeaders {
		if v := r.Header.Get(h); v != "" {
			return &Refusal{"proxied", h + " " + Quote(v) + ": the request came through a proxy, so its client may not be on this machine: " + only}
		}
	}
	if !Host(r) {
		return &Refusal{"cross-site", "Host " + Quote(r.Host) + " is not a loopback address, localhost or this listener's address (a name re-pointed at 127.0.0.1?): use Host 127.0.0.1, [::1] or localhost"}
	}
	if write && !IsJSON(r) {
		ct := "no Content-Type"
		if v := r.Header.Get("Content-Type"); v != "" {
			ct = "Content-Type " + Quote(v)
		}
		return &Refusal{"json-required", ct + ": a write must be Content-Type: application/json with a JSON body, {} at least (curl: -H 'Content-Type: application/json' -d '{}')"}
	}
	return nil
}

// IsJSON reports whether r declares a JSON body (the media type parsed,
// parameters such as charset allowed).
func IsJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// ProxyHeaders are the headers a proxy adds to say whom it forwards for.
var ProxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"}

// Scheme is the request's own scheme as the client used it.
func Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// SameOrigin reports whether origin is r's own scheme://Host (host names
// compared without case, default ports made explicit).
func SameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false // "null" (sandboxed pages, file://) among them
	}
	h, p := hostPort(u.Host, u.Scheme)
	rh, rp := hostPort(r.Host, Scheme(r))
	return strings.EqualFold(u.Scheme, Scheme(r)) && strings.EqualFold(h, rh) && p == rp
}

// hostPort splits a Host into its name and port, the scheme's default
// port when it has none.
func hostPort(hostport, scheme string) (string, string) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = strings.Trim(hostport, "[]"), ""
	}
	if p == "" {
		p = "80"
		if strings.EqualFold(scheme, "https") {
			p = "443"
		}
	}
	return h, p
}

// Host reports whether r's Host names this listener: localhost, a
// loopback address, or the address r arrived on.
func Host(r *http.Request) bool {
	h, _ := hostPort(r.Host, Scheme(r))
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return false // a name: the browser resolved it, maybe to us
	}
	if ip.Unmap().IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// maxQuoted bounds what a refusal repeats of a client's header.
const maxQuoted = 100

// Quote quotes a client's header for a refusal, at most maxQuoted bytes of it.
func Quote(s string) string {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "…"
	}
	return strconv.Quote(s)
}

// Only serves h to local clients (Check); another gets 403 from refuse
// (its server's problem writer, given the refusal's type and detail),
// with its body unread and the connection ended after the answer
// (server.Abandon).
func Only(h http.Handler, refuse func(w http.ResponseWriter, status int, typ, detail string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := Check(r); why != nil {
			server.Abandon(w, r)
			refuse(w, http.StatusForbidden, why.Type, why.Detail)
			return
		}
		h.ServeHTTP(w, r)
	})
}

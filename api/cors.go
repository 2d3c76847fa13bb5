package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brownout/brownout/internal/local"
)

// CORS: which pages of other origins may evaluate flags from a browser.
//
// A browser lets a page read a response from another origin only when
// the response names the page's origin in Access-Control-Allow-Origin;
// and before a request that a plain form could not send (a JSON body, an
// If-None-Match, an Authorization header — every request of OpenFeature's
// OFREP web provider) it asks first, with a preflight: OPTIONS with
// Access-Control-Request-Method and -Headers. By default this API grants
// nothing, so a page of another origin can neither read an answer nor
// send such a request.
//
// Config.CORSOrigins (brownoutd: cors_origins, --cors-origin) lists the
// origins whose pages may evaluate, each exactly as a browser writes it
// in Origin (scheme://host[:port], see ParseOrigin). They are granted on
// the routes a web provider uses, and no others (corsRoutes):
//
//   - POST /ofrep/v1/evaluate/flags and POST /ofrep/v1/evaluate/flags/{key}:
//     the preflight allows POST with Content-Type, If-None-Match,
//     Authorization and X-API-Key; the answer exposes ETag (the bulk
//     answer's, sent back in If-None-Match) and Retry-After.
//   - GET /ofrep/v1/events, the event stream the bulk answer advertises
//     (ADR 0008), for EventSource: Last-Event-ID is allowed on reconnect.
//
// The operators' writes, the push route, the state, history and event
// reads and our own stream grant nothing, whatever the origin: a preflight
// for /v1/freeze from an allowed origin is refused (405, no
// Access-Control-* header), and its write, sent anyway, meets the write
// rules of origin.go as before (403 on a tokenless loopback listener).
//
// On a loopback listener without tokens, a read must come from no other
// site's page (readRefusal); a page of an allowed origin is the
// exception on the evaluation routes, where the operator allowed it. Its
// request must still name this listener in its Host: a page whose name
// the attacker re-points at 127.0.0.1 reads nothing.
//
// No wildcard: "*" would grant every site the operator's browser opens,
// and on a loopback listener without tokens the levels and their reasons
// are the local operator's. Nor credentials: the answers never say
// Access-Control-Allow-Credentials, because evaluations take no cookie
// (a token travels in Authorization, which the preflight allows). Every
// answer of these routes says Vary: Origin, so that a cache never hands
// one origin's grant to another.

// preflightMaxAge is how long a browser may keep a preflight's grant:
// ten minutes spare a preflight before nearly every re-fetch (the web
// provider re-fetches on each change event, at most one a second here)
// and bound how long a browser still sends a request to an origin the
// operator withdrew (its answer then carries no grant: the page reads
// nothing).
const preflightMaxAge = 10 * time.Minute

// corsRoute is a route that grants CORS to Config.CORSOrigins: the
// method a preflight may ask for, the request headers it allows, and the
// response headers a page may read.
type corsRoute struct {
	method, allowHeaders, exposeHeaders string
}

var (
	// evalCORS is the OFREP evaluations': a JSON body (Content-Type),
	// the bulk answer's ETag back in If-None-Match, and a token where
	// evaluation tokens are configured.
	evalCORS = corsRoute{method: http.MethodPost, allowHeaders: "Content-Type, If-None-Match, Authorization, X-API-Key", exposeHeaders: "ETag, Retry-After"}
	// eventsCORS is OFREP's event stream's: EventSource sends
	// Last-Event-ID when it reconnects; a client that can send headers
	// may send a token.
	eventsCORS = corsRoute{method: http.MethodGet, allowHeaders: "Last-Event-ID, Authorization, X-API-Key", exposeHeaders: "Retry-After"}
)

// originSet is the origins granted, in the form ParseOrigin returns.
type originSet map[string]struct{}

// has reports whether o, a request's Origin header, is granted: an exact
// match (browsers send the form ParseOrigin returns).
func (s originSet) has(o string) bool {
	_, ok := s[o]
	return ok && o != ""
}

// parseOrigins parses every origin of list, the first error returned.
func parseOrigins(list []string) (originSet, error) {
	s := make(originSet, len(list))
	for _, o := range list {
		c, err := ParseOrigin(o)
		if err != nil {
			return nil, err
		}
		s[c] = struct{}{}
	}
	return s, nil
}

// SetCORSOrigins replaces the origins whose pages may evaluate from a
// browser (a configuration reload); see Config.CORSOrigins. A bad origin
// is an error and changes nothing.
func (a *API) SetCORSOrigins(origins []string) error {
	s, err := parseOrigins(origins)
	if err != nil {
		return err
	}
	a.origins.Store(&s)
	return nil
}

// corsGranted reports whether r comes from a page of an allowed origin.
func (a *API) corsGranted(r *http.Request) bool {
	return (*a.origins.Load()).has(r.Header.Get("Origin"))
}

// cors wraps a route of corsRoutes: its answer grants r's origin when it
// is allowed, and always varies by Origin.
func (a *API) cors(c corsRoute, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Add("Vary", "Origin")
		if a.corsGranted(r) {
			hd.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			hd.Set("Access-Control-Expose-Headers", c.exposeHeaders)
		}
		h.ServeHTTP(w, r)
	})
}

// preflight answers OPTIONS on a route of corsRoutes: 204 with the grant
// for an allowed origin that asks for the route's method; 403
// problem+json without any Access-Control-* header for any other
// preflight; 204 with Allow for an OPTIONS that is no preflight.
func (a *API) preflight(c corsRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Add("Vary", "Origin")
		hd.Add("Vary", "Access-Control-Request-Method")
		hd.Add("Vary", "Access-Control-Request-Headers")
		origin, method := r.Header.Get("Origin"), r.Header.Get("Access-Control-Request-Method")
		if origin == "" || method == "" {
			hd.Set("Allow", "OPTIONS, "+c.method)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !a.corsGranted(r) {
			problem(w, http.StatusForbidden, "cors", "Origin "+local.Quote(origin)+" may not evaluate flags from a browser: no origin may by default; allow it with Config.CORSOrigins (brownoutd: --cors-origin, cors_origins)")
			return
		}
		if method != c.method {
			problem(w, http.StatusForbidden, "cors", "Access-Control-Request-Method "+local.Quote(method)+": this route takes "+c.method)
			return
		}
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Set("Access-Control-Allow-Methods", c.method)
		hd.Set("Access-Control-Allow-Headers", c.allowHeaders)
		hd.Set("Access-Control-Max-Age", strconv.Itoa(int(preflightMaxAge.Seconds())))
		w.WriteHeader(http.StatusNoContent)
	}
}

// maxOrigin bounds an origin's length: a host name is at most 253 bytes,
// with a scheme and a port around it.
const maxOrigin = 300

// ParseOrigin checks an origin that may evaluate from a browser and
// returns it as browsers send it in Origin: scheme://host[:port], the
// scheme http or https, the host a DNS name (ASCII: an internationalised
// name in its xn-- form), a dotted IPv4 address or a bracketed IPv6 one;
// scheme and name in lower case, the scheme's default port left out, an
// IPv6 address in its shortest form. Anything else is an error that says
// what is wrong: a path (even "/"), a query, a fragment, user
// information, another scheme, "*" or "null".
func ParseOrigin(s string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("api: cors origin %s: %s", local.Quote(s), why)
	}
	switch {
	case s == "":
		return bad("empty: want scheme://host[:port], e.g. https://shop.example")
	case len(s) > maxOrigin:
		return bad(fmt.Sprintf("%d bytes: at most %d", len(s), maxOrigin))
	case s == "*":
		return bad("a wildcard would let every site's pages read the levels: list each origin, scheme://host[:port]")
	case s == "null":
		return bad("the opaque origin of sandboxed and file:// pages, which any page can claim: never granted")
	case strings.TrimSpace(s) != s:
		return bad("spaces around it")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad(err.Error() + ": want scheme://host[:port]")
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return bad("want an http:// or https:// origin, scheme://host[:port]")
	case u.Opaque != "" || u.Host == "":
		return bad("no host: want scheme://host[:port]")
	case u.User != nil:
		return bad("user information: an origin is scheme://host[:port] only")
	case u.Path != "" || u.RawPath != "":
		return bad("a path: an origin is scheme://host[:port] only, without even a trailing /")
	case u.RawQuery != "" || u.ForceQuery:
		return bad("a query: an origin is scheme://host[:port] only")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return bad("a fragment: an origin is scheme://host[:port] only")
	}
	host, port := u.Hostname(), u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return bad("an empty port")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return bad("port " + local.Quote(port) + ": want 1 to 65535")
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = "" // browsers leave the default port out
		}
	}
	if strings.HasPrefix(u.Host, "[") {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return bad("host " + local.Quote(host) + ": not an IPv6 address (without a zone)")
		}
		host = "[" + ip.String() + "]"
	} else if h, err := hostName(host); err != nil {
		return bad(err.Error())
	} else {
		host = h
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	return out, nil
}

// hostName checks a host of an origin that is not an IPv6 literal: a
// dotted IPv4 address, or a DNS name of ASCII letters, digits and
// hyphens whose last label is not a number (browsers would read it as
// an IPv4 address in another notation, 127.1 or 0x7f.1). It returns the
// name in lower case.
func hostName(h string) (string, error) {
	if ip, err := netip.ParseAddr(h); err == nil && ip.Is4() {
		return ip.String(), nil
	}
	if len(h) > 253 {
		return "", fmt.Errorf("host of %d bytes: a DNS name is at most 253", len(h))
	}
	labels := strings.Split(strings.ToLower(h), ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("host %s: not a DNS name (labels of 1 to 63 letters, digits and hyphens, no trailing dot)", local.Quote(h))
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("host %s: not a DNS name in ASCII (write an internationalised name in its xn-- form; no * wildcards)", local.Quote(h))
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "", fmt.Errorf("host %s: a number where the top-level domain goes: write an IPv4 address as four decimal numbers (127.0.0.1)", local.Quote(h))
	}
	return strings.Join(labels, "."), nil
}

package api

import (
	"net/http"

	"github.com/brownout/brownout/internal/local"
)

// A write without a token is trusted as the local operator's only because
// the listener is on loopback (Config.Loopback). A browser on the same
// machine reaches loopback too, on behalf of any page it has open: a form
// post or a no-cors fetch from another site, or a page of another site
// whose name the attacker re-points at 127.0.0.1 (DNS rebinding). So a
// tokenless write must also look like it came from no browser (curl, a
// script) or from a page of this very server (the dial):
//
//   - Content-Type application/json: a page can send a cross-site request
//     without a CORS preflight only as a form (urlencoded, multipart) or
//     text/plain; a JSON one needs a preflight, which this server never
//     grants for a write (it grants CORS on OFREP's routes only, and only
//     to the origins Config.CORSOrigins lists: cors.go). An empty body is
//     no exception.
//   - Host: loopback, localhost or the listener's own address. A rebound
//     name is same-origin for the browser, but its Host is the attacker's.
//   - Origin, when present: the request's own scheme://Host.
//   - Sec-Fetch-Site, when present: same-origin or none (typed by the
//     user). same-site is another origin (another port of 127.0.0.1).
//
// A request with neither Origin nor Sec-Fetch-Site is not from a browser
// (browsers send at least one on every write) and passes the last two.
//
// A request that says it came through a proxy (Forwarded, X-Forwarded-*)
// is refused too: its client may be anywhere the proxy listens, and the
// loopback listener vouches only for the proxy. Writing through a proxy
// takes a token.
//
// Writes with a token need none of this: a page can send an Authorization
// or X-API-Key header cross-site only after a CORS preflight, which this
// server never grants for a write, and a rebound page does not know the
// token. A page of an origin allowed to evaluate is no exception: its
// write is another site's, refused as any other.

// localRefusal says why r, a write or push without a token, cannot be
// taken as the local operator's (its problem type and detail), or "" when
// it can.
func localRefusal(r *http.Request) (typ, detail string) {
	if o := r.Header.Get("Origin"); o != "" && !local.SameOrigin(r, o) {
		return "cross-site", "Origin " + local.Quote(o) + " is not this server's (" + local.Quote(local.Scheme(r)+"://"+r.Host) + "): without a token, writes are taken from this server's own pages and from non-browser clients only"
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return "cross-site", "Sec-Fetch-Site " + local.Quote(s) + ": without a token, writes are taken from this server's own pages and from non-browser clients only"
	}
	for _, h := range local.ProxyHeaders {
		if v := r.Header.Get(h); v != "" {
			return "proxied", h + " " + local.Quote(v) + ": the request came through a proxy, so its client may not be on this machine: without a token, writes are taken from local clients only (configure operator tokens to write through a proxy)"
		}
	}
	if d := hostRefusal(r); d != "" {
		return "cross-site", d
	}
	if !local.IsJSON(r) {
		ct := "no Content-Type"
		if v := r.Header.Get("Content-Type"); v != "" {
			ct = "Content-Type " + local.Quote(v)
		}
		return "json-required", ct + ": without a token, a write must be Content-Type: application/json with a JSON body, {} at least (curl: -H 'Content-Type: application/json' -d '{}')"
	}
	return "", ""
}

// hostRefusal is why r's Host does not name this loopback listener (see
// localHost), or "" when it does: the one Host rule of tokenless writes,
// pushes and reads.
func hostRefusal(r *http.Request) string {
	if local.Host(r) {
		return ""
	}
	return "Host " + local.Quote(r.Host) + " is not a loopback address, localhost or this listener's address (a name re-pointed at 127.0.0.1?): without a token, this server answers Host 127.0.0.1, [::1] or localhost only"
}

// Reads on a loopback listener. Without a token, the state, history,
// events, OFREP's answers and the streams (whose state events carry the
// fleet's shed seed, dimmer.ShedSeed) are for the local operator too: a
// page the operator's browser opens must not read them. A browser gives a
// page of another site no response of ours (we grant no CORS, but for
// OFREP's answers to the origins Config.CORSOrigins lists), but a page
// whose name the attacker re-points at 127.0.0.1 (DNS rebinding) is
// same-origin for the browser and reads everything it fetches: its Host
// is the attacker's name, so a tokenless read must name this listener in
// its Host, as a tokenless write must (hostRefusal).
//
// A tokenless read is also refused when Sec-Fetch-Site says a page of
// another site (cross-site, or same-site: another port of 127.0.0.1) sent
// it, navigations aside. Such a page cannot read the answer, so this gives
// away nothing it could see; what it takes away is what the request does
// all the same: a stream it opens holds one of MaxStreams until it is
// aborted, and the answer's size and timing leak through side channels. A
// link the operator follows (Sec-Fetch-Mode navigate) still opens the
// JSON, and no legitimate reader loses anything: this server's own pages
// (the dial) are same-origin, and a page of another site never could read
// us. A read with a token (evaluation or operator, or a stream token for
// one) is checked by that token alone, as on any listener. On OFREP's
// routes, a page of an origin of Config.CORSOrigins passes the
// Sec-Fetch-Site check (the operator allowed it), never the Host check
// (API.ofrepRefusal).

// readRefusal says why r, a read without a token on a loopback listener,
// cannot be answered (its problem type and detail), or "" when it can.
func readRefusal(r *http.Request) (typ, detail string) {
	if d := hostRefusal(r); d != "" {
		return "cross-site", d
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" && r.Header.Get("Sec-Fetch-Mode") != "navigate" {
		return "cross-site", "Sec-Fetch-Site " + local.Quote(s) + ": without a token, this server's data is for its own pages and non-browser clients only"
	}
	return "", ""
}

// LocalOnly refuses, with 403 problem+json, a request to h that a loopback
// listener without tokens must not answer (a rebound Host, a page of
// another site; see readRefusal): for the servers that serve such a
// listener's data outside an API's routes (a proxy to one, as the sale's
// dial front).
func LocalOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if typ, detail := readRefusal(r); typ != "" {
			refuse(w, r, http.StatusForbidden, typ, detail)
			return
		}
		h.ServeHTTP(w, r)
	})
}

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/brownout/brownout/api"
	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/internal/service"
)

// router is the HTTP surface of a daemon of several services, above
// their APIs. A request says its service by its path or by a header
// (package service), and the router hands it to that service's unit
// before a byte of its body is read, so that the service's own tokens,
// caps and bounds decide it:
//
//   - /services/{name}/… is the service's routes without the prefix:
//     /services/{name}/ofrep/v1/…, /services/{name}/v1/… and its dial at
//     /services/{name}/. A service.Header, when present, must agree.
//   - /ofrep/v1/… and /v1/… with service.Header: {name} are that
//     service's.
//   - GET /v1/state without the header lists every service with its
//     state (servicesJSON): what the root's dial shows.
//
// Anything else at the root is refused with a 400 that names the
// services (OFREP's error shape under /ofrep/, problem+json elsewhere),
// and a name the daemon does not serve with a 404. It is safe for
// concurrent use: a reload swaps its units whole (publish), and a
// request reads them once, as they were when it arrived. A request
// handed to a unit that a reload is retiring meanwhile is answered as
// one for a service the daemon does not serve (unit.enter).
type router struct {
	set atomic.Pointer[unitSet]
	// guard is the root's own reads' (the list): api.LocalOnly on a
	// loopback listener, as the services' reads are guarded.
	guard func(http.Handler) http.Handler
}

// unitSet is the services a daemon serves at a time: never changed once
// published, replaced whole by a reload.
type unitSet struct {
	byName map[string]*unit
	order  []*unit // the configuration's order
}

func newRouter(units []*unit, loopback bool) *router {
	rt := &router{guard: func(h http.Handler) http.Handler { return h }}
	if loopback {
		rt.guard = api.LocalOnly
	}
	rt.publish(units)
	return rt
}

// publish makes units, in the configuration's order, the services the
// router hands requests to, from the next request on.
func (rt *router) publish(units []*unit) {
	set := &unitSet{byName: make(map[string]*unit, len(units)), order: slices.Clone(units)}
	for _, u := range units {
		set.byName[u.name] = u
	}
	rt.set.Store(set)
}

// units returns the services served now.
func (rt *router) units() *unitSet { return rt.set.Load() }

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	set := rt.units()
	named, ok := namedService(r)
	if !ok {
		// Routed by the first, a proxy in front that checks another
		// would let one service's request through to another.
		rt.refuse(w, r, http.StatusBadRequest, "service-mismatch", service.Header+" given more than once: say it once")
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/services/"); ok {
		if clean := cleanPath(r.URL.Path); clean != r.URL.Path {
			// As net/http's mux does, but with the service's prefix: its
			// own mux, under the prefix stripped, would send the client
			// to the cleaned path without it.
			u := *r.URL
			u.Path, u.RawPath = clean, ""
			code := http.StatusTemporaryRedirect
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				code = http.StatusMovedPermanently
			}
			server.Abandon(w, r)
			http.Redirect(w, r, u.RequestURI(), code)
			return
		}
		name, _, slash := strings.Cut(rest, "/")
		u := set.byName[name]
		switch {
		case u == nil:
			rt.refuse(w, r, http.StatusNotFound, "unknown-service", "no service "+quote(name)+" here: "+set.list())
		case named != "" && named != name:
			rt.refuse(w, r, http.StatusBadRequest, "service-mismatch", "the path names service "+quote(name)+" and "+service.Header+" "+quote(named)+": say one, or the same twice")
		case !slash && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			// The dial's files are relative to its page: /services/shop/.
			u := *r.URL
			u.Path += "/"
			u.RawPath = ""
			http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
		case !u.serve(u.handler, w, r):
			rt.refuse(w, r, http.StatusNotFound, "unknown-service", "no service "+quote(name)+" here: "+rt.units().list())
		}
		return
	}
	if named == "" {
		if r.URL.Path == "/v1/state" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			rt.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { getStates(set, w, r) })).ServeHTTP(w, r)
			return
		}
		rt.refuse(w, r, http.StatusBadRequest, "service-required", "this daemon serves several services ("+set.list()+
			"): say which with the path /services/{name}/… or the header "+service.Header)
		return
	}
	if u := set.byName[named]; u != nil && u.serve(u.api.Handler(), w, r) {
		return
	}
	rt.refuse(w, r, http.StatusNotFound, "unknown-service", service.Header+" "+quote(named)+": no such service here: "+rt.units().list())
}

// servicesJSON is GET /v1/state's body at the root of a daemon of
// several services ("v": 1): each service, in the configuration's order,
// with its routes' base and its state as its own /v1/state shows it.
type servicesJSON struct {
	V        int           `json:"v"`
	Services []serviceJSON `json:"services"`
}

// serviceJSON is one service of servicesJSON.
type serviceJSON struct {
	Name string `json:"name"`
	// Base is the service's routes' prefix, /services/{name}; its dial is
	// at Base + "/".
	Base  string        `json:"base"`
	State api.StateJSON `json:"state"`
}

func (set *unitSet) states() servicesJSON {
	out := servicesJSON{V: api.Version, Services: make([]serviceJSON, 0, len(set.order))}
	for _, u := range set.order {
		out.Services = append(out.Services, serviceJSON{Name: u.name, Base: service.Base(u.name), State: u.api.State()})
	}
	return out
}

func getStates(set *unitSet, w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(set.states()); err != nil {
		httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("api", "encoding"), Status: http.StatusInternalServerError, Detail: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

// refuse answers a request the router hands to no service: OFREP's
// error shape on OFREP's routes, problem+json (urn:brownout:api:<typ>)
// elsewhere. Its body is never read.
func (rt *router) refuse(w http.ResponseWriter, r *http.Request, status int, typ, detail string) {
	server.Abandon(w, r)
	if p, ofrep := ofrepPath(r.URL.Path); ofrep {
		key, single := strings.CutPrefix(p, "/ofrep/v1/evaluate/flags/")
		if !single || len(key) > 256 {
			key = ""
		}
		b, _ := json.Marshal(struct {
			Key          string `json:"key,omitempty"`
			ErrorCode    string `json:"errorCode"`
			ErrorDetails string `json:"errorDetails"`
		}{key, "GENERAL", detail})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		w.Write(append(b, '\n'))
		return
	}
	httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("api", typ), Status: status, Detail: detail})
}

// ofrepPath reports whether p, a root or a service's path, is one of
// OFREP's, and the path under /services/{name} when it is a service's.
func ofrepPath(p string) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "/services/"); ok {
		if _, sub, ok := strings.Cut(rest, "/"); ok {
			p = "/" + sub
		}
	}
	return p, strings.HasPrefix(p, "/ofrep/")
}

// maxListed bounds the services a refusal names.
const maxListed = 10

// list names the services for a refusal: at most maxListed of them.
func (set *unitSet) list() string {
	var b strings.Builder
	for i, u := range set.order {
		if i == maxListed {
			b.WriteString(", … (" + strconv.Itoa(len(set.order)) + " in all; GET /v1/state lists them)")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(u.name)
	}
	return b.String()
}

// quote quotes a name a client sent, at most 80 bytes of it.
func quote(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}

// namedService returns the service r names in its service.Header, ""
// for none; false when the header comes more than once.
func namedService(r *http.Request) (string, bool) {
	vs := r.Header.Values(service.Header)
	switch len(vs) {
	case 0:
		return "", true
	case 1:
		return vs[0], true
	}
	return "", false
}

// cleanPath is p without dot segments and repeated slashes, its trailing
// slash kept (path.Clean's, as net/http's mux cleans).
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// oneService guards the API of a daemon of one service (no services:):
// a request that names a service (service.Header) was meant for a daemon
// of several, and is refused with a 404 that says so, rather than
// answered with the levels of a service it did not ask for.
func oneService(h http.Handler) http.Handler {
	rt := &router{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := strings.Join(r.Header.Values(service.Header), ", "); strings.Trim(name, ", ") != "" {
			rt.refuse(w, r, http.StatusNotFound, "unknown-service", service.Header+" "+quote(name)+
				": this daemon serves one service, at its root, and names none (no services: in its configuration): drop the service option, or point at the daemon that serves it")
			return
		}
		if rest, ok := strings.CutPrefix(r.URL.Path, "/services/"); ok {
			name, _, _ := strings.Cut(rest, "/")
			rt.refuse(w, r, http.StatusNotFound, "unknown-service", "service "+quote(name)+
				" (/services/…): this daemon serves one service, at its root, and names none (no services: in its configuration): drop the /services/{name} prefix, or point at the daemon that serves it")
			return
		}
		h.ServeHTTP(w, r)
	})
}

package shed

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/brownout/brownout/signals"
)

// Route describes the requests that match a pattern.
type Route struct {
	// Pattern is an http.ServeMux pattern: "GET /search", "/checkout/".
	Pattern string
	// Class of the route's requests. An X-Priority header cannot raise a
	// request above it, only lower it.
	Class signals.Class
	// Cost is the declared cost in units (1 = an average request; one
	// search may cost as much as 100 profile views). Default 1.
	Cost float64
	// Scale, when set, multiplies the cost per request from its parameters
	// (e.g. page size).
	Scale func(*http.Request) float64
}

// Routes classifies requests and estimates their cost from a table of
// routes, correcting declared costs with measured service time: once a
// route has 20 completions its cost is its mean service time divided by the
// mean service time of one declared unit over all routes.
//
// Put Classify and Cost in Config, and wrap the handler in Middleware
// (inside the Shedder's) so that every service time is observed:
//
//	h = shedder.Middleware(routes.Middleware(app))
//
// Unmatched requests are default (lowered by their X-Priority header, as
// any) and cost 1. It is safe for concurrent use.
type Routes struct {
	mux    *http.ServeMux
	routes []Route
	index  map[string]int
	// declared: per route, whether it declares a cost (Cost or Scale set).
	declared []bool

	mu    sync.Mutex
	stats []routeStats
	unit  ewma // seconds per declared cost unit, all routes
}

type routeStats struct {
	n       int
	service ewma // seconds
}

type ewma struct {
	v  float64
	ok bool
}

func (e *ewma) add(x, w float64) {
	if !e.ok {
		e.v, e.ok = x, true
		return
	}
	e.v += w * (x - e.v)
}

// NewRoutes checks the table and returns it.
func NewRoutes(routes ...Route) (rt *Routes, err error) {
	rt = &Routes{mux: http.NewServeMux(), routes: slices.Clone(routes), index: map[string]int{}, stats: make([]routeStats, len(routes)), declared: make([]bool, len(routes))}
	defer func() {
		if p := recover(); p != nil { // ServeMux panics on a bad or duplicate pattern
			rt, err = nil, fmt.Errorf("shed: routes: %v", p)
		}
	}()
	for i, r := range routes {
		if r.Cost < 0 || r.Class >= signals.NumClasses {
			return nil, fmt.Errorf("shed: route %q: cost must not be negative and class must be known", r.Pattern)
		}
		rt.declared[i] = r.Cost != 0 || r.Scale != nil
		if r.Cost == 0 {
			rt.routes[i].Cost = 1
		}
		rt.mux.Handle(r.Pattern, http.NotFoundHandler())
		rt.index[r.Pattern] = i
	}
	return rt, nil
}

func (rt *Routes) match(r *http.Request) (int, bool) {
	_, pattern := rt.mux.Handler(r)
	i, ok := rt.index[pattern]
	return i, ok
}

// Classify returns the route's class (default for an unmatched request),
// lowered (never raised) by the request's X-Priority header. A Shedder
// with Config.TrustPriority lets the header raise it too.
func (rt *Routes) Classify(r *http.Request) signals.Class {
	c := signals.Default
	if i, ok := rt.match(r); ok {
		c = rt.routes[i].Class
	}
	return signals.LowerClass(r, c)
}

// DeclaredCost returns the request's cost as the table declares it (times
// Scale), never corrected by service time: for routes whose time is spent
// waiting on something that costs the server nothing (a payment gateway's
// 30 ms), where measured time would overstate their cost. It needs no
// Middleware.
func (rt *Routes) DeclaredCost(r *http.Request) float64 {
	i, ok := rt.match(r)
	if !ok {
		return 1
	}
	cost := rt.routes[i].Cost
	if scale := rt.routes[i].Scale; scale != nil {
		cost *= max(scale(r), 0)
	}
	return max(cost, 0.01)
}

// Declared returns the request's DeclaredCost and whether its route
// declares one (a Cost or a Scale): false for a request no route matches,
// and for a route that only classifies.
func (rt *Routes) Declared(r *http.Request) (cost float64, ok bool) {
	i, ok := rt.match(r)
	if !ok || !rt.declared[i] {
		return 1, false
	}
	return rt.DeclaredCost(r), true
}

// Cost returns the request's estimated cost.
func (rt *Routes) Cost(r *http.Request) float64 {
	i, ok := rt.match(r)
	if !ok {
		return 1
	}
	route := rt.routes[i]
	cost := route.Cost
	rt.mu.Lock()
	if st := rt.stats[i]; st.n >= 20 && rt.unit.ok && rt.unit.v > 0 {
		cost = st.service.v / rt.unit.v
	}
	rt.mu.Unlock()
	if route.Scale != nil {
		cost *= max(route.Scale(r), 0)
	}
	return max(cost, 0.01)
}

// Observe records a request's service time for its route's cost.
func (rt *Routes) Observe(r *http.Request, service time.Duration) {
	i, ok := rt.match(r)
	if !ok || service <= 0 {
		return
	}
	s := service.Seconds()
	rt.mu.Lock()
	st := &rt.stats[i]
	st.n++
	st.service.add(s, 0.05)
	rt.unit.add(s/rt.routes[i].Cost, 0.01)
	rt.mu.Unlock()
}

// Middleware wraps next so that Observe sees every request's service time.
func (rt *Routes) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		rt.Observe(r, time.Since(start))
	})
}

package deps

import (
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
)

// RecsCount is how many product ids the recommendation engine returns (fewer
// when the catalogue is smaller).
const RecsCount = 5

// DefaultCatalogSize is the size of the default catalogue: product ids
// "1" to "50", the shop's seeded catalogue.
const DefaultCatalogSize = 50

// RecsEngine is the simulated recommendation engine:
// GET /v1/recommendations?product=ID&user=U answers a JSON array of
// RecsCount product ids from its catalogue, never the product itself, the
// same for the same product and user.
type RecsEngine struct {
	opts    Options
	knobs   *knobs[Fault]
	mux     *http.ServeMux
	life    lifetime
	catalog []string

	requests, served, failed, invalid atomic.Int64
}

// RecsStats are the engine's counters since it was made.
type RecsStats struct {
	// Requests is every GET /v1/recommendations received.
	Requests int64 `json:"requests"`
	// Served is the requests answered 200.
	Served int64 `json:"served"`
	// Failed is the requests failed by ErrorRate (503).
	Failed int64 `json:"failed"`
	// Invalid is the requests refused with 400 (no product).
	Invalid int64 `json:"invalid"`
}

// NewRecsEngine returns a recommendation engine with DefaultRecsFault
// recommending from catalog (copied), or from "1" to "50" if it is empty.
func NewRecsEngine(opts Options, catalog []string) *RecsEngine {
	if len(catalog) == 0 {
		for i := range DefaultCatalogSize {
			catalog = append(catalog, strconv.Itoa(i+1))
		}
	} else {
		catalog = slices.Clone(catalog)
	}
	e := &RecsEngine{opts: opts.withDefaults(), mux: http.NewServeMux(), life: newLifetime(), catalog: catalog}
	e.knobs = newKnobs(DefaultRecsFault(), Fault.Validate, decodeFault, nil)
	e.mux.HandleFunc("GET /v1/recommendations", e.recommend)
	e.knobs.route(e.mux, func() any { return e.Stats() })
	return e
}

// ServeHTTP serves GET /v1/recommendations and the admin endpoints.
func (e *RecsEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if foreign(w, r) {
		return
	}
	e.mux.ServeHTTP(w, r)
}

// Start serves the engine on addr ("" or ":0": a free port on
// 127.0.0.1). Closing the Server closes the engine.
func (e *RecsEngine) Start(addr string) (*Server, error) { return start(addr, e, e.Close) }

// Close makes later requests fail with 503.
func (e *RecsEngine) Close() { e.life.cancel() }

// Fault returns the knobs in force.
func (e *RecsEngine) Fault() Fault { return e.knobs.get() }

// SetFault sets every knob; it refuses knobs that fail Fault.Validate.
func (e *RecsEngine) SetFault(f Fault) error { return e.knobs.set(f) }

// UpdateFault changes the knobs atomically: fn edits a copy of those in
// force, which replaces them if it passes Fault.Validate.
func (e *RecsEngine) UpdateFault(fn func(*Fault)) error { return e.knobs.update(fn) }

// ResetFault restores DefaultRecsFault.
func (e *RecsEngine) ResetFault() { e.knobs.reset() }

// Stats returns the counters.
func (e *RecsEngine) Stats() RecsStats {
	return RecsStats{Requests: e.requests.Load(), Served: e.served.Load(), Failed: e.failed.Load(), Invalid: e.invalid.Load()}
}

// Recommend is the answer for a product and a user, without latency or
// faults.
func (e *RecsEngine) Recommend(product, user string) []string {
	h := fnv.New64a()
	h.Write([]byte(product))
	h.Write([]byte{0})
	h.Write([]byte(user))
	x := h.Sum64()
	n := len(e.catalog)
	out := make([]string, 0, RecsCount)
	// Walk the catalogue from a point with a stride, both from the hash;
	// the stride is coprime with n, so the walk visits every id once.
	start, stride := int(x%uint64(n)), 1
	if n > 1 {
		stride = 1 + int((x>>32)%uint64(n-1))
		for gcd(stride, n) != 1 {
			stride++
		}
	}
	for i := 0; i < n && len(out) < RecsCount; i++ {
		id := e.catalog[(start+i*stride)%n]
		if id != product && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (e *RecsEngine) recommend(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	if e.life.closed() {
		writeProblem(w, http.StatusServiceUnavailable, "closed", "the recommendation engine is shutting down")
		return
	}
	q := r.URL.Query()
	product, user := q.Get("product"), q.Get("user")
	if product == "" || len(product) > maxKey || len(user) > maxKey {
		e.invalid.Add(1)
		writeProblem(w, http.StatusBadRequest, "bad-query", "product: required; product and user: at most 255 bytes")
		return
	}
	f := e.knobs.get()
	if draw(&e.opts, f.ErrorRate) {
		e.failed.Add(1)
		if e.opts.Sleep(r.Context(), f.Delay()) == nil {
			writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the recommendation engine failed (injected error)")
		}
		return
	}
	if e.opts.Sleep(r.Context(), f.Delay()) != nil {
		return // the client went away; nothing to keep doing
	}
	e.served.Add(1)
	writeJSON(w, http.StatusOK, e.Recommend(product, user))
}

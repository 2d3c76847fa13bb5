package deps

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
)

// maxKey bounds idempotency keys (Stripe's limit).
const maxKey = 255

// PaymentGateway is the simulated payment gateway: POST /v1/charges,
// POST /v1/charges/{id}/void and POST /v1/cancels.
//
// A charge is made at the end of the latency even if the client went away
// meanwhile, as a real gateway does; a retry with the same idempotency key
// gets the same charge id and is not charged again — unless the charge
// was voided: then the retry is refused (409, charge-voided), never
// answered as if the money were still taken. A cancel by key (a
// "technical cancel", for a client that does not know whether its charge
// was made) voids the charge made under the key, or, if none was, makes
// sure none will be.
type PaymentGateway struct {
	opts  Options
	knobs *knobs[Fault]
	mux   *http.ServeMux
	life  lifetime

	mu      sync.Mutex
	charges map[string]*charge // by idempotency key
	byID    map[string]*charge // the charges made, by id
	made    []*charge          // in the order made

	requests, count, amount, replayed, failed, invalid, conflicts atomic.Int64
	voided, voidedAmount, cancelled                               atomic.Int64
}

// charge is one charge made, or being made, under a key; or, with no id,
// a key cancelled before anything was charged under it.
type charge struct {
	id     string
	key    string
	order  string
	amount int64
	done   chan struct{} // closed once made (ok) or abandoned
	ok     bool
	voided bool // under PaymentGateway.mu
}

// ChargeRequest is the body of POST /v1/charges.
type ChargeRequest struct {
	// Order is the shop's order id; required.
	Order string `json:"order"`
	// AmountCents is the amount to charge; more than 0.
	AmountCents int64 `json:"amount_cents"`
	// IdempotencyKey may stand in for the Idempotency-Key header; if both
	// are given they must be equal.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Charge is the answer to a successful POST /v1/charges.
type Charge struct {
	// ID is the charge's id, "ch_" and 16 hex digits.
	ID string `json:"id"`
	// Order and AmountCents repeat the request.
	Order       string `json:"order"`
	AmountCents int64  `json:"amount_cents"`
	// Replayed is set when the answer comes from the idempotency key: the
	// charge was made by an earlier request.
	Replayed bool `json:"replayed,omitempty"`
}

// PaymentStats are the gateway's counters since it was made.
type PaymentStats struct {
	// Requests is every POST /v1/charges received.
	Requests int64 `json:"requests"`
	// Charges is the charges made, each once; AmountCents their total.
	Charges     int64 `json:"charges"`
	AmountCents int64 `json:"amount_cents"`
	// Replayed is the requests whose idempotency key had already been
	// seen (for the same order and amount): answered with the charge
	// made under it, never charged again.
	Replayed int64 `json:"replayed"`
	// Failed is the requests failed by ErrorRate (503).
	Failed int64 `json:"failed"`
	// Invalid is the requests refused with 400; Conflicts those refused
	// with 409 (a key reused for another order or amount).
	Invalid   int64 `json:"invalid"`
	Conflicts int64 `json:"conflicts"`
	// Voided is the charges voided (each once), VoidedCents their total:
	// money taken for an order that did not happen, given back.
	Voided      int64 `json:"voided"`
	VoidedCents int64 `json:"voided_cents"`
	// Cancelled is the keys cancelled before any charge was made under
	// them (POST /v1/cancels): nothing to give back, and nothing will be
	// charged under them.
	Cancelled int64 `json:"cancelled"`
}

// ChargeRecord is one charge made, as GET /admin/charges lists it.
type ChargeRecord struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Order          string `json:"order"`
	AmountCents    int64  `json:"amount_cents"`
	// Voided: given back. A charge not voided is live: money taken.
	Voided bool `json:"voided,omitempty"`
}

// CancelRequest is the body of POST /v1/cancels.
type CancelRequest struct {
	// IdempotencyKey is the key the charge was (or would have been)
	// requested under; required.
	IdempotencyKey string `json:"idempotency_key"`
}

// Cancellation is the answer to POST /v1/cancels.
type Cancellation struct {
	IdempotencyKey string `json:"idempotency_key"`
	// Charge is the id of the charge made under the key, now voided; ""
	// if none was made (and none will be).
	Charge string `json:"charge,omitempty"`
}

// NewPaymentGateway returns a payment gateway with DefaultPaymentFault.
func NewPaymentGateway(opts Options) *PaymentGateway {
	p := &PaymentGateway{opts: opts.withDefaults(), mux: http.NewServeMux(), life: newLifetime(),
		charges: map[string]*charge{}, byID: map[string]*charge{}}
	p.knobs = newKnobs(DefaultPaymentFault(), Fault.Validate, decodeFault, nil)
	p.mux.HandleFunc("POST /v1/charges", p.charge)
	p.mux.HandleFunc("POST /v1/charges/{id}/void", p.void)
	p.mux.HandleFunc("POST /v1/cancels", p.cancel)
	p.mux.HandleFunc("GET /admin/charges", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Charges())
	})
	p.knobs.route(p.mux, func() any { return p.Stats() })
	return p
}

// ServeHTTP serves POST /v1/charges and the admin endpoints.
func (p *PaymentGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if foreign(w, r) {
		return
	}
	p.mux.ServeHTTP(w, r)
}

// Start serves the gateway on addr ("" or ":0": a free port on
// 127.0.0.1). Closing the Server closes the gateway.
func (p *PaymentGateway) Start(addr string) (*Server, error) { return start(addr, p, p.Close) }

// Close abandons the charges in flight; later requests get 503.
func (p *PaymentGateway) Close() { p.life.cancel() }

// Fault returns the knobs in force.
func (p *PaymentGateway) Fault() Fault { return p.knobs.get() }

// SetFault sets every knob; it refuses knobs that fail Fault.Validate.
func (p *PaymentGateway) SetFault(f Fault) error { return p.knobs.set(f) }

// UpdateFault changes the knobs atomically: fn edits a copy of those in
// force, which replaces them if it passes Fault.Validate.
func (p *PaymentGateway) UpdateFault(fn func(*Fault)) error { return p.knobs.update(fn) }

// ResetFault restores DefaultPaymentFault.
func (p *PaymentGateway) ResetFault() { p.knobs.reset() }

// Stats returns the counters.
func (p *PaymentGateway) Stats() PaymentStats {
	return PaymentStats{
		Requests: p.requests.Load(), Charges: p.count.Load(), AmountCents: p.amount.Load(),
		Replayed: p.replayed.Load(), Failed: p.failed.Load(), Invalid: p.invalid.Load(), Conflicts: p.conflicts.Load(),
		Voided: p.voided.Load(), VoidedCents: p.voidedAmount.Load(), Cancelled: p.cancelled.Load(),
	}
}

// Charges lists every charge made, in the order made (GET /admin/charges
// serves the same list): what a test checks its orders against.
func (p *PaymentGateway) Charges() []ChargeRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ChargeRecord, len(p.made))
	for i, c := range p.made {
		out[i] = ChargeRecord{ID: c.id, IdempotencyKey: c.key, Order: c.order, AmountCents: c.amount, Voided: c.voided}
	}
	return out
}

// ChargeID returns the id of the charge made under an idempotency key, if
// one was made.
func (p *PaymentGateway) ChargeID(key string) (string, bool) {
	p.mu.Lock()
	c := p.charges[key]
	p.mu.Unlock()
	if c == nil {
		return "", false
	}
	select {
	case <-c.done:
		return c.id, c.ok
	default:
		return "", false
	}
}

func (p *PaymentGateway) charge(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if p.life.closed() {
		writeProblem(w, http.StatusServiceUnavailable, "closed", "the payment gateway is shutting down")
		return
	}
	var req ChargeRequest
	err := decodeBody(w, r, &req)
	key := r.Header.Get("Idempotency-Key")
	switch {
	case err != nil:
	case req.Order == "" || len(req.Order) > maxKey:
		err = fmt.Errorf("order: required, at most %d bytes", maxKey)
	case req.AmountCents <= 0:
		err = fmt.Errorf("amount_cents: must be more than 0, got %d", req.AmountCents)
	case key != "" && req.IdempotencyKey != "" && key != req.IdempotencyKey:
		err = fmt.Errorf("the Idempotency-Key header %q and idempotency_key %q differ", key, req.IdempotencyKey)
	case len(key) > maxKey || len(req.IdempotencyKey) > maxKey:
		err = fmt.Errorf("idempotency key: at most %d bytes", maxKey)
	}
	if err != nil {
		p.invalid.Add(1)
		writeProblem(w, http.StatusBadRequest, "bad-charge", oneLine(err))
		return
	}
	if key == "" {
		key = req.IdempotencyKey
	}
	f := p.knobs.get()
	if draw(&p.opts, f.ErrorRate) {
		p.failed.Add(1)
		if p.opts.Sleep(r.Context(), f.Delay()) == nil {
			writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the payment gateway failed (injected error)")
		}
		return
	}

	c := &charge{id: fmt.Sprintf("ch_%016x", rand.Uint64()), key: key, order: req.Order, amount: req.AmountCents, done: make(chan struct{})}
	if key != "" {
		p.mu.Lock()
		prev := p.charges[key]
		if prev == nil {
			p.charges[key] = c
		}
		p.mu.Unlock()
		if prev != nil {
			p.replay(w, r, prev, req, f)
			return
		}
	}
	// The charge is made whether or not the client is still there.
	if err := p.opts.Sleep(p.life.ctx, f.Delay()); err != nil {
		p.abandon(key, c)
		writeProblem(w, http.StatusServiceUnavailable, "closed", "the payment gateway is shutting down")
		return
	}
	p.mu.Lock()
	c.ok = true
	p.byID[c.id] = c
	p.made = append(p.made, c)
	p.mu.Unlock()
	p.count.Add(1)
	p.amount.Add(c.amount)
	close(c.done)
	writeJSON(w, http.StatusCreated, Charge{ID: c.id, Order: c.order, AmountCents: c.amount})
}

// refuseVoided answers a charge request whose key's charge was voided, or
// whose key was cancelled: the money is not taken, and saying otherwise
// would let an order stand on nothing.
func (p *PaymentGateway) refuseVoided(w http.ResponseWriter) {
	p.conflicts.Add(1)
	writeProblem(w, http.StatusConflict, voidedSlug,
		"the charge under this idempotency key was voided (or the key cancelled): nothing is charged under it; use a new key")
}

// voidedSlug is the problem type of a refused replay of a voided charge.
const voidedSlug = "charge-voided"

// isVoided reads c.voided under the lock.
func (p *PaymentGateway) isVoided(c *charge) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.voided
}

// replay answers a request whose key was seen: after its own latency, and
// once the first request's charge is made, with the same charge — unless
// it was voided.
func (p *PaymentGateway) replay(w http.ResponseWriter, r *http.Request, c *charge, req ChargeRequest, f Fault) {
	if p.isVoided(c) {
		p.refuseVoided(w)
		return
	}
	if c.order != req.Order || c.amount != req.AmountCents {
		p.conflicts.Add(1)
		writeProblem(w, http.StatusConflict, "key-reused",
			"this idempotency key was used for another order or amount")
		return
	}
	p.replayed.Add(1)
	if p.opts.Sleep(r.Context(), f.Delay()) != nil {
		return
	}
	select {
	case <-c.done:
	case <-r.Context().Done():
		return
	}
	if !c.ok {
		writeProblem(w, http.StatusServiceUnavailable, "closed", "the payment gateway is shutting down")
		return
	}
	if p.isVoided(c) { // voided while this request waited
		p.refuseVoided(w)
		return
	}
	w.Header().Set("Idempotent-Replayed", "true")
	writeJSON(w, http.StatusCreated, Charge{ID: c.id, Order: c.order, AmountCents: c.amount, Replayed: true})
}

func (p *PaymentGateway) abandon(key string, c *charge) {
	if key != "" {
		p.mu.Lock()
		if p.charges[key] == c {
			delete(p.charges, key)
		}
		p.mu.Unlock()
	}
	close(c.done)
}

// void gives a charge back: POST /v1/charges/{id}/void, after the
// dependency's latency. Voiding twice is answered 200 and counted once;
// an unknown id is a 404.
func (p *PaymentGateway) void(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f := p.knobs.get()
	if err := p.opts.Sleep(r.Context(), f.Delay()); err != nil {
		return // the client went away: nothing was voided
	}
	p.mu.Lock()
	found := p.byID[id] // made: ok is settled
	first := found != nil && p.voidLocked(found)
	p.mu.Unlock()
	if found == nil {
		writeProblem(w, http.StatusNotFound, "unknown-charge", "no charge "+id)
		return
	}
	writeJSON(w, http.StatusOK, Charge{ID: found.id, Order: found.order, AmountCents: found.amount, Replayed: !first})
}

// voidLocked voids a charge made, under p.mu, and reports whether this
// was the first void.
func (p *PaymentGateway) voidLocked(c *charge) bool {
	if c.voided {
		return false
	}
	c.voided = true
	p.voided.Add(1)
	p.voidedAmount.Add(c.amount)
	return true
}

// cancel is POST /v1/cancels {"idempotency_key"}, after the latency: the
// charge made under the key is voided (once a charge in flight under it
// is made); a key with no charge is marked so that a later charge under
// it is refused. Cancelling twice is answered the same.
func (p *PaymentGateway) cancel(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	err := decodeBody(w, r, &req)
	switch {
	case err != nil:
	case req.IdempotencyKey == "" || len(req.IdempotencyKey) > maxKey:
		err = fmt.Errorf("idempotency_key: required, at most %d bytes", maxKey)
	}
	if err != nil {
		p.invalid.Add(1)
		writeProblem(w, http.StatusBadRequest, "bad-cancel", oneLine(err))
		return
	}
	if err := p.opts.Sleep(r.Context(), p.knobs.get().Delay()); err != nil {
		return // the client went away: nothing was cancelled
	}
	key := req.IdempotencyKey
	for {
		p.mu.Lock()
		c := p.charges[key]
		if c == nil {
			done := make(chan struct{})
			close(done)
			p.charges[key] = &charge{key: key, done: done, voided: true}
			p.mu.Unlock()
			p.cancelled.Add(1)
			writeJSON(w, http.StatusOK, Cancellation{IdempotencyKey: key})
			return
		}
		p.mu.Unlock()
		select { // a charge in flight: void it once made
		case <-c.done:
		case <-r.Context().Done():
			return
		}
		p.mu.Lock()
		if p.charges[key] != c { // abandoned, and forgotten: look again
			p.mu.Unlock()
			continue
		}
		if c.ok {
			p.voidLocked(c)
		}
		p.mu.Unlock()
		writeJSON(w, http.StatusOK, Cancellation{IdempotencyKey: key, Charge: c.id})
		return
	}
}

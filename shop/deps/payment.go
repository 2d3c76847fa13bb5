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

// PaymentGateway is the simulated payment gateway: POST /v1/charges.
//
// A charge is made at the end of the latency even if the client went away
// meanwhile, as a real gateway does; a retry with the same idempotency key
// gets the same charge id and is not charged again.
type PaymentGateway struct {
	opts  Options
	knobs *knobs[Fault]
	mux   *http.ServeMux
	life  lifetime

	mu      sync.Mutex
	charges map[string]*charge // by idempotency key

	requests, made, amount, replayed, failed, invalid, conflicts atomic.Int64
	voided, voidedAmount                                         atomic.Int64
}

// charge is one charge made, or being made, under a key.
type charge struct {
	id     string
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
}

// NewPaymentGateway returns a payment gateway with DefaultPaymentFault.
func NewPaymentGateway(opts Options) *PaymentGateway {
	p := &PaymentGateway{opts: opts.withDefaults(), mux: http.NewServeMux(), life: newLifetime(), charges: map[string]*charge{}}
	p.knobs = newKnobs(DefaultPaymentFault(), Fault.Validate, decodeFault, nil)
	p.mux.HandleFunc("POST /v1/charges", p.charge)
	p.mux.HandleFunc("POST /v1/charges/{id}/void", p.void)
	p.knobs.route(p.mux, func() any { return p.Stats() })
	return p
}

// ServeHTTP serves POST /v1/charges and the admin endpoints.
func (p *PaymentGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

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
		Requests: p.requests.Load(), Charges: p.made.Load(), AmountCents: p.amount.Load(),
		Replayed: p.replayed.Load(), Failed: p.failed.Load(), Invalid: p.invalid.Load(), Conflicts: p.conflicts.Load(),
		Voided: p.voided.Load(), VoidedCents: p.voidedAmount.Load(),
	}
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

	c := &charge{id: fmt.Sprintf("ch_%016x", rand.Uint64()), order: req.Order, amount: req.AmountCents, done: make(chan struct{})}
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
	c.ok = true
	p.made.Add(1)
	p.amount.Add(c.amount)
	close(c.done)
	writeJSON(w, http.StatusCreated, Charge{ID: c.id, Order: c.order, AmountCents: c.amount})
}

// replay answers a request whose key was seen: after its own latency, and
// once the first request's charge is made, with the same charge.
func (p *PaymentGateway) replay(w http.ResponseWriter, r *http.Request, c *charge, req ChargeRequest, f Fault) {
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
	var found *charge
	for _, c := range p.charges {
		if c.id != id {
			continue
		}
		select {
		case <-c.done: // made (or abandoned): ok is settled
			if c.ok {
				found = c
			}
		default: // still being made: nothing to void yet
		}
		break
	}
	first := found != nil && !found.voided
	if first {
		found.voided = true
	}
	p.mu.Unlock()
	if found == nil {
		writeProblem(w, http.StatusNotFound, "unknown-charge", "no charge "+id)
		return
	}
	if first {
		p.voided.Add(1)
		p.voidedAmount.Add(found.amount)
	}
	writeJSON(w, http.StatusOK, Charge{ID: found.id, Order: found.order, AmountCents: found.amount, Replayed: !first})
}

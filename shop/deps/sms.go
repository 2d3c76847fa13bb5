package deps

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Bounds of an SMS.
const (
	maxTo   = 64
	maxBody = 1600 // ten concatenated segments
)

// SMSProvider is the simulated SMS provider: POST /v1/messages.
//
// It behaves as the sources' provider does when it goes from 200 ms to
// 30 s: it still delivers every message it accepted, at the end of the
// latency, even when the client timed out and went away; the client's
// retries, carrying the same Idempotency-Key, are answered 200 and absorbed
// (counted, not delivered again). Past its contract rate, shared by every
// client, it answers 429 with Retry-After.
type SMSProvider struct {
	opts    Options
	knobs   *knobs[SMSFault]
	mux     *http.ServeMux
	life    lifetime
	limiter *rate.Limiter

	mu         sync.Mutex
	msgs       map[string]*message // by idempotency key
	deliveries map[string]int      // by idempotency key
	content    map[string]int      // by to + "\x00" + body
	twice      int64               // keys delivered more than once

	requests, fresh, duplicates, delivered, rejected, failed, invalid, conflicts, repeated, aborted atomic.Int64
}

// message is one message accepted under a key.
type message struct {
	id, to, body string
	state        atomic.Int32 // sending, delivered or aborted
}

const (
	sending int32 = iota
	delivered
	aborted
)

var stateNames = [...]string{sending: "sending", delivered: "delivered", aborted: "failed"}

// SMSRequest is the body of POST /v1/messages; the Idempotency-Key header
// is required besides.
type SMSRequest struct {
	// To is the handset's number; required, at most 64 bytes.
	To string `json:"to"`
	// Body is the text; required, at most 1600 bytes.
	Body string `json:"body"`
}

// SMSMessage is the answer to an accepted POST /v1/messages: 201 for a new
// key, 200 for a duplicate.
type SMSMessage struct {
	// ID is the message's id, "msg_" and 16 hex digits; a duplicate gets
	// the first request's.
	ID string `json:"id"`
	// Status is "delivered", or "sending" while the first request's
	// latency runs.
	Status string `json:"status"`
	// Duplicate is set when the key had been seen: the message was not
	// sent again.
	Duplicate bool `json:"duplicate,omitempty"`
}

// SMSStats are the provider's counters since it was made.
type SMSStats struct {
	// Requests is every POST /v1/messages received.
	Requests int64 `json:"requests"`
	// Accepted is the requests accepted: those with a new key, to be
	// delivered, and the duplicates.
	Accepted int64 `json:"accepted"`
	// Delivered is the messages delivered to the handset, one per key.
	Delivered int64 `json:"delivered"`
	// DuplicatesAbsorbed is the accepted requests whose key had been seen:
	// answered 200 and not delivered again.
	DuplicatesAbsorbed int64 `json:"duplicates_absorbed"`
	// Pending is the messages accepted and not yet delivered.
	Pending int64 `json:"pending"`
	// Rejected429 is the requests refused past the contract rate.
	Rejected429 int64 `json:"rejected_429"`
	// Failed is the requests failed by ErrorRate (503).
	Failed int64 `json:"failed"`
	// Invalid is the requests refused with 400 (no key, bad body);
	// Conflicts those refused with 409 (a key reused for another text).
	Invalid   int64 `json:"invalid"`
	Conflicts int64 `json:"conflicts"`
	// Aborted is the messages accepted but never delivered because the
	// provider was closed first.
	Aborted int64 `json:"aborted"`
	// DeliveredTwice is the keys delivered more than once: 0 unless the
	// provider's idempotency is broken, for tests to assert over HTTP.
	DeliveredTwice int64 `json:"delivered_twice"`
	// RepeatedContent is the deliveries whose number and text had already
	// been delivered under another key: what a handset shows as a
	// duplicate SMS when a client retries with a fresh key.
	RepeatedContent int64 `json:"repeated_content"`
}

// NewSMSProvider returns an SMS provider with DefaultSMSFault.
func NewSMSProvider(opts Options) *SMSProvider {
	def := DefaultSMSFault()
	s := &SMSProvider{
		opts: opts.withDefaults(), mux: http.NewServeMux(), life: newLifetime(),
		limiter: rate.NewLimiter(rate.Limit(def.Rate), def.Burst),
		msgs:    map[string]*message{}, deliveries: map[string]int{}, content: map[string]int{},
	}
	s.knobs = newKnobs(def, SMSFault.Validate, decodeSMSFault, func(f SMSFault) {
		now := s.opts.Now()
		s.limiter.SetLimitAt(now, rate.Limit(f.Rate))
		s.limiter.SetBurstAt(now, f.Burst)
	})
	s.mux.HandleFunc("POST /v1/messages", s.send)
	s.mux.HandleFunc("GET /admin/deliveries", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Deliveries())
	})
	s.knobs.route(s.mux, func() any { return s.Stats() })
	return s
}

// ServeHTTP serves POST /v1/messages and the admin endpoints.
func (s *SMSProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if foreign(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Start serves the provider on addr ("" or ":0": a free port on
// 127.0.0.1). Closing the Server closes the provider.
func (s *SMSProvider) Start(addr string) (*Server, error) { return start(addr, s, s.Close) }

// Close abandons the messages not yet delivered (counted as Aborted);
// later requests get 503.
func (s *SMSProvider) Close() { s.life.cancel() }

// Fault returns the knobs in force.
func (s *SMSProvider) Fault() SMSFault { return s.knobs.get() }

// SetFault sets every knob; it refuses knobs that fail SMSFault.Validate.
func (s *SMSProvider) SetFault(f SMSFault) error { return s.knobs.set(f) }

// UpdateFault changes the knobs atomically: fn edits a copy of those in
// force, which replaces them if it passes SMSFault.Validate.
func (s *SMSProvider) UpdateFault(fn func(*SMSFault)) error { return s.knobs.update(fn) }

// ResetFault restores DefaultSMSFault.
func (s *SMSProvider) ResetFault() { s.knobs.reset() }

// Stats returns the counters.
func (s *SMSProvider) Stats() SMSStats {
	s.mu.Lock()
	twice := s.twice
	s.mu.Unlock()
	fresh, dup, del, ab := s.fresh.Load(), s.duplicates.Load(), s.delivered.Load(), s.aborted.Load()
	return SMSStats{
		Requests: s.requests.Load(), Accepted: fresh + dup, Delivered: del, DuplicatesAbsorbed: dup,
		Pending: fresh - del - ab, Rejected429: s.rejected.Load(), Failed: s.failed.Load(),
		Invalid: s.invalid.Load(), Conflicts: s.conflicts.Load(), Aborted: ab,
		DeliveredTwice: twice, RepeatedContent: s.repeated.Load(),
	}
}

// Delivered returns how many times the message under an idempotency key
// reached the handset: 0 or 1.
func (s *SMSProvider) Delivered(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deliveries[key]
}

// Deliveries returns, for every idempotency key delivered, how many times
// its message reached the handset (GET /admin/deliveries serves the same
// map): what a test checks its orders' SMS against.
func (s *SMSProvider) Deliveries() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.deliveries)
}

// DeliveredContent returns how many times a text reached a number, under
// any key: more than 1 is a duplicate SMS as the customer sees it.
func (s *SMSProvider) DeliveredContent(to, body string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.content[to+"\x00"+body]
}

func (s *SMSProvider) send(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.life.closed() {
		writeProblem(w, http.StatusServiceUnavailable, "closed", "the SMS provider is shutting down")
		return
	}
	var req SMSRequest
	err := decodeBody(w, r, &req)
	key := r.Header.Get("Idempotency-Key")
	switch {
	case err != nil:
	case key == "":
		err = fmt.Errorf("the Idempotency-Key header is required")
	case len(key) > maxKey:
		err = fmt.Errorf("Idempotency-Key: at most %d bytes", maxKey)
	case req.To == "" || len(req.To) > maxTo:
		err = fmt.Errorf("to: required, at most %d bytes", maxTo)
	case req.Body == "" || len(req.Body) > maxBody:
		err = fmt.Errorf("body: required, at most %d bytes", maxBody)
	}
	if err != nil {
		s.invalid.Add(1)
		writeProblem(w, http.StatusBadRequest, "bad-message", oneLine(err))
		return
	}
	if wait, ok := s.admit(); !ok {
		s.rejected.Add(1)
		secs := max(int64(math.Ceil(wait.Seconds())), 1)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeProblemP(w, problem{
			Type: "urn:brownout:deps:rate-limit", Title: http.StatusText(http.StatusTooManyRequests),
			Status: http.StatusTooManyRequests, RetryAfterMS: max(wait.Milliseconds(), 1),
			Detail: fmt.Sprintf("past the contract rate of %g messages per second", s.knobs.get().Rate),
		})
		return
	}
	f := s.knobs.get()
	if draw(&s.opts, f.ErrorRate) {
		s.failed.Add(1)
		if s.opts.Sleep(r.Context(), f.Delay()) == nil {
			writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the SMS provider failed (injected error)")
		}
		return
	}

	m := &message{id: fmt.Sprintf("msg_%016x", rand.Uint64()), to: req.To, body: req.Body}
	s.mu.Lock()
	prev := s.msgs[key]
	if prev == nil {
		s.msgs[key] = m
	}
	s.mu.Unlock()
	if prev != nil {
		s.duplicate(w, r, prev, req, f)
		return
	}
	s.fresh.Add(1)
	// Delivered at the end of the latency whether or not the client is
	// still there: a provider does not know its client gave up.
	if err := s.opts.Sleep(s.life.ctx, f.Delay()); err != nil {
		m.state.Store(aborted)
		s.aborted.Add(1)
		writeProblem(w, http.StatusServiceUnavailable, "closed", "the SMS provider is shutting down")
		return
	}
	s.deliver(key, m)
	writeJSON(w, http.StatusCreated, SMSMessage{ID: m.id, Status: stateNames[delivered]})
}

// admit takes a token from the contract's bucket, or says how long until
// one is there.
func (s *SMSProvider) admit() (time.Duration, bool) {
	now := s.opts.Now()
	if s.limiter.AllowN(now, 1) {
		return 0, true
	}
	tokens := s.limiter.TokensAt(now)
	per := float64(s.limiter.Limit())
	return time.Duration((1 - tokens) / per * float64(time.Second)), false
}

func (s *SMSProvider) deliver(key string, m *message) {
	s.mu.Lock()
	s.deliveries[key]++
	if s.deliveries[key] == 2 {
		s.twice++
	}
	c := m.to + "\x00" + m.body
	s.content[c]++
	if s.content[c] > 1 {
		s.repeated.Add(1)
	}
	m.state.Store(delivered)
	s.delivered.Add(1)
	s.mu.Unlock()
}

// duplicate answers a request whose key was seen, after its own latency:
// 200 with the first request's message, which is not sent again.
func (s *SMSProvider) duplicate(w http.ResponseWriter, r *http.Request, m *message, req SMSRequest, f SMSFault) {
	if m.to != req.To || m.body != req.Body {
		s.conflicts.Add(1)
		writeProblem(w, http.StatusConflict, "key-reused", "this idempotency key was used for another number or text")
		return
	}
	s.duplicates.Add(1)
	if s.opts.Sleep(r.Context(), f.Delay()) != nil {
		return
	}
	writeJSON(w, http.StatusOK, SMSMessage{ID: m.id, Status: stateNames[m.state.Load()], Duplicate: true})
}

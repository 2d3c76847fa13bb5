package sim

import (
	"slices"
	"time"

	"github.com/brownout/brownout/internal/gate"
	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Shed runs package shed's gate — the state machine behind the production
// middleware, adaptive concurrency limit included — as the lab's admission
// policy. It is not told the server's worker count: requests it admits
// beyond the free workers wait inside the app, as they do behind a real
// gate, and the limit has to find the bottleneck from latency. The
// cascade's shed level is applied by the engine at the door, as
// shed.Shedder does before its gate.
type Shed struct {
	g *gate.Gate
	// byT is the request of each ticket at the gate (a request holds its
	// own: Request.ticket).
	byT   map[*gate.Ticket]*Request
	ready []*Request // admitted, waiting for a worker inside the app

	rec      *signals.Recorder   // the engine's, for sojourn at the gate and the gate's reading
	admitted func(signals.Class) // the engine's count of admissions

	// observe, when set, sees every completion before the gate does (the
	// lab's comparison of limit algorithms drives SetLimit from it).
	observe func(now time.Time, t *gate.Ticket)
}

// NewShed returns a Shed policy with cfg, its limit adaptive unless cfg
// says otherwise.
func NewShed(cfg shed.GateConfig) *Shed {
	return &Shed{g: gate.New(cfg), byT: map[*gate.Ticket]*Request{}}
}

// NewShedFixed returns a Shed policy whose limit is fixed at n cost units:
// the reference runs of a gate told the worker count.
func NewShedFixed(cfg shed.GateConfig, n float64) *Shed {
	n = max(n, 1)
	cfg.Limit = shed.LimitConfig{Initial: n, Min: n, Max: n, Fixed: true}
	return NewShed(cfg)
}

// Gate returns the gate, for inspection.
func (s *Shed) Gate() *gate.Gate { return s.g }

// Limit implements Limiter.
func (s *Shed) Limit() float64 { return s.g.Limit() }

func (s *Shed) dropper(drop func(*Request, signals.Reason)) func(*gate.Ticket, signals.Reason) {
	return func(t *gate.Ticket, why signals.Reason) {
		r := s.byT[t]
		s.forget(r, t)
		drop(r, why)
	}
}

func (s *Shed) forget(r *Request, t *gate.Ticket) {
	r.ticket = nil
	delete(s.byT, t)
}

// Offer implements Admission.
func (s *Shed) Offer(now time.Time, r *Request, drop func(*Request, signals.Reason)) (bool, signals.Reason) {
	t := &gate.Ticket{Class: r.Class, Cost: r.Estimate, Arrival: now, Deadline: r.Deadline}
	r.ticket, s.byT[t] = t, r
	d, why := s.g.Arrive(now, t, s.dropper(drop))
	switch d {
	case gate.Refused:
		s.forget(r, t)
		return false, why
	case gate.Admitted:
		s.ready = append(s.ready, r)
		s.queued(r.Class, 0, now)
	}
	return true, 0
}

// recording is an Admission that records queue sojourn and its gate's
// reading into the engine's recorder itself.
type recording interface {
	record(rec *signals.Recorder, admitted func(signals.Class))
}

func (s *Shed) record(rec *signals.Recorder, admitted func(signals.Class)) {
	s.rec, s.admitted = rec, admitted
	rec.SetGate(func() signals.GateReading {
		q := 0
		for c := range signals.Class(signals.NumClasses) {
			q += s.g.Queued(c)
		}
		return signals.GateReading{Limit: s.g.Limit(), InFlight: s.g.InFlight(), Queued: q}
	})
}

func (s *Shed) queued(c signals.Class, d time.Duration, now time.Time) {
	if s.admitted != nil {
		s.admitted(c)
	}
	if s.rec != nil {
		s.rec.Queued(c, d, now)
	}
}

// Pull implements Admission: what the gate admits now (room freed) joins
// the requests admitted and waiting inside the app, in the order the gate
// chose; the oldest of them starts.
func (s *Shed) Pull(now time.Time, drop func(*Request, signals.Reason)) *Request {
	for {
		t := s.g.Next(now, s.dropper(drop))
		if t == nil {
			break
		}
		s.ready = append(s.ready, s.byT[t])
		s.queued(t.Class, now.Sub(t.Arrival), now)
	}
	if len(s.ready) == 0 {
		return nil
	}
	r := s.ready[0]
	s.ready = s.ready[1:]
	return r
}

// Done implements Admission.
func (s *Shed) Done(now time.Time, r *Request) {
	t := r.ticket
	if t == nil {
		return
	}
	if s.observe != nil {
		s.observe(now, t)
	}
	s.g.Done(now, t)
	s.forget(r, t)
}

// Cancel implements Canceler: a request admitted and still waiting for a
// worker leaves, and the gate sees it end.
func (s *Shed) Cancel(now time.Time, r *Request) bool {
	i := slices.Index(s.ready, r)
	if i < 0 {
		return false
	}
	s.ready = slices.Delete(s.ready, i, i+1)
	s.Done(now, r)
	return true
}

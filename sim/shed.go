package sim

import (
	"time"

	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Shed runs package shed's Gate — the state machine behind the production
// middleware — as the lab's admission policy. The lab's server has Workers
// workers, so the gate's concurrency limit is fixed at that number; the
// gate's queues, time bounds, CoDel, adaptive LIFO and deadline drops are
// the production code. The cascade's shed level is applied by the engine at
// the door, as shed.Shedder does before its gate.
type Shed struct {
	g       *shed.Gate
	tickets map[*Request]*shed.Ticket
	byT     map[*shed.Ticket]*Request
	ready   []*Request // admitted on arrival, not yet pulled
}

// NewShed returns a Shed policy for a server with the given workers; cfg's
// Limit is replaced by a fixed limit of workers.
func NewShed(cfg shed.GateConfig, workers int) *Shed {
	n := float64(max(workers, 1))
	cfg.Limit = shed.LimitConfig{Initial: n, Min: n, Max: n, Fixed: true}
	return &Shed{g: shed.NewGate(cfg), tickets: map[*Request]*shed.Ticket{}, byT: map[*shed.Ticket]*Request{}}
}

// Gate returns the gate, for inspection.
func (s *Shed) Gate() *shed.Gate { return s.g }

func (s *Shed) dropper(drop func(*Request, signals.Reason)) func(*shed.Ticket, signals.Reason) {
	return func(t *shed.Ticket, why signals.Reason) {
		r := s.byT[t]
		s.forget(r, t)
		drop(r, why)
	}
}

func (s *Shed) forget(r *Request, t *shed.Ticket) {
	delete(s.tickets, r)
	delete(s.byT, t)
}

// Offer implements Admission.
func (s *Shed) Offer(now time.Time, r *Request, drop func(*Request, signals.Reason)) (bool, signals.Reason) {
	t := &shed.Ticket{Class: r.Class, Cost: r.Estimate, Arrival: now, Deadline: r.Deadline}
	s.tickets[r], s.byT[t] = t, r
	d, why := s.g.Arrive(now, t, s.dropper(drop))
	switch d {
	case shed.Refused:
		s.forget(r, t)
		return false, why
	case shed.Admitted:
		s.ready = append(s.ready, r)
	}
	return true, 0
}

// Pull implements Admission.
func (s *Shed) Pull(now time.Time, drop func(*Request, signals.Reason)) *Request {
	if len(s.ready) > 0 {
		r := s.ready[0]
		s.ready = s.ready[1:]
		return r
	}
	t := s.g.Next(now, s.dropper(drop))
	if t == nil {
		return nil
	}
	return s.byT[t]
}

// Done implements Admission.
func (s *Shed) Done(now time.Time, r *Request) {
	t, ok := s.tickets[r]
	if !ok {
		return
	}
	s.g.Done(now, t)
	s.forget(r, t)
}

package fallback

import (
	"sync"
	"time"
)

// outcome is what a finished attempt tells the breaker about the
// dependency.
type outcome uint8

const (
	// unknown: the attempt says nothing about the dependency — the
	// bulkhead refused it, or its caller cancelled or ran out of deadline
	// before the guard's own timeout. It is not recorded.
	unknown outcome = iota
	// answered: the dependency answered, with a result or a refusal of the
	// request (a 400 or 404).
	answered
	// failed: the attempt timed out, or the dependency failed (5xx, 429, a
	// broken connection, any error that is not an answer).
	failed
)

// The breaker's states, as Transition and Status name them.
const (
	closedState   = "closed"
	openState     = "open"
	halfOpenState = "half-open"
)

// breaker is the guard's count-based circuit breaker: closed, it opens
// when at least failures of the last window recorded attempts failed; open,
// it refuses for delay; then half-open, it lets trials attempts through,
// closes when they all answered and opens again at the first failure.
//
// failsafe-go's breaker records every execution as a success or a failure,
// and gives a half-open trial's permit back only by recording it; this one
// also leaves an attempt out (outcome unknown), its trial permit returned,
// so that bulkhead refusals and callers who went away neither keep a
// failing dependency's breaker closed nor close it without a real trial.
type breaker struct {
	window, failures, trials uint
	delay                    time.Duration
	// changed records a transition. It is called under the breaker's
	// lock, so the transitions are recorded in the order they happen; it
	// must not call back into the breaker. The Transition it returns is
	// handed to the caller of acquire or record, to tell the listeners
	// once the lock is released.
	changed func(from, to string) Transition

	mu    sync.Mutex
	state string
	// epoch is bumped at every transition: a ticket from another epoch is
	// an attempt that began in a state now gone, and is not recorded
	// (a call begun while closed that ends while half-open is no trial).
	epoch uint64
	// closed: the last recorded outcomes, true for a failure.
	ring     []bool
	next     int
	nfailed  uint
	openedAt time.Time
	// half-open: trial places not taken, trials that answered.
	permits, answers uint
}

// ticket is an attempt's leave to call the dependency, handed back with its
// outcome.
type ticket struct {
	epoch uint64
}

func newBreaker(window, failures, trials uint, delay time.Duration, changed func(from, to string) Transition) *breaker {
	return &breaker{window: window, failures: failures, trials: trials, delay: delay, changed: changed,
		state: closedState, ring: make([]bool, 0, window)}
}

// acquire lets an attempt through, or reports false (open, or half-open
// with every trial place taken). An open breaker whose delay is over turns
// half-open here, on the attempt that finds it so; tr is that transition.
func (b *breaker) acquire() (t ticket, ok bool, tr []Transition) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == openState && time.Since(b.openedAt) >= b.delay {
		tr = b.to(halfOpenState)
	}
	switch b.state {
	case closedState:
		return ticket{b.epoch}, true, tr
	case halfOpenState:
		if b.permits > 0 {
			b.permits--
			return ticket{b.epoch}, true, tr
		}
	}
	return ticket{}, false, tr
}

// record takes an attempt's outcome, and returns the transition it caused,
// if any.
func (b *breaker) record(t ticket, o outcome) []Transition {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.epoch != b.epoch {
		return nil
	}
	switch b.state {
	case closedState:
		if o == unknown {
			return nil
		}
		f := o == failed
		if len(b.ring) < int(b.window) {
			b.ring = append(b.ring, f)
		} else {
			if b.ring[b.next] {
				b.nfailed--
			}
			b.ring[b.next] = f
			b.next = (b.next + 1) % int(b.window)
		}
		if f {
			b.nfailed++
		}
		if b.nfailed >= b.failures {
			return b.to(openState)
		}
	case halfOpenState:
		switch o {
		case unknown:
			b.permits++ // the trial did not happen: its place is free again
		case failed:
			return b.to(openState)
		case answered:
			if b.answers++; b.answers >= b.trials {
				return b.to(closedState)
			}
		}
	}
	return nil
}

// to moves to state s, with the state's fresh counts. Under b.mu.
func (b *breaker) to(s string) []Transition {
	from := b.state
	b.state = s
	b.epoch++
	switch s {
	case closedState:
		b.ring, b.next, b.nfailed = b.ring[:0], 0, 0
	case openState:
		b.openedAt = time.Now()
	case halfOpenState:
		b.permits, b.answers = b.trials, 0
	}
	return []Transition{b.changed(from, s)}
}

// current returns the state and, when open, the rest of its delay.
func (b *breaker) current() (string, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == openState {
		return b.state, max(0, b.delay-time.Since(b.openedAt))
	}
	return b.state, 0
}

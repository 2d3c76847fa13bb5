package load

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Retry is how a kind's clients retry. A failed attempt — a timeout, a
// transport error, a 5xx or a 429 — is sent again, the same request (path,
// body and headers, an Idempotency-Key included), after a wait. Retries
// are extra arrivals on top of the phases' rate, as in real life: they are
// paced by their due times, outside the phases' count, so Phase.Rate stays
// the rate of new requests.
type Retry struct {
	// Attempts is the most attempts of one request, the first included;
	// ≤ 1 retries nothing.
	Attempts int
	// Backoff is the wait before the first retry, doubled for each next
	// one (Backoff·2^(n−1) before retry n), at most Cap. 0: retry at once
	// (the naive client).
	Backoff time.Duration
	// Jitter draws each wait uniformly from [0, wait) ("full jitter").
	Jitter bool
	// Budget, when positive, caps the kind's retries at Budget × its first
	// attempts so far (a retry budget, e.g. 0.1); a failure beyond it is
	// not retried.
	Budget float64
	// Cap is the longest wait, of the backoff and of a Retry-After, which
	// is honoured up to it. Default 32 × Backoff (so the naive client
	// ignores Retry-After).
	Cap time.Duration
}

// RetryAfterHeader is honoured by retrying clients, up to Retry.Cap.
const RetryAfterHeader = "Retry-After"

// wait returns the wait before retry n (from 1) after an answer with
// header h.
func (rt Retry) wait(n int, h http.Header, rnd *rand.Rand, now time.Time) time.Duration {
	w := rt.Backoff
	for i := 1; i < n && w < rt.Cap; i++ {
		w *= 2
	}
	w = min(w, rt.Cap)
	if rt.Jitter && w > 0 {
		w = time.Duration(rnd.Int64N(int64(w)))
	}
	if ra, ok := retryAfter(h, now); ok {
		w = max(w, min(ra, rt.Cap))
	}
	return w
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get(RetryAfterHeader))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if !(n >= 0) || n > 1e6 {
			return 0, false
		}
		return time.Duration(n * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// retryable reports whether an answer is a failure a client retries.
func (r result) retryable() bool {
	return r.timeout || r.errored || r.code >= 500 || r.code == http.StatusTooManyRequests
}

// logical is a request of a retrying kind, still live: in flight, or
// waiting for its retry.
type logical struct {
	seq      uint64
	kind     int
	tgt      vegeta.Target
	attempts int           // sent so far
	due      time.Duration // of its retry, since the start
}

type dueHeap []*logical

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(*logical)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sched keeps the retries: the live requests of retrying kinds, a queue by
// due time, and the ones due, handed to the targeter.
type sched struct {
	retry    []*Retry // per kind; nil: no retries
	deadline time.Duration

	mu        sync.Mutex
	live      map[uint64]*logical
	due       dueHeap
	ready     []*logical
	dispensed uint64 // retries handed to the attacker
	firsts    []int  // first attempts, per kind
	granted   []int  // retries scheduled, per kind
	rnd       *rand.Rand

	notify   chan struct{} // something changed
	done     chan struct{} // the run is cancelled
	stopOnce sync.Once
}

// newSched returns nil when no kind retries. Retries due after the phases
// are still sent for a drain of Timeout + the longest Cap; later ones are
// given up.
func newSched(cfg Config, total time.Duration) *sched {
	s := &sched{live: map[uint64]*logical{}, notify: make(chan struct{}, 1), done: make(chan struct{}),
		firsts: make([]int, len(cfg.Mix)), granted: make([]int, len(cfg.Mix)),
		rnd: rand.New(rand.NewPCG(cfg.Seed^0x51afd7ed558ccd, cfg.Seed))}
	var longest time.Duration
	some := false
	for _, k := range cfg.Mix {
		var rt *Retry
		if k.Retry != nil && k.Retry.Attempts > 1 {
			c := *k.Retry
			if c.Cap == 0 {
				c.Cap = 32 * c.Backoff
			}
			rt, some = &c, true
			longest = max(longest, c.Cap)
		}
		s.retry = append(s.retry, rt)
	}
	if !some {
		return nil
	}
	s.deadline = total + cfg.Timeout + longest
	return s
}

func (s *sched) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *sched) stop() {
	if s != nil {
		s.stopOnce.Do(func() { close(s.done) })
	}
}

// add registers a first attempt.
func (s *sched) add(seq uint64, kind int, tgt *vegeta.Target) {
	if s.retry[kind] == nil {
		return
	}
	s.mu.Lock()
	s.live[seq] = &logical{seq: seq, kind: kind, tgt: *tgt, attempts: 1}
	s.firsts[kind]++
	s.mu.Unlock()
}

// take hands out a due retry, if there is one.
func (s *sched) take(tgt *vegeta.Target) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) == 0 {
		return false
	}
	lg := s.ready[0]
	s.ready[0] = nil
	s.ready = s.ready[1:]
	lg.attempts++
	*tgt = lg.tgt
	return true
}

// settle books an answer: it numbers the attempt and schedules a retry or
// forgets the request.
func (s *sched) settle(res *result, h http.Header, now time.Duration) {
	s.mu.Lock()
	lg := s.live[res.seq]
	if lg == nil || lg.kind != int(res.kind) {
		s.mu.Unlock()
		return
	}
	res.attempt = uint8(min(lg.attempts-1, 255))
	rt := s.retry[lg.kind]
	again := !res.ok() && res.retryable() && lg.attempts < rt.Attempts
	if again && rt.Budget > 0 && float64(s.granted[lg.kind]+1) > rt.Budget*float64(s.firsts[lg.kind]) {
		again = false // over budget
	}
	if again {
		lg.due = now + rt.wait(lg.attempts, h, s.rnd, time.Now())
		again = lg.due < s.deadline
	}
	if again {
		heap.Push(&s.due, lg)
		s.granted[lg.kind]++
	} else {
		delete(s.live, res.seq)
	}
	s.mu.Unlock()
	s.signal()
}

// retryPacer paces the phases' new requests as phases does, and the
// retries when they are due, outside the phases' count. It blocks in Pace
// until the next one is due, and ends the attack when the phases are over
// and no retry can come (or at the drain's deadline).
type retryPacer struct {
	ph    phases
	total time.Duration
	s     *sched
	timer *time.Timer
}

var _ vegeta.Pacer = (*retryPacer)(nil)

// Pace implements vegeta.Pacer.
func (p *retryPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	s := p.s
	base := time.Now().Add(-elapsed)
	for {
		now := time.Since(base)
		s.mu.Lock()
		if len(s.due) > 0 && s.due[0].due <= now {
			s.ready = append(s.ready, heap.Pop(&s.due).(*logical))
			s.dispensed++
			s.mu.Unlock()
			return 0, false
		}
		next := s.deadline
		if len(s.due) > 0 {
			next = min(next, s.due[0].due)
		}
		fresh, live := hits-s.dispensed, len(s.live)
		s.mu.Unlock()
		if now < p.total {
			if float64(fresh) < p.ph.due(now) {
				return 0, false
			}
			next = min(next, p.ph.at(fresh+1))
		} else if live == 0 || now >= s.deadline {
			return 0, true
		}
		wait := max(next-now, time.Microsecond)
		if p.timer == nil {
			p.timer = time.NewTimer(wait)
		} else {
			p.timer.Reset(wait)
		}
		select {
		case <-p.timer.C:
		case <-s.notify:
			p.timer.Stop()
		case <-s.done:
			p.timer.Stop()
			return 0, true
		}
	}
}

// Rate implements vegeta.Pacer: the phases' rate, without retries.
func (p *retryPacer) Rate(elapsed time.Duration) float64 { return p.ph.Rate(elapsed) }

// EventMark is an event as it happened.
type EventMark struct {
	Name string        `json:"name"`
	At   time.Duration `json:"at_ns"` // since the start
}

// events runs Config.Events.
type events struct {
	done  chan struct{}
	wg    sync.WaitGroup
	marks []EventMark
}

// startEvents runs evs at their offsets from start until the attack ends.
func startEvents(ctx context.Context, evs []Event, start time.Time, attackDone <-chan struct{}, progress io.Writer) *events {
	e := &events{done: make(chan struct{})}
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	go func() {
		defer close(e.done)
		for _, ev := range evs {
			t := time.NewTimer(max(time.Until(start.Add(ev.At)), 0))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			case <-attackDone:
				t.Stop()
				return
			}
			at := time.Since(start)
			e.marks = append(e.marks, EventMark{Name: ev.Name, At: at})
			if progress != nil {
				fmt.Fprintf(progress, "%4ds  event: %s\n", int(at/time.Second), ev.Name)
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				ev.Do(ctx)
			}()
		}
	}()
	return e
}

// wait waits for the events' Do to return (the caller has cancelled their
// ctx) and returns what happened.
func (e *events) wait() []EventMark {
	<-e.done
	e.wg.Wait()
	return e.marks
}

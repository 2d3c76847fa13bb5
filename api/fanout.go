package api

import (
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// The fan-out of a stream's messages (a hub to its subscribers).
//
// A hub sends a round at a time, from one goroutine (drain), in the order
// the rounds were sent: the newest message of each kind sent since the
// last round (a state, a tick, a replica event, an OFREP refetch: a
// stream never holds a backlog), its bytes encoded once and shared by
// every stream. For each stream the round is either written at once by
// the fan-out itself, or left pending for the stream's own goroutine
// (its pump), woken for it:
//
//   - written at once (deliver) where the stream owns its connection, a
//     plain TCP one (Config.OwnStreamConns; not TLS), its first messages
//     are out, and nothing of its own is pending or being written: the
//     round as one chunk of the chunked body, the same bytes for every
//     stream, in one non-blocking write to its socket — the kernel takes
//     it, or the rest goes to the pump (the pump writes it first, then
//     what came since, waiting for the client at most the stream's write
//     deadline). The fan-out's workers (one for each processor) so write
//     to every stream, without waking ten thousand goroutines for it;
//   - else (net/http's streams, a stream whose client lags, one busy)
//     pending: the stream's slot of each kind holds the newest, which its
//     pump writes at its next wake, and a message of a kind replaces the
//     older one not yet written.
//
// A stream's writer is whoever holds its wmu: its pump or a round's
// worker, so that their writes never interleave and keep the rounds'
// order.
//
// The server's CPU a delivery to 10 000 followers
// (BenchmarkStreamFanoutProcess): 5.3–6.8 µs with rounds written
// directly, 7.6–8.4 µs with every round left to the streams' pumps
// (three runs each, alternated, on a shared two-core machine); the
// bare anchor's, a goroutine per connection, is 6–7 µs.

// The kinds of a stream's messages, in the order a wake writes them.
const (
	kindReplica = iota
	kindState
	kindRefetch
	kindTick
	nKinds
)

// subscriber is one open stream.
type subscriber struct {
	// wake is the one channel its pump waits on: every reason to wake
	// comes through it, so that a wake costs a channel's receive, not a
	// select over the stream's every reason to wake.
	wake chan struct{}
	// wmu is held by whoever writes to the stream: its pump, or a round
	// written directly (deliver).
	wmu sync.Mutex
	mu  sync.Mutex // guards the rest
	// opening is the stream's first messages (see open), and pending
	// the newest message of each kind not yet written.
	opening [2][]byte
	pending [nKinds][]byte
	// partial is what the socket did not take of a round written
	// directly: written first by the pump.
	partial []byte
	// What its timers, its client and the API said: a keep-alive may be
	// due, its stream token expired, the client left, and recheck — the
	// API shuts down or its tokens changed — which holds direct writes
	// until the pump has looked.
	keepAlive, expired, gone, recheck bool
	// active: a round was written directly since the pump last looked
	// (the stream was not silent).
	active bool
	// raw is the socket, once the pump has written the stream's first
	// messages, where rounds may be written directly; nil otherwise.
	raw syscall.RawConn
	// stopped: the pump has ended; nothing more is written.
	stopped bool
}

// open gives s its first messages, head then state, written before
// anything pending: a round fanned out between the stream's join and its
// first messages (a replica's tick) is then written after them, so that
// the stream opens as they say (a replica's event, then the state). The
// state is given apart from the head so that streams opened on one state
// share its bytes (stateEvent).
func (s *subscriber) open(head, state []byte) {
	s.mu.Lock()
	s.opening = [2][]byte{head, state}
	s.mu.Unlock()
	s.kick()
}

// set gives s a pending message of kind k and wakes it.
func (s *subscriber) set(k int, b []byte) {
	s.mu.Lock()
	s.pending[k] = b
	s.mu.Unlock()
	s.kick()
}

// flag sets one of s's flags and wakes it.
func (s *subscriber) flag(f *bool) {
	s.mu.Lock()
	*f = true
	s.mu.Unlock()
	s.kick()
}

// kick wakes s's pump (a wake already pending will do).
func (s *subscriber) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// flags are what a subscriber's take says besides its messages.
type flags struct{ keepAlive, expired, gone, active bool }

// takeRoom is the room a take's buffer has: the opening's two messages,
// one of each kind, and one more (a keep-alive).
const takeRoom = 2 + nKinds + 1

// take returns the opening messages and the pending messages, in order,
// in buf (which has room for one more), what is left of a direct write,
// and the flags, and clears them; the pump has looked (recheck cleared).
// The caller holds wmu.
func (s *subscriber) take(buf *[takeRoom][]byte) (msgs [][]byte, partial []byte, f flags) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs = buf[:0]
	for i, b := range s.opening {
		if b != nil {
			msgs = append(msgs, b)
			s.opening[i] = nil
		}
	}
	for k, b := range s.pending {
		if b != nil {
			msgs = append(msgs, b)
			s.pending[k] = nil
		}
	}
	partial, s.partial = s.partial, nil
	f = flags{s.keepAlive, s.expired, s.gone, s.active}
	s.keepAlive, s.active, s.recheck = false, false, false
	return msgs, partial, f
}

// direct lets rounds be written on raw from now on (the pump, once the
// stream's first messages are out). The caller holds wmu.
func (s *subscriber) direct(raw syscall.RawConn) {
	s.mu.Lock()
	s.raw = raw
	s.mu.Unlock()
}

// stop ends s's writes: after it, nothing is written to the stream but by
// the caller (the end of its response).
func (s *subscriber) stop() {
	s.wmu.Lock()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wmu.Unlock()
}

// fanRound is one round of a hub's messages: the newest of each kind sent
// since the last, and all of them as one chunk of a chunked body.
type fanRound struct {
	msgs  [nKinds][]byte
	chunk []byte
}

// deliver gives s the round r: written at once when s may be written
// directly and its socket takes it, else pending for its pump.
func (s *subscriber) deliver(r *fanRound) {
	if !s.wmu.TryLock() {
		s.give(r) // its pump, or another round, is writing
		return
	}
	s.mu.Lock()
	if s.raw == nil || s.stopped || s.recheck || s.gone || s.expired || s.partial != nil || !none(s.opening[:]) || !none(s.pending[:]) {
		s.mu.Unlock()
		s.wmu.Unlock()
		s.give(r)
		return
	}
	s.active = true
	raw := s.raw
	s.mu.Unlock()
	n := writeNow(raw, r.chunk)
	switch {
	case n == len(r.chunk):
		s.wmu.Unlock()
	case n > 0: // the rest, before anything else
		s.mu.Lock()
		s.partial = r.chunk[n:]
		s.mu.Unlock()
		s.wmu.Unlock()
		s.kick()
	default: // nothing taken: pending, as for any stream
		s.wmu.Unlock()
		s.give(r)
	}
}

// give leaves r's messages pending for s's pump, and wakes it.
func (s *subscriber) give(r *fanRound) {
	s.mu.Lock()
	for k, b := range r.msgs {
		if b != nil {
			s.pending[k] = b
		}
	}
	s.mu.Unlock()
	s.kick()
}

// writeNow writes b to raw's socket without waiting for it: what the
// socket takes now (0 when it takes nothing, or on any error, which the
// pump's own write will meet).
func writeNow(raw syscall.RawConn, b []byte) int {
	n := 0
	raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
				continue
			}
			if err != syscall.EINTR {
				break
			}
		}
		return true // never wait
	})
	return n
}

// chunkOf is msgs, in order, as one chunk of a chunked body.
func chunkOf(msgs [][]byte) []byte {
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	b := make([]byte, 0, n+20)
	b = strconv.AppendInt(b, int64(n), 16)
	b = append(b, crlf...)
	for _, m := range msgs {
		b = append(b, m...)
	}
	return append(b, crlf...)
}

// hub fans messages out to the subscribers of one stream.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
	// queued is the newest message of each kind not yet in a round, and
	// draining says a goroutine sends the rounds.
	queued   [nKinds][]byte
	draining bool
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

func (h *hub) join() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) leave(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// members returns the subscribers now. The caller holds h.mu.
func (h *hub) members() []*subscriber {
	subs := make([]*subscriber, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	return subs
}

// send gives b to every subscriber as its message of kind k, in the next
// round; it does not wait for the round.
func (h *hub) send(k int, b []byte) {
	h.mu.Lock()
	h.queued[k] = b
	if h.draining {
		h.mu.Unlock()
		return
	}
	h.draining = true
	h.mu.Unlock()
	go h.drain()
}

// drain sends the rounds, one after another, until none is queued.
func (h *hub) drain() {
	for {
		h.mu.Lock()
		if none(h.queued[:]) {
			h.draining = false
			h.mu.Unlock()
			return
		}
		r := &fanRound{msgs: h.queued}
		h.queued = [nKinds][]byte{}
		subs := h.members()
		h.mu.Unlock()
		var msgs [nKinds][]byte
		r.chunk = chunkOf(compact(&msgs, &r.msgs))
		fanOut(subs, r)
	}
}

// none reports whether m holds no message.
func none(m [][]byte) bool {
	for _, b := range m {
		if b != nil {
			return false
		}
	}
	return true
}

// compact returns the messages of m, in order, in buf.
func compact(buf, m *[nKinds][]byte) [][]byte {
	out := buf[:0]
	for _, b := range m {
		if b != nil {
			out = append(out, b)
		}
	}
	return out
}

// perWorker is the fewest streams worth another worker of a round.
const perWorker = 256

// fanOut delivers r to subs, on as many workers as there are processors
// (fewer for fewer streams), and returns once every one has it.
func fanOut(subs []*subscriber, r *fanRound) {
	w := min(runtime.GOMAXPROCS(0), (len(subs)+perWorker-1)/perWorker)
	if w <= 1 {
		for _, s := range subs {
			s.deliver(r)
		}
		return
	}
	per := (len(subs) + w - 1) / w
	var wg sync.WaitGroup
	for i := per; i < len(subs); i += per {
		part := subs[i:min(i+per, len(subs))]
		wg.Go(func() {
			for _, s := range part {
				s.deliver(r)
			}
		})
	}
	for _, s := range subs[:per] {
		s.deliver(r)
	}
	wg.Wait()
}

// kick wakes every subscriber, to look again at what may end its stream
// (the API's shutdown, new tokens) before anything more is written to it
// directly.
func (h *hub) kick() {
	if h == nil {
		return // New sets the tokens before it makes the hubs
	}
	h.mu.Lock()
	subs := h.members()
	h.mu.Unlock()
	for _, s := range subs {
		s.flag(&s.recheck)
	}
}

package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brownout/brownout/dimmer"
)

// The push streams, Server-Sent Events:
//
//   - GET /v1/stream (ours, for the remote provider and the dial): on
//     connect the full state (event "state"), then every published change
//     (coalesced: a slow reader gets the newest, never a backlog, and the
//     controller never waits), a "tick" event per control tick with its
//     readings (the dial's chart), and keep-alive comments. State events'
//     ids are "<boot epoch>-<generation>", so a reconnecting client knows
//     whether it missed a change and whether the daemon restarted.
//   - GET /ofrep/v1/events (OFREP's, ADR 0008): event "message" with
//     data {"type":"refetchEvaluation","etag":…,"lastModified":…}, at
//     most one a second, ids "<boot>-<generation>"; a client that comes
//     back with an older Last-Event-ID (or from another boot) gets one at
//     once. The bulk evaluation advertises it in eventStreams.
//
// Where evaluation tokens are configured, both streams need one: in the
// Authorization or X-API-Key header, or — for browsers' EventSource, which
// cannot send headers — a short-lived token from POST /v1/stream/token in
// the URL (?token=).

// StreamTokenTTL is how long a stream token from /v1/stream/token lasts.
const StreamTokenTTL = 5 * time.Minute

// keepAlive is the interval of the streams' comments.
var keepAlive = 15 * time.Second

// ofrepMinInterval spaces OFREP's refetch events.
var ofrepMinInterval = time.Second

// subscriber is one open stream: the newest pending message of each kind,
// and a wake-up.
type subscriber struct {
	mu      sync.Mutex
	state   []byte
	tick    []byte
	refetch []byte
	wake    chan struct{}
}

func (s *subscriber) set(dst *[]byte, b []byte) {
	s.mu.Lock()
	*dst = b
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the pending messages, in order, and clears them.
func (s *subscriber) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, p := range []*[]byte{&s.state, &s.refetch, &s.tick} {
		if *p != nil {
			out = append(out, *p)
			*p = nil
		}
	}
	return out
}

// hub fans messages out to the subscribers of one stream.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
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

// send gives b to every subscriber as its pending message of one kind.
func (h *hub) send(kind func(*subscriber) *[]byte, b []byte) {
	h.mu.Lock()
	subs := make([]*subscriber, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	for _, s := range subs {
		s.set(kind(s), b)
	}
}

func stateSlot(s *subscriber) *[]byte   { return &s.state }
func tickSlot(s *subscriber) *[]byte    { return &s.tick }
func refetchSlot(s *subscriber) *[]byte { return &s.refetch }

// sse formats one event.
func sse(id, event string, data []byte) []byte {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + event + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	return []byte(b.String())
}

// eventID is a state's stream id.
func (a *API) eventID(gen uint64) string {
	return strconv.FormatInt(a.boot, 10) + "-" + strconv.FormatUint(gen, 10)
}

// parseEventID reads "<boot>-<generation>".
func parseEventID(s string) (boot int64, gen uint64, ok bool) {
	b, g, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		return 0, 0, false
	}
	boot, err1 := strconv.ParseInt(b, 10, 64)
	gen, err2 := strconv.ParseUint(g, 10, 64)
	return boot, gen, err1 == nil && err2 == nil
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// stateEvent encodes the current state as a stream event, with the shed
// seed: the stream is for the fleet's instances (and operators), and needs
// an evaluation token wherever any is configured, whereas GET /v1/state
// is open to anyone who reaches the daemon (see dimmer.ShedSeed).
func (a *API) stateEvent() []byte {
	st := a.State()
	return sse(a.eventID(st.Generation), "state", marshal(struct {
		StateJSON
		ShedSeed dimmer.ShedSeed `json:"shed_seed"`
	}{st, a.shedSeed()}))
}

// shedSeed is the seed of the fleet's sticky shedding: derived from the
// boot's secret (HMAC, so that it tells nothing of the stream tokens'
// key), new with each boot like the secret.
func (a *API) shedSeed() (seed dimmer.ShedSeed) {
	m := hmac.New(sha256.New, a.secret[:])
	m.Write([]byte("brownout shed seed"))
	copy(seed[:], m.Sum(nil))
	return seed
}

// refetchEvent is OFREP's change notification for generation gen.
func (a *API) refetchEvent(gen uint64, at time.Time) []byte {
	return sse(a.eventID(gen), "message", marshal(map[string]any{
		"type": "refetchEvaluation", "etag": a.BulkETag(gen), "lastModified": at.Unix()}))
}

// Publish sends a published state to the stream's followers now (Run
// does it for every state the controller publishes; a change made outside
// Run's loop, as in a test, may be sent at once).
func (a *API) Publish(st *dimmer.State) { a.published(st) }

// published is called by Run for every published state.
func (a *API) published(st *dimmer.State) {
	if a.streams.count() > 0 {
		a.streams.send(stateSlot, a.stateEvent())
	}
}

// ticked is called by Run for every recorded tick.
func (a *API) ticked(p Point) {
	if a.streams.count() > 0 {
		a.streams.send(tickSlot, sse("", "tick", marshal(struct {
			V int `json:"v"`
			Point
		}{Version, p})))
	}
}

// streamAuth checks a stream request: open without evaluation tokens;
// else a header token or a stream token in the URL.
func (a *API) streamAuth(w http.ResponseWriter, r *http.Request) bool {
	toks := a.tokens.Load().eval
	if len(toks) == 0 {
		return true
	}
	if _, ok := token(r, toks); ok {
		return true
	}
	if _, ok := token(r, a.tokens.Load().operator); ok {
		return true
	}
	if t := r.URL.Query().Get("token"); t != "" && a.checkStreamToken(t) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="brownout stream"`)
	problem(w, http.StatusUnauthorized, "unauthorized", "this stream needs a token: Authorization: Bearer, X-API-Key, or ?token= from POST /v1/stream/token")
	return false
}

// streamToken is "<expiry unix>.<mac>", base64url: short-lived, for URLs.
func (a *API) streamToken(exp time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(exp.Unix()))
	m := hmac.New(sha256.New, a.secret[:])
	m.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:]) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

func (a *API) checkStreamToken(t string) bool {
	e, mac, ok := strings.Cut(t, ".")
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(e)
	if err != nil || len(b) != 8 {
		return false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(b)), 0)
	if !a.now().Before(exp) {
		return false
	}
	want := a.streamToken(exp)
	_, wantMAC, _ := strings.Cut(want, ".")
	return hmac.Equal([]byte(mac), []byte(wantMAC))
}

// postStreamToken is POST /v1/stream/token: a token for ?token=.
func (a *API) postStreamToken(w http.ResponseWriter, r *http.Request) {
	toks := a.tokens.Load()
	if len(toks.eval) > 0 {
		_, okE := token(r, toks.eval)
		_, okO := token(r, toks.operator)
		if !okE && !okO {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brownout stream"`)
			problem(w, http.StatusUnauthorized, "unauthorized", "a stream token is given for an evaluation or operator token")
			return
		}
	}
	exp := a.now().Add(StreamTokenTTL).Truncate(time.Second)
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "token": a.streamToken(exp), "expires": exp})
}

func newSecret() (s [32]byte) {
	rand.Read(s[:])
	return s
}

// open starts an event stream's answer; false if the writer cannot flush.
func open(w http.ResponseWriter) (*http.ResponseController, bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering (nginx)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return rc, false
	}
	return rc, true
}

// pump writes s's messages as they come, keep-alives between, until the
// client leaves or the API shuts down (then a last "shutdown" event).
func (a *API) pump(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, s *subscriber) {
	ka := time.NewTicker(keepAlive)
	defer ka.Stop()
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-a.closing:
			write(sse("", "shutdown", marshal(map[string]any{"v": Version, "reason": "the daemon is stopping"})))
			return
		case <-ka.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-s.wake:
			for _, b := range s.take() {
				if !write(b) {
					return
				}
			}
		}
	}
}

// getStream is GET /v1/stream.
func (a *API) getStream(w http.ResponseWriter, r *http.Request) {
	if !a.streamAuth(w, r) {
		return
	}
	s := a.streams.join()
	defer a.streams.leave(s)
	rc, ok := open(w)
	if !ok {
		return
	}
	s.set(&s.state, append([]byte("retry: 1000\n\n"), a.stateEvent()...))
	a.pump(w, r, rc, s)
}

// getOFREPEvents is GET /ofrep/v1/events.
func (a *API) getOFREPEvents(w http.ResponseWriter, r *http.Request) {
	if !a.evalAuthStream(w, r) {
		return
	}
	s := a.ofrepStreams.join()
	defer a.ofrepStreams.leave(s)
	rc, ok := open(w)
	if !ok {
		return
	}
	gen := a.ctl.State().Generation
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if boot, g, ok := parseEventID(last); !ok || boot != a.boot || g < gen {
			s.set(&s.refetch, a.refetchEvent(gen, a.now()))
		}
	}
	a.pump(w, r, rc, s)
}

func (a *API) evalAuthStream(w http.ResponseWriter, r *http.Request) bool { return a.streamAuth(w, r) }

// Streams returns how many clients follow each stream (ours, OFREP's).
func (a *API) Streams() (ours, ofrep int) { return a.streams.count(), a.ofrepStreams.count() }

// Shutdown ends every stream with a last event (call it before the
// server's Shutdown, which waits for open requests).
func (a *API) Shutdown() {
	a.closeOnce.Do(func() { close(a.closing) })
}

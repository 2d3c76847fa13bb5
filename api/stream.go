package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/server"
)

// The push streams, Server-Sent Events:
//
//   - GET /v1/stream (ours, for the remote provider and the dial): on
//     connect the full state (event "state"), then every published change
//     (coalesced: a slow reader gets the newest, never a backlog, and the
//     controller never waits), a "tick" event per control tick with its
//     readings (the dial's chart), and a keep-alive comment when it has
//     been silent for keepAlive; a replica
//     (Config.Cluster) adds a "replica" event every tick, and first on
//     connect (cluster.go). State events' ids are "<boot
//     epoch>-<generation>", so a reconnecting client knows whether it
//     missed a change and whether the daemon restarted.
//   - GET /ofrep/v1/events (OFREP's, ADR 0008): event "message" with
//     data {"type":"refetchEvaluation","etag":…,"lastModified":…}, at
//     most one a second, ids "<boot>-<generation>"; a client that comes
//     back with an older Last-Event-ID (or from another boot) gets one at
//     once. The bulk evaluation advertises it in eventStreams.
//
// Where evaluation tokens are configured, both streams need one: in the
// Authorization or X-API-Key header, or — for browsers' EventSource, which
// cannot send headers — a short-lived token from POST /v1/stream/token in
// the URL (?token=). A stream lasts only as long as what let it open: it
// ends with a last "reauth" event when its stream token expires, and when
// new tokens (SetTokens, a reload) no longer admit it — its header token
// was removed, the token its stream token was given for was, or tokens
// are required where none were.
//
// At most Config.MaxStreams streams are open at once, both kinds
// together (Config.StreamCap: those of every API that shares it); past it a stream is refused (503, Retry-After), so that
// clients that open streams and never read them hold a bounded share of
// the server's connections.

// StreamTokenTTL is how long a stream token from /v1/stream/token lasts.
const StreamTokenTTL = 5 * time.Minute

// DefaultMaxStreams is Config.MaxStreams' default: half of the
// connections a server of this project holds (server.MaxConns), so that
// streams never take them all, and above the 1 000 followers the fan-out
// is measured with.
const DefaultMaxStreams = server.MaxConns / 2

// streamRetry is the Retry-After of a refused stream, in seconds.
const streamRetry = "5"

// keepAlive is how long a stream stays silent before a keep-alive
// comment (a stream that carries ticks never is).
var keepAlive = 15 * time.Second

// streamWriteTimeout is how long a stream's write may wait, at least, for
// a client that stopped reading (its socket's buffers full) before the
// stream ends; at most half as long again (pump says why).
var streamWriteTimeout = 10 * time.Second

// ofrepMinInterval spaces OFREP's refetch events.
var ofrepMinInterval = time.Second

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
	b, err := json.Marshal(v)
	if err != nil {
		// Never an empty event: a JSON object that says what went wrong.
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return b
}

// stateEvent encodes the current state as a stream event, with the shed
// seed: the stream is for the fleet's instances (and operators), and needs
// an evaluation token wherever any is configured, whereas GET /v1/state
// is open to anyone who reaches the daemon (see dimmer.ShedSeed).
//
// Equal to the last one encoded, it returns that one's bytes: every
// stream opened on the same state shares them. A stream's first state is
// held for as long as the socket has not taken it all, which for a
// client that does not read is as long as the stream lasts; with a copy
// each, a thousand unread streams on a large state (a fleet's thousand
// instances: 80 KB) held a copy each wherever the kernel took less than
// the whole event.
func (a *API) stateEvent() []byte {
	st := a.State()
	b := sse(a.eventID(st.Generation), "state", marshal(struct {
		StateJSON
		ShedSeed dimmer.ShedSeed `json:"shed_seed"`
	}{st, a.shedSeed()}))
	b = b[:len(b):len(b)] // shared: an append must copy, never write into it
	if last := a.lastState.Load(); last != nil && bytes.Equal(*last, b) {
		return *last
	}
	a.lastState.Store(&b)
	return b
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
		a.streams.send(kindState, a.stateEvent())
	}
}

// ticked is called by Run for every recorded tick.
func (a *API) ticked(p Point) {
	if a.streams.count() > 0 {
		a.streams.send(kindTick, sse("", "tick", marshal(struct {
			V int `json:"v"`
			Point
		}{Version, p})))
	}
}

// streamCred is what let a stream open, checked again when the tokens
// change: a token in a header, or a stream token (its expiry and the
// fingerprint of the token it was given for); neither when streams were
// open.
type streamCred struct {
	header string
	exp    time.Time
	fp     []byte
}

// admits reports whether c still admits its stream under toks at now.
func (a *API) admits(c streamCred, toks *tokenSet, now time.Time) bool {
	switch {
	case len(toks.eval) == 0:
		return true // streams are open
	case c.header != "":
		return hasToken(toks.eval, c.header) || hasToken(toks.operator, c.header)
	case c.fp != nil:
		return now.Before(c.exp) && a.fingerprinted(c.fp, toks)
	}
	return false
}

// hasToken reports whether tok is one of toks, in constant time over
// every token.
func hasToken(toks map[string]string, tok string) bool {
	found := 0
	for _, t := range toks {
		found |= subtle.ConstantTimeCompare([]byte(tok), []byte(t))
	}
	return found == 1 && tok != ""
}

// streamAuth checks a stream request: open without evaluation tokens;
// else a header token (evaluation or operator) or a stream token in the
// URL. It returns what admitted the stream; refused, it has answered
// with fail.
func (a *API) streamAuth(w http.ResponseWriter, r *http.Request, toks *tokenSet, fail func(w http.ResponseWriter, status int, detail string)) (streamCred, bool) {
	if len(toks.eval) == 0 {
		return streamCred{}, true
	}
	if _, ok := token(r, toks.eval); ok {
		return streamCred{header: presented(r)}, true
	}
	if _, ok := token(r, toks.operator); ok {
		return streamCred{header: presented(r)}, true
	}
	if t := r.URL.Query().Get("token"); t != "" {
		if exp, fp, ok := a.checkStreamToken(t); ok && a.admits(streamCred{exp: exp, fp: fp}, toks, a.now()) {
			return streamCred{exp: exp, fp: fp}, true
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="brownout stream"`)
	fail(w, http.StatusUnauthorized, "this stream needs a token: Authorization: Bearer, X-API-Key, or ?token= from POST /v1/stream/token")
	return streamCred{}, false
}

// presented is the token r carries in a header, as token reads it.
func presented(r *http.Request) string {
	got := r.Header.Get("X-API-Key")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			got = strings.TrimSpace(rest)
		}
	}
	return got
}

// fingerprint names a token inside the stream tokens given for it,
// without revealing it: the first bytes of its MAC under this boot's
// secret.
func (a *API) fingerprint(tok string) []byte {
	m := hmac.New(sha256.New, a.secret[:])
	m.Write([]byte("token\x00" + tok))
	return m.Sum(nil)[:fpLen]
}

// fpLen is a fingerprint's length: 64 bits tell a handful of tokens
// apart, and a client cannot forge one (the stream token's MAC covers it).
const fpLen = 8

// fingerprinted reports whether fp names one of the evaluation or
// operator tokens of toks.
func (a *API) fingerprinted(fp []byte, toks *tokenSet) bool {
	found := 0
	for _, set := range []map[string]string{toks.eval, toks.operator} {
		for _, t := range set {
			found |= subtle.ConstantTimeCompare(fp, a.fingerprint(t))
		}
	}
	return found == 1
}

// streamToken is "<expiry unix><fingerprint>.<mac>", base64url:
// short-lived, for URLs, and only as good as the token it was given for
// (fp: its fingerprint).
func (a *API) streamToken(exp time.Time, fp []byte) string {
	b := make([]byte, 8, 8+fpLen)
	binary.BigEndian.PutUint64(b, uint64(exp.Unix()))
	b = append(b, fp...)
	m := hmac.New(sha256.New, a.secret[:])
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// checkStreamToken verifies a stream token's MAC and expiry and returns
// them with its fingerprint.
func (a *API) checkStreamToken(t string) (exp time.Time, fp []byte, ok bool) {
	e, mac, found := strings.Cut(t, ".")
	if !found {
		return time.Time{}, nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(e)
	if err != nil || len(b) != 8+fpLen {
		return time.Time{}, nil, false
	}
	exp = time.Unix(int64(binary.BigEndian.Uint64(b[:8])), 0)
	if !a.now().Before(exp) {
		return time.Time{}, nil, false
	}
	want := a.streamToken(exp, b[8:])
	_, wantMAC, _ := strings.Cut(want, ".")
	if !hmac.Equal([]byte(mac), []byte(wantMAC)) {
		return time.Time{}, nil, false
	}
	return exp, b[8:], true
}

// postStreamToken is POST /v1/stream/token: a token for ?token=.
func (a *API) postStreamToken(w http.ResponseWriter, r *http.Request) {
	toks := a.tokens.Load()
	fp := make([]byte, fpLen) // no token: good while streams are open
	if len(toks.eval) > 0 {
		_, okE := token(r, toks.eval)
		_, okO := token(r, toks.operator)
		if !okE && !okO {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brownout stream"`)
			problem(w, http.StatusUnauthorized, "unauthorized", "a stream token is given for an evaluation or operator token")
			return
		}
		fp = a.fingerprint(presented(r))
	}
	exp := a.now().Add(StreamTokenTTL).Truncate(time.Second)
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "token": a.streamToken(exp, fp), "expires": exp})
}

func newSecret() (s [32]byte) {
	rand.Read(s[:])
	return s
}

// pump writes s's messages as they come, a keep-alive after keepAlive of
// silence, until the client leaves, the API shuts down (then a last
// "shutdown" event), or what admitted the stream no longer does (a last
// "reauth" event): its stream token expires, or new tokens (toks
// replaced) refuse it.
func (a *API) pump(ctx context.Context, out streamOut, s *subscriber, c streamCred, toks *tokenSet) {
	// Every reason to wake comes through s.wake: the client's leaving
	// (ctx), the keep-alive's and the stream token's timers (flags in
	// s), the API's shutdown and new tokens (Shutdown and SetTokens wake
	// every stream, and hold the rounds written directly until the pump
	// has looked: fanout.go); each wake looks at all of them.
	defer s.stop()
	defer context.AfterFunc(ctx, func() { s.flag(&s.gone) })()
	period := keepAlive
	ka := time.AfterFunc(period, func() { s.flag(&s.keepAlive) })
	defer ka.Stop()
	if !c.exp.IsZero() {
		t := time.AfterFunc(c.exp.Sub(a.now()), func() { s.flag(&s.expired) })
		defer t.Stop()
	}
	var pending [takeRoom][]byte
	wrote := false // since the keep-alive's timer was set
	first := true
	// step writes what the wake brought, holding the stream's writer's
	// lock; false when the stream ends.
	step := func() bool {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		msgs, partial, f := s.take(&pending)
		// Written, the events are the socket's: pending must not keep
		// them (an unread stream would hold its last events, among them
		// its first state — shared by the streams opened on one state,
		// its own where the state changed between their openings — for
		// as long as it lasts: 31308dd's 56 MB over 1 023 unread
		// streams).
		defer clear(pending[:])
		if f.gone {
			return false
		}
		select {
		case <-a.closing:
			out.last(sse("", "shutdown", marshal(map[string]any{"v": Version, "reason": a.shutdownReason()})))
			return false
		default:
		}
		select {
		case <-toks.replaced:
			toks = a.tokens.Load()
			if !a.admits(c, toks, a.now()) {
				out.last(sse("", "reauth", marshal(map[string]any{"v": Version, "reason": "the tokens changed and no longer admit this stream"})))
				return false
			}
		default:
		}
		if f.expired {
			out.last(sse("", "reauth", marshal(map[string]any{"v": Version, "reason": "the stream token expired: get a new one (POST /v1/stream/token) and reconnect"})))
			return false
		}
		if partial != nil && !out.writeRaw(partial) {
			return false
		}
		if len(msgs) > 0 || partial != nil || f.active {
			wrote = true
		}
		if f.keepAlive {
			if !wrote {
				msgs = append(msgs, keepAliveComment)
			}
			wrote = false
			ka.Reset(period)
		}
		if len(msgs) > 0 && !out.write(msgs...) {
			return false
		}
		if first {
			first = false
			s.direct(out.raw()) // its first messages are out
		}
		return true
	}
	for step() {
		<-s.wake
	}
}

// keepAliveComment is a stream's keep-alive.
var keepAliveComment = []byte(": keep-alive\n\n")

// StreamCap bounds the streams open at once, of one API or of several
// that share it (Config.StreamCap).
type StreamCap struct {
	max  int64
	open atomic.Int64
}

// NewStreamCap returns a cap of max streams (DefaultMaxStreams if max is
// not positive).
func NewStreamCap(max int) *StreamCap {
	if max <= 0 {
		max = DefaultMaxStreams
	}
	return &StreamCap{max: int64(max)}
}

// Max returns the cap.
func (c *StreamCap) Max() int { return int(c.max) }

// Open returns how many streams it holds now.
func (c *StreamCap) Open() int { return int(c.open.Load()) }

// admit counts a stream in, or refuses it (false) past the stream cap;
// the caller calls leave when an admitted stream ends.
func (a *API) admit() bool {
	if a.streamCap.open.Add(1) > a.streamCap.max {
		a.streamCap.open.Add(-1)
		return false
	}
	return true
}

func (a *API) leave() { a.streamCap.open.Add(-1) }

// tooManyStreams is the detail of a refused stream.
func (a *API) tooManyStreams() string {
	return "this server follows " + strconv.Itoa(a.streamCap.Max()) + " streams already: try again later"
}

// getStream is GET /v1/stream.
func (a *API) getStream(w http.ResponseWriter, r *http.Request) {
	toks := a.tokens.Load()
	c, ok := a.streamAuth(w, r, toks, func(w http.ResponseWriter, status int, detail string) {
		problem(w, status, "unauthorized", detail)
	})
	if !ok {
		return
	}
	if !a.admit() {
		w.Header().Set("Retry-After", streamRetry)
		problem(w, http.StatusServiceUnavailable, "too-many-streams", a.tooManyStreams())
		return
	}
	defer a.leave()
	s := a.streams.join()
	defer a.streams.leave(s)
	out, ctx, ok := a.openStream(w, r)
	if !ok {
		return
	}
	defer out.end()
	// A replica says first whether the state that follows is current.
	first := append([]byte("retry: 1000\n\n"), a.replicaEvent()...)
	s.open(first, a.stateEvent())
	a.pump(ctx, out, s, c, toks)
}

// ofrepFail answers a refused OFREP stream in OFREP's error shape.
func ofrepFail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, ofrepFailure{ErrorCode: "GENERAL", ErrorDetails: detail})
}

// getOFREPEvents is GET /ofrep/v1/events.
func (a *API) getOFREPEvents(w http.ResponseWriter, r *http.Request) {
	toks := a.tokens.Load()
	c, ok := a.streamAuth(w, r, toks, ofrepFail)
	if !ok {
		return
	}
	if !a.admit() {
		w.Header().Set("Retry-After", streamRetry)
		ofrepFail(w, http.StatusServiceUnavailable, a.tooManyStreams())
		return
	}
	defer a.leave()
	s := a.ofrepStreams.join()
	defer a.ofrepStreams.leave(s)
	out, ctx, ok := a.openStream(w, r)
	if !ok {
		return
	}
	defer out.end()
	gen := a.ctl.State().Generation
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if boot, g, ok := parseEventID(last); !ok || boot != a.boot || g < gen {
			s.set(kindRefetch, a.refetchEvent(gen, a.now()))
		}
	}
	a.pump(ctx, out, s, c, toks)
}

// Streams returns how many clients follow each stream (ours, OFREP's).
func (a *API) Streams() (ours, ofrep int) { return a.streams.count(), a.ofrepStreams.count() }

// Shutdown ends every stream with a last event (call it before the
// server's Shutdown, which waits for open requests), and waits, at most
// shutdownGrace, for the streams that own their connection (streamout.go)
// to end: the server's Shutdown does not wait for them.
func (a *API) Shutdown() {
	a.closeOnce.Do(func() {
		close(a.closing)
		a.streams.kick()
		a.ofrepStreams.kick()
	})
	for end := time.Now().Add(shutdownGrace); a.ownedStreams.Load() > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
}

package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/race"
	"github.com/brownout/brownout/signals"
)

// sseEvent is one event read from a stream.
type sseEvent struct{ id, event, data string }

// follow opens a stream and returns its events on a channel (closed when
// the stream ends).
func follow(t *testing.T, ctx context.Context, url string, hdr ...string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	ch := make(chan sseEvent, 64)
	if resp.StatusCode != 200 {
		resp.Body.Close()
		close(ch)
		return ch, resp
	}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return ch, resp
}

// next returns the next event of kind within d.
func next(t *testing.T, ch <-chan sseEvent, kind string, d time.Duration) sseEvent {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before a %q event", kind)
			}
			if ev.event == kind {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q event within %v", kind, d)
		}
	}
}

func TestStreamStateAndTicks(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		f := newFixture(t, Config{OwnStreamConns: own})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, resp := follow(t, ctx, f.srv.URL+"/v1/stream")
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		first := next(t, ch, "state", 5*time.Second)
		assert.Equal(t, f.api.eventID(f.ctl.State().Generation), first.id)
		var st StateJSON
		require.NoError(t, json.Unmarshal([]byte(first.data), &st))
		assert.Equal(t, 1, st.V)
		assert.Len(t, st.Features, 2)

		// A published change arrives, with its generation in the id.
		s := dim(t, f.ctl)
		f.api.published(s)
		ev := next(t, ch, "state", 5*time.Second)
		assert.Equal(t, f.api.eventID(s.Generation), ev.id)
		require.NoError(t, json.Unmarshal([]byte(ev.data), &st))
		assert.Less(t, st.Features[0].Level, 1.0)

		var snap signals.Snapshot
		snap.Set(signals.LatencyP99, 0.5)
		snap.Set(signals.Goodput, 42)
		f.api.record(t0, snap, s, 0)
		tick := next(t, ch, "tick", 5*time.Second)
		assert.Contains(t, tick.data, `"goodput":42`)
		assert.Empty(t, tick.id, "ticks do not move the resume point")

		// Shutdown: a last event, then the stream ends.
		f.api.Shutdown()
		next(t, ch, "shutdown", 5*time.Second)
		for range ch {
		}
	})
}

// TestStreamFromRun: the control loop itself publishes to the stream.
func TestStreamFromRun(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond,
			Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
			Features: []dimmer.Feature{{Name: "recommendations"}}})
		require.NoError(t, err)
		f := newFixture(t, Config{OwnStreamConns: own, Controller: ctl, Now: time.Now})
		src := sourceFunc(func(ctx context.Context, now time.Time) (signals.Snapshot, error) {
			var s signals.Snapshot
			s.Time = now
			s.Set(signals.LatencyP99, 3)
			return s, nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go f.api.Run(ctx, src)
		ch, _ := follow(t, ctx, f.srv.URL+"/v1/stream")
		next(t, ch, "state", 5*time.Second)
		next(t, ch, "tick", 5*time.Second)
		ev := next(t, ch, "state", 5*time.Second)
		_, gen, ok := parseEventID(ev.id)
		require.True(t, ok)
		assert.Positive(t, gen, "a change published by the loop")

		och, _ := follow(t, ctx, f.srv.URL+"/ofrep/v1/events", "Last-Event-ID", "1-0")
		ref := next(t, och, "message", 5*time.Second)
		assert.Contains(t, ref.data, `"type":"refetchEvaluation"`)
	})
}

type sourceFunc func(ctx context.Context, now time.Time) (signals.Snapshot, error)

func (f sourceFunc) Snapshot(ctx context.Context, now time.Time) (signals.Snapshot, error) {
	return f(ctx, now)
}

// TestOFREPEventsReplayAndPace: a client back with an older id (or from
// another boot) gets a refetch at once, one up to date gets none; events
// come at most once a second however fast the state changes.
func TestOFREPEventsReplayAndPace(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		ctl, err := dimmer.New(dimmer.Config{Tick: 100 * time.Millisecond,
			Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
			Features: []dimmer.Feature{{Name: "recommendations"}}})
		require.NoError(t, err)
		f := newFixture(t, Config{OwnStreamConns: own, Controller: ctl, Now: time.Now})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		gen := ctl.State().Generation
		cur, _ := follow(t, ctx, f.srv.URL+"/ofrep/v1/events", "Last-Event-ID", f.api.eventID(gen))
		old, _ := follow(t, ctx, f.srv.URL+"/ofrep/v1/events", "Last-Event-ID", strconv.FormatInt(f.api.boot-1, 10)+"-"+strconv.FormatUint(gen, 10))
		ev := next(t, old, "message", 2*time.Second)
		assert.Equal(t, f.api.eventID(gen), ev.id)
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(ev.data), &d))
		assert.Equal(t, f.api.BulkETag(gen), d["etag"])
		select {
		case e := <-cur:
			t.Fatalf("an up-to-date client got %v", e)
		case <-time.After(300 * time.Millisecond):
		}

		// The state flips every 50 ms for 2.5 s: at most ~3 refetches.
		src := sourceFunc(func(ctx context.Context, now time.Time) (signals.Snapshot, error) {
			var s signals.Snapshot
			s.Time = now
			s.Set(signals.LatencyP99, 5)
			return s, nil
		})
		go f.api.Run(ctx, src)
		stop := time.After(2500 * time.Millisecond)
		n := 0
		var last sseEvent
	loop:
		for {
			select {
			case e := <-cur:
				if e.event == "message" {
					n++
					last = e
				}
			case <-stop:
				break loop
			}
		}
		assert.GreaterOrEqual(t, n, 1)
		assert.LessOrEqual(t, n, 3, "paced to one a second")
		_, g, _ := parseEventID(last.id)
		assert.Greater(t, g, gen)
	})
}

func TestStreamAuth(t *testing.T) {
	f := newFixture(t, Config{EvalTokens: map[string]string{"app": "eval-token-0123456789"}, Now: time.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, resp := follow(t, ctx, f.srv.URL+"/v1/stream")
	assert.Equal(t, 401, resp.StatusCode)
	_, resp = follow(t, ctx, f.srv.URL+"/ofrep/v1/events")
	assert.Equal(t, 401, resp.StatusCode)
	_, resp = follow(t, ctx, f.srv.URL+"/v1/stream?token=garbage")
	assert.Equal(t, 401, resp.StatusCode)

	r, _ := f.do(t, "POST", "/v1/stream/token", "")
	assert.Equal(t, 401, r.StatusCode)
	r, m := f.do(t, "POST", "/v1/stream/token", "", "Authorization", "Bearer eval-token-0123456789")
	require.Equal(t, 200, r.StatusCode)
	tok := m["token"].(string)
	ch, resp := follow(t, ctx, f.srv.URL+"/v1/stream?token="+tok)
	require.Equal(t, 200, resp.StatusCode)
	next(t, ch, "state", 5*time.Second)
	_, resp = follow(t, ctx, f.srv.URL+"/v1/stream", "X-API-Key", "eval-token-0123456789")
	assert.Equal(t, 200, resp.StatusCode)

	valid := func(tok string) bool { _, _, ok := f.api.checkStreamToken(tok); return ok }
	// Expired.
	assert.False(t, valid(f.api.streamToken(time.Now().Add(-time.Second), f.api.fingerprint("eval-token-0123456789"))))
	// Tampered: one character of the signature changed (the second to
	// last carries a full 6 bits; replacing the tail with a fixed "AA"
	// left it as it was about once in a thousand runs).
	bad := []byte(tok)
	if i := len(bad) - 2; bad[i] == 'A' {
		bad[i] = 'B'
	} else {
		bad[i] = 'A'
	}
	assert.False(t, valid(string(bad)))
}

// flushRecorder is a ResponseWriter for a handler run in a synctest
// bubble: it flushes, and is read while the handler writes.
type flushRecorder struct {
	mu  sync.Mutex
	hdr http.Header
	buf strings.Builder
}

func (r *flushRecorder) Header() http.Header { return r.hdr }
func (r *flushRecorder) WriteHeader(int)     {}
func (r *flushRecorder) Flush()              {}
func (r *flushRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(b)
}
func (r *flushRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// TestStreamEndsWhenItsTokenExpires: a stream opened with a stream token
// lasts until the token's expiry, not past it.
func TestStreamEndsWhenItsTokenExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, err := New(Config{Controller: newController(t), EvalTokens: map[string]string{"app": "eval-token-0123456789"}})
		require.NoError(t, err)
		h := a.Handler()
		req := httptest.NewRequest(http.MethodPost, "/v1/stream/token", nil)
		req.Header.Set("Authorization", "Bearer eval-token-0123456789")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, 200, rec.Code)
		var m struct{ Token string }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &m))

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := &flushRecorder{hdr: http.Header{}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/stream?token="+m.Token, nil))
		}()
		time.Sleep(StreamTokenTTL - 2*time.Second) // the token is truncated to the second
		synctest.Wait()
		select {
		case <-done:
			t.Fatalf("the stream ended before its token expired: %s", w.String())
		default:
		}
		assert.Contains(t, w.String(), "event: state")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the stream outlived its token")
		}
		assert.Contains(t, w.String(), "event: reauth", "the client is told why")
	})
}

// TestStreamEndsWhenItsTokenIsRevoked: new tokens (a reload) end the
// streams they no longer admit — a header token removed, a stream token
// given for one, streams opened while they were open — and keep the
// others.
func TestStreamEndsWhenItsTokenIsRevoked(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		const gone, kept = "eval-token-gone-0123456789", "eval-token-kept-0123456789"
		f := newFixture(t, Config{OwnStreamConns: own, Now: time.Now})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		open, _ := follow(t, ctx, f.srv.URL+"/v1/stream")
		next(t, open, "state", 5*time.Second)

		f.api.SetTokens(nil, map[string]string{"a": gone, "b": kept}, nil)
		ev := next(t, open, "reauth", 5*time.Second)
		assert.Contains(t, ev.data, "no longer admit", "tokens required where none were")

		byHeader, _ := follow(t, ctx, f.srv.URL+"/v1/stream", "Authorization", "Bearer "+gone)
		next(t, byHeader, "state", 5*time.Second)
		r, m := f.do(t, "POST", "/v1/stream/token", "", "Authorization", "Bearer "+gone)
		require.Equal(t, 200, r.StatusCode)
		byStreamToken, _ := follow(t, ctx, f.srv.URL+"/v1/stream?token="+m["token"].(string))
		next(t, byStreamToken, "state", 5*time.Second)
		stays, _ := follow(t, ctx, f.srv.URL+"/ofrep/v1/events", "X-API-Key", kept)
		require.Eventually(t, func() bool { ours, ofrep := f.api.Streams(); return ours == 2 && ofrep == 1 }, 5*time.Second, 10*time.Millisecond)

		f.api.SetTokens(nil, map[string]string{"b": kept}, nil)
		next(t, byHeader, "reauth", 5*time.Second)
		next(t, byStreamToken, "reauth", 5*time.Second)
		for _, ch := range []<-chan sseEvent{byHeader, byStreamToken} {
			for range ch { // the stream ends
			}
		}
		require.Eventually(t, func() bool { ours, _ := f.api.Streams(); return ours == 0 }, 5*time.Second, 10*time.Millisecond)
		_, ofrep := f.api.Streams()
		assert.Equal(t, 1, ofrep, "the kept token's stream goes on")
		select {
		case ev, ok := <-stays:
			t.Fatalf("the kept token's stream got %v (open %v)", ev, ok)
		default:
		}
		_, resp := follow(t, ctx, f.srv.URL+"/v1/stream?token="+m["token"].(string))
		assert.Equal(t, 401, resp.StatusCode, "a stream token of a revoked token opens nothing")
	})
}

// TestStreamsAreBounded: past MaxStreams a stream is refused at once
// (503 with Retry-After; OFREP's error shape on OFREP's route), and a
// place freed is taken again.
func TestStreamsAreBounded(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		f := newFixture(t, Config{OwnStreamConns: own, MaxStreams: 2, Now: time.Now})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first, _ := follow(t, ctx, f.srv.URL+"/v1/stream")
		next(t, first, "state", 5*time.Second)
		ctx2, cancel2 := context.WithCancel(ctx)
		_, resp := follow(t, ctx2, f.srv.URL+"/ofrep/v1/events")
		require.Equal(t, 200, resp.StatusCode)

		resp, err := http.Get(f.srv.URL + "/v1/stream")
		require.NoError(t, err)
		hostile.RequireProblem(t, resp, http.StatusServiceUnavailable, "a third stream")
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		resp, err = http.Get(f.srv.URL + "/ofrep/v1/events")
		require.NoError(t, err)
		hostile.RequireOFREPError(t, resp, http.StatusServiceUnavailable, "a third stream, OFREP's")

		cancel2()
		require.Eventually(t, func() bool {
			_, ofrep := f.api.Streams()
			return ofrep == 0
		}, 5*time.Second, 10*time.Millisecond)
		again, resp := follow(t, ctx, f.srv.URL+"/v1/stream")
		require.Equal(t, 200, resp.StatusCode, "a place freed")
		next(t, again, "state", 5*time.Second)
	})
}

// smallSendBuffers gives every accepted connection a small send buffer,
// so that a client that stops reading blocks the server's writes soon.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestStreamEndsWhenItsClientStopsReading: a client that stops reading
// (its socket's buffers full, the server's write blocked) loses its
// stream once the write has waited streamWriteTimeout (at most half as
// long again), so that it holds a stream's place for a bounded time.
func TestStreamEndsWhenItsClientStopsReading(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		defer func(d time.Duration) { streamWriteTimeout = d }(streamWriteTimeout)
		streamWriteTimeout = 200 * time.Millisecond
		a, err := New(Config{OwnStreamConns: own, Controller: newController(t)})
		require.NoError(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := &http.Server{Handler: a.Handler()}
		go srv.Serve(smallSendBuffers{ln})
		defer srv.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4096)
		_, err = io.WriteString(c, "GET /v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.Eventually(t, func() bool { ours, _ := a.Streams(); return ours == 1 }, 5*time.Second, time.Millisecond)
		// States, a kilobyte each, that the client never reads.
		start := time.Now()
		ended := func() bool { ours, _ := a.Streams(); return ours == 0 }
		for time.Since(start) < 10*time.Second && !ended() {
			a.Publish(a.ctl.State())
			time.Sleep(time.Millisecond)
		}
		require.True(t, ended(), "the unread stream ended")
		assert.GreaterOrEqual(t, time.Since(start), streamWriteTimeout, "not before its write waited streamWriteTimeout")
	})
}

// TestWrittenEventsAreNotKept: once a stream's events are written, the
// stream keeps none of them — an unread stream must hold its
// connection's buffers, not the last events it was given. Each client
// reads its first state (a large one, and its own: a feature is pinned
// between the openings, so that no two streams share it) to the end and
// then stops reading: the server's heap may not keep that state for
// each of them.
func TestWrittenEventsAreNotKept(t *testing.T) {
	bothWays(t, func(t *testing.T, own bool) {
		if race.Enabled {
			t.Skip("heap figures are meaningless under -race")
		}
		features := make([]dimmer.Feature, dimmer.MaxFeatures)
		for i := range features {
			features[i] = dimmer.Feature{Name: fmt.Sprintf("a-feature-with-a-rather-long-name-%04d", i), Rank: i}
		}
		ctl, err := dimmer.New(dimmer.Config{Targets: []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}}, Features: features})
		require.NoError(t, err)
		a, err := New(Config{OwnStreamConns: own, Controller: ctl})
		require.NoError(t, err)
		size := len(a.stateEvent())
		srv := httptest.NewServer(a.Handler())
		defer srv.Close()
		defer a.Shutdown()
		const n = 100
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		grew := hostile.HeapGrowth(func() {
			for i := range n {
				_, err := ctl.Pin(features[i].Name, 0.5, time.Hour, "a state of its own")
				require.NoError(t, err)
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				require.NoError(t, err)
				conns = append(conns, c)
				_, err = io.WriteString(c, "GET /v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
				require.NoError(t, err)
				// The head, then the first state to its blank line.
				br := bufio.NewReaderSize(c, 4096)
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				inState := false
				for {
					line, err := br.ReadString('\n')
					require.NoError(t, err)
					if strings.HasPrefix(line, "event: state") {
						inState = true
					}
					if inState && line == "\n" {
						break
					}
				}
			}
			require.Eventually(t, func() bool { ours, _ := a.Streams(); return ours == n }, 5*time.Second, time.Millisecond)
		})
		t.Logf("%d streams, each given a first state of %d B it read: the heap grew by %.1f MB (%d B a stream)", n, size, float64(grew)/1e6, grew/n)
		assert.Less(t, grew, int64(n*size/2), "the streams keep their written states")
	})
}

// bothWays runs a stream test with the streams net/http's and with the
// streams owning their connections (Config.OwnStreamConns).
func bothWays(t *testing.T, test func(t *testing.T, own bool)) {
	t.Run("net/http", func(t *testing.T) { test(t, false) })
	t.Run("own conn", func(t *testing.T) { test(t, true) })
}

// TestStreamOwnsItsConnection: with OwnStreamConns, a stream over
// HTTP/1.1 writes its own response — the head net/http would have
// written (with the route's CORS grant), chunked, and Connection: close;
// a client that says anything after its request ends its stream; the
// API's Shutdown ends the body cleanly (its last chunk) and returns once
// the stream is over. Over HTTP/2 the stream stays net/http's.
func TestStreamOwnsItsConnection(t *testing.T) {
	f := newFixture(t, Config{OwnStreamConns: true, CORSOrigins: []string{shopOrigin}, Now: time.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/ofrep/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", shopOrigin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	assert.True(t, granted(resp, shopOrigin), "the route's CORS grant")
	assert.Contains(t, resp.Header.Values("Vary"), "Origin")

	req, err = http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/v1/stream", nil)
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	assert.NotEmpty(t, resp.Header.Get("Date"))
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
	assert.True(t, resp.Close, "Connection: close")
	require.Eventually(t, func() bool { return f.api.ownedStreams.Load() == 1 }, 5*time.Second, time.Millisecond, "the OFREP stream, closed, ended")

	// A client that sends anything after its request loses its stream.
	c, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { ours, _ := f.api.Streams(); return ours == 2 }, 5*time.Second, time.Millisecond)
	_, err = io.WriteString(c, "GET /v1/state HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool { ours, _ := f.api.Streams(); return ours == 1 }, 5*time.Second, time.Millisecond, "the stream ends")

	// Shutdown: the last event, the last chunk, the connection closed.
	f.api.Shutdown()
	assert.Zero(t, f.api.ownedStreams.Load(), "Shutdown returns once the streams that own their connections ended")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the body ends with its last chunk, not a broken connection")
	assert.Contains(t, string(body), "event: shutdown")

	// HTTP/2: net/http's stream.
	a, err := New(Config{OwnStreamConns: true, Controller: newController(t)})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(a.Handler())
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/stream", nil)
	require.NoError(t, err)
	resp, err = srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 2, resp.ProtoMajor)
	assert.Zero(t, a.ownedStreams.Load(), "an HTTP/2 stream is net/http's")
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "retry: 1000\n", line)
}

// TestKeepAliveOnlyWhenSilent: a stream silent for keepAlive gets a
// keep-alive comment; one that carries events (a tick a second on ours)
// gets none — ten thousand streams would each pay a write for nothing.
func TestKeepAliveOnlyWhenSilent(t *testing.T) {
	defer func(d time.Duration) { keepAlive = d }(keepAlive)
	keepAlive = 50 * time.Millisecond
	bothWays(t, func(t *testing.T, own bool) {
		f := newFixture(t, Config{OwnStreamConns: own, Now: time.Now})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// lines reads a stream's lines onto a channel.
		lines := func(path string) <-chan string {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+path, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			require.Equal(t, 200, resp.StatusCode)
			ch := make(chan string, 1024)
			go func() {
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					ch <- sc.Text()
				}
				close(ch)
			}()
			return ch
		}
		silent := lines("/ofrep/v1/events")
		select {
		case l := <-silent:
			assert.Equal(t, ": keep-alive", l)
		case <-time.After(5 * time.Second):
			t.Fatal("no keep-alive on a silent stream")
		}

		busy := lines("/v1/stream")
		start := time.Now()
		keepAlives := 0
		for time.Since(start) < 500*time.Millisecond {
			f.api.ticked(Point{})
		drain:
			for {
				select {
				case l := <-busy:
					if l == ": keep-alive" {
						keepAlives++
					}
				default:
					break drain
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		assert.Zero(t, keepAlives, "a stream that carries ticks needs no keep-alive")
		cancel()
		require.Eventually(t, func() bool { ours, ofrep := f.api.Streams(); return ours+ofrep == 0 }, 5*time.Second, time.Millisecond,
			"the streams end before keepAlive is restored")
	})
}

// TestStreamCapShared: APIs given one StreamCap count their streams
// together (a daemon of several services): past it a stream of either
// is refused, and a place freed on one is taken on the other.
func TestStreamCapShared(t *testing.T) {
	cap2 := NewStreamCap(2)
	one := newFixture(t, Config{StreamCap: cap2, MaxStreams: 100, Now: time.Now})
	two := newFixture(t, Config{StreamCap: cap2, Now: time.Now})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, _ := follow(t, ctx, one.srv.URL+"/v1/stream")
	next(t, a, "state", 5*time.Second)
	ctxB, cancelB := context.WithCancel(ctx)
	b, _ := follow(t, ctxB, two.srv.URL+"/v1/stream")
	next(t, b, "state", 5*time.Second)
	assert.Equal(t, 2, cap2.Open())

	resp, err := http.Get(one.srv.URL + "/v1/stream")
	require.NoError(t, err)
	hostile.RequireProblem(t, resp, http.StatusServiceUnavailable, "a third stream, on the first API")
	assert.Equal(t, streamRetry, resp.Header.Get("Retry-After"))
	resp, err = http.Get(two.srv.URL + "/ofrep/v1/events")
	require.NoError(t, err)
	hostile.RequireOFREPError(t, resp, http.StatusServiceUnavailable, "a third stream, on the second API")

	cancelB()
	require.Eventually(t, func() bool { return cap2.Open() == 1 }, 5*time.Second, 10*time.Millisecond)
	again, resp := follow(t, ctx, one.srv.URL+"/v1/stream")
	require.Equal(t, 200, resp.StatusCode, "the place freed on the second, taken on the first")
	next(t, again, "state", 5*time.Second)
}

// TestFanOutKeepsOrder: rounds written directly to the streams' sockets
// (OwnStreamConns, fanout.go) by several workers, or left to the
// streams' pumps when a socket is full or takes a round in part, keep
// each stream's events whole (the chunked body's framing intact), in
// order, and end with the last: 300 followers, half of them pausing,
// the server's send buffers small, given 300 states of 8 KB with ticks
// between, each in a round of its own or nearly.
func TestFanOutKeepsOrder(t *testing.T) {
	a, err := New(Config{OwnStreamConns: true, Controller: newController(t)})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(a.Handler())
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const followers, states = 300, 300
	type result struct {
		last int
		err  error
	}
	results := make(chan result, followers)
	for i := range followers {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/stream", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		go func(pause bool) {
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 1<<16)
			last, paused := 0, false
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					results <- result{last, fmt.Errorf("after state %d: %w", last, err)}
					return
				}
				id, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "id: test-")
				if !ok {
					continue
				}
				n, err := strconv.Atoi(id)
				if err != nil || n <= last {
					results <- result{last, fmt.Errorf("state %q after %d", id, last)}
					return
				}
				last = n
				if pause && !paused && n > states/3 {
					paused = true
					time.Sleep(300 * time.Millisecond) // the socket fills
				}
				if n == states {
					results <- result{last, nil}
					return
				}
			}
		}(i%2 == 1)
	}
	require.Eventually(t, func() bool { ours, _ := a.Streams(); return ours == followers }, 10*time.Second, time.Millisecond)
	pad := strings.Repeat("x", 8000)
	for n := 1; n <= states; n++ {
		a.streams.send(kindState, sse("test-"+strconv.Itoa(n), "state", []byte(`{"pad":"`+pad+`"}`)))
		if n%3 == 0 {
			a.streams.send(kindTick, sse("", "tick", []byte(`{}`)))
		}
		time.Sleep(500 * time.Microsecond) // rounds of their own, most of them
	}
	for range followers {
		select {
		case r := <-results:
			require.NoError(t, r.err)
			assert.Equal(t, states, r.last)
		case <-time.After(20 * time.Second):
			t.Fatal("a follower did not get the last state")
		}
	}
}

// TestStreamsShareTheirFirstState: streams opened on one state are given
// the same bytes for it (a stream holds its first state until the socket
// takes it, which for a client that does not read is as long as the
// stream lasts), and a new state is encoded anew.
func TestStreamsShareTheirFirstState(t *testing.T) {
	a, err := New(Config{Controller: newController(t)})
	require.NoError(t, err)
	first, again := a.stateEvent(), a.stateEvent()
	require.NotEmpty(t, first)
	assert.Same(t, &first[0], &again[0], "one state, one copy")
	assert.Equal(t, len(first), cap(first), "shared bytes: an append copies them")
	_, err = a.ctl.Pin("recommendations", 0.5, time.Minute, "test")
	require.NoError(t, err)
	changed := a.stateEvent()
	assert.NotEqual(t, first, changed, "a new state is encoded anew")
	assert.Same(t, &changed[0], &a.stateEvent()[0])
}

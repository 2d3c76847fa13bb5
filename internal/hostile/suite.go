package hostile

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brownout/brownout/internal/race"
	"github.com/stretchr/testify/require"
)

// Write is a tokenless write a target takes from its local operator: a
// method, a path and a valid body.
type Write struct{ Method, Path, Body string }

// Stall is a request whose body stops half-way: Sent of Length bytes.
type Stall struct {
	Method, Path string
	Header       http.Header
	Sent         string
	Length       int
	// Want is the status the server answers when its body deadline
	// passes (0: no answer needed, a closed connection is enough); OFREP
	// says the answer has OFREP's error shape, else problem+json.
	Want  int
	OFREP bool
}

// Target is a server of ours on its defaults over 127.0.0.1, and what
// Run throws at it.
type Target struct {
	// Base is its URL, http://127.0.0.1:PORT.
	Base string
	// Writes are its tokenless writes (loopback, no tokens): every
	// Attacks variant of each must be refused with 403
	// problem+json and leave State as it was.
	Writes []Write
	// State reads what a refused write must leave unchanged.
	State func(tb testing.TB) string
	// CORSOrigins are the origins the target lets evaluate from a
	// browser (brownoutd --cors-origin). A preflight for any of Writes
	// from one of them, as from any other origin, must get no CORS grant.
	CORSOrigins []string
	// Stalls must end, each, in its answer and a closed connection within
	// BodyTimeout (plus Slack).
	Stalls      []Stall
	BodyTimeout time.Duration
	// HeaderTimeout and MaxHeaderBytes are the server's header bounds:
	// headers that never end are cut, larger ones refused (431).
	HeaderTimeout  time.Duration
	MaxHeaderBytes int
	// Stream is an event stream's path; Streams of them are opened and
	// never read, while Alive (a cheap request) must keep answering.
	Stream  string
	Streams int
	Alive   func(tb testing.TB)
	// Reads are its reads without a token on its loopback listener: each
	// must be refused (403: problem+json, OFREP's shape where OFREP) to a
	// page whose name was re-pointed at 127.0.0.1 and to a page of another
	// site, and the refusal must not carry the stream's shed seed.
	Reads []Read

	// GC makes the server collect (runtime.GC for a server in the test's
	// process), so that its live heap (HeapMetric) is current. The floods
	// below run one after another once the attacks above are over, each
	// bounded in the server's live heap; without the race detector only
	// (race.Enabled), whose allocations blur the figures.
	GC     func()
	Floods []Flood
	// FloodStreams are the server's event streams: MaxStreams of them
	// (spread over the paths) are opened and never read, the server's
	// live heap growing by at most MaxStreams × StreamKeep (StreamWhy says
	// why); one more on each path is refused (503 with Retry-After, in the
	// path's error shape), Alive keeps answering, and once they close a
	// stream opens again and the heap comes back. Where one client may
	// hold fewer connections than MaxStreams (PerClient, every loopback
	// address one client), the flood holds PerClient streams, and the
	// client's next connection is closed at once instead: all of its
	// connections are busy, and the server's streams stay for others.
	FloodStreams []StreamPath
	MaxStreams   int
	PerClient    int
	StreamKeep   int64
	StreamWhy    string
}

// Read is a read a page must not make of a loopback server: a method, a
// path, a body (OFREP's evaluations take one), and whether the route
// answers in OFREP's error shape.
type Read struct {
	Method, Path, Body string
	OFREP              bool
}

// Run attacks tg: the attacks in parallel subtests, then the floods one
// after another.
func (tg Target) Run(t *testing.T) {
	t.Run("attacks", tg.attacks)
	t.Run("floods", tg.floods)
}

// attacks runs the attacks on tg, each a parallel subtest.
func (tg Target) attacks(t *testing.T) {
	addr := Addr(t, tg.Base)
	_, port, _ := net.SplitHostPort(addr)
	if len(tg.Reads) > 0 {
		t.Run("rebound and cross-site reads", func(t *testing.T) {
			t.Parallel()
			evil := "evil.example:" + port
			c := Client()
			for _, rd := range tg.Reads {
				for _, a := range []Attack{
					{Name: "rebound page", Host: evil, Header: map[string]string{"Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin"}},
					{Name: "rebound name, no browser headers", Host: evil},
					{Name: "page of another site", Header: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}},
					{Name: "page of another local port", Header: map[string]string{"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}},
				} {
					req := a.Request(t, rd.Method, tg.Base+rd.Path, rd.Body)
					if rd.Body == "" {
						req.Body, req.ContentLength = http.NoBody, 0
					}
					resp, err := c.Do(req)
					if err != nil {
						t.Fatalf("%s %s %s: %v", a.Name, rd.Method, rd.Path, err)
					}
					what := a.Name + ": " + rd.Method + " " + rd.Path
					if rd.OFREP {
						e := RequireOFREPError(t, resp, http.StatusForbidden, what)
						if strings.Contains(e.ErrorDetails, "shed_seed") {
							t.Fatalf("%s: the refusal carries the shed seed", what)
						}
						continue
					}
					p := RequireProblem(t, resp, http.StatusForbidden, what)
					if strings.Contains(p.Detail, "shed_seed") {
						t.Fatalf("%s: the refusal carries the shed seed", what)
					}
				}
			}
		})
	}
	if len(tg.Writes) > 0 {
		t.Run("browser writes", func(t *testing.T) {
			t.Parallel()
			before := tg.State(t)
			c := Client()
			for _, a := range Attacks(port) {
				for _, w := range tg.Writes {
					resp, err := c.Do(a.Request(t, w.Method, tg.Base+w.Path, w.Body))
					if err != nil {
						t.Fatalf("%s %s %s: %v", a.Name, w.Method, w.Path, err)
					}
					RequireProblem(t, resp, http.StatusForbidden, a.Name+": "+w.Method+" "+w.Path)
				}
			}
			if after := tg.State(t); after != before {
				t.Fatalf("refused writes changed the state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	if len(tg.Writes) > 0 {
		t.Run("preflights for writes", func(t *testing.T) {
			t.Parallel()
			c := Client()
			for _, origin := range append([]string{"https://evil.example", "http://127.0.0.1:1"}, tg.CORSOrigins...) {
				for _, w := range tg.Writes {
					req, err := http.NewRequest(http.MethodOptions, tg.Base+w.Path, nil)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Origin", origin)
					req.Header.Set("Access-Control-Request-Method", w.Method)
					req.Header.Set("Access-Control-Request-Headers", "content-type")
					req.Header.Set("Sec-Fetch-Mode", "cors")
					resp, err := c.Do(req)
					if err != nil {
						t.Fatalf("preflight %s %s from %s: %v", w.Method, w.Path, origin, err)
					}
					resp.Body.Close()
					for k := range resp.Header {
						if strings.HasPrefix(k, "Access-Control-") {
							t.Fatalf("preflight %s %s from %s: %d with %s %q: a write must never be granted", w.Method, w.Path, origin, resp.StatusCode, k, resp.Header.Get(k))
						}
					}
				}
			}
		})
	}
	t.Run("headers that never end", func(t *testing.T) {
		t.Parallel()
		RequireClosed(t, SlowHeaders(t, addr), tg.HeaderTimeout+Slack, "headers that never end")
	})
	t.Run("huge header", func(t *testing.T) {
		t.Parallel()
		resp, c := HugeHeader(t, addr, "/", 2*tg.MaxHeaderBytes)
		if resp != nil && resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("a header of %d bytes: status %d, want 431", 2*tg.MaxHeaderBytes, resp.StatusCode)
		}
		RequireClosed(t, c, Slack, "huge header")
		if resp != nil {
			t.Logf("a header of %d bytes: %d, then closed", 2*tg.MaxHeaderBytes, resp.StatusCode)
		} else {
			t.Logf("a header of %d bytes: closed without an answer", 2*tg.MaxHeaderBytes)
		}
	})
	for _, s := range tg.Stalls {
		t.Run("stalled body "+s.Method+" "+s.Path, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			c := StalledBody(t, addr, s.Method, s.Path, s.Header, s.Sent, s.Length)
			resp, err := ReadResponse(t, c, tg.BodyTimeout+Slack)
			if err == nil {
				t.Logf("%d after %v", resp.StatusCode, time.Since(start).Round(10*time.Millisecond))
			}
			switch {
			case s.Want == 0:
			case err != nil:
				t.Fatalf("no answer within %v: %v", tg.BodyTimeout+Slack, err)
			case s.OFREP:
				RequireOFREPError(t, resp, s.Want, "stalled body")
			default:
				RequireProblem(t, resp, s.Want, "stalled body")
			}
			RequireClosed(t, c, Slack, "after a stalled body")
			t.Logf("closed after %v", time.Since(start).Round(10*time.Millisecond))
		})
	}
	if tg.Stream != "" {
		t.Run("streams nobody reads", func(t *testing.T) {
			t.Parallel()
			Streams(t, addr, tg.Stream, tg.Streams)
			start := time.Now()
			tg.Alive(t)
			if d := time.Since(start); d > Slack {
				t.Fatalf("with %d streams unread, the server took %v to answer", tg.Streams, d)
			}
		})
	}
}

// floods runs tg's floods one after another, each bounded in the
// server's live heap.
func (tg Target) floods(t *testing.T) {
	if len(tg.Floods) == 0 && len(tg.FloodStreams) == 0 {
		return
	}
	if race.Enabled {
		t.Skip("heap figures are meaningless under -race: the floods run in the pass without it")
	}
	for _, f := range tg.Floods {
		t.Run(f.Name, func(t *testing.T) {
			before := LiveHeap(t, tg.Base, tg.GC)
			f.run(t)
			after := LiveHeap(t, tg.Base, tg.GC)
			t.Logf("%d requests: live heap %s → %s (%+.1f MB; bound %s = %s slack + %d × %d B: %s)",
				f.N, MB(before), MB(after), float64(after-before)/1e6, MB(f.bound()), MB(HeapSlack), f.N, f.Keep, f.Why)
			if after-before > f.bound() {
				t.Fatalf("the live heap grew by %s over %d requests: at most %s", MB(after-before), f.N, MB(f.bound()))
			}
		})
	}
	if len(tg.FloodStreams) > 0 {
		t.Run("streams nobody reads, up to the cap", tg.floodStreams)
	}
}

// floodStreams opens MaxStreams streams (PerClient where fewer) that are never read, spread over
// FloodStreams, and checks the server's heap, its cap and its recovery.
func (tg Target) floodStreams(t *testing.T) {
	addr := Addr(t, tg.Base)
	before := LiveHeap(t, tg.Base, tg.GC)
	n := tg.MaxStreams
	perClient := tg.PerClient > 0 && tg.PerClient < n
	if perClient {
		n = tg.PerClient - 1 // one left for reading the heap
	}
	conns := make([]net.Conn, 0, n)
	for i := range n {
		sp := tg.FloodStreams[i%len(tg.FloodStreams)]
		c, status := OpenStream(t, addr, sp.Path)
		if status != http.StatusOK {
			t.Fatalf("stream %d of %d (%s): status %d, want 200", i+1, n, sp.Path, status)
		}
		conns = append(conns, c)
	}
	open := LiveHeap(t, tg.Base, tg.GC)
	bound := HeapSlack + int64(n)*tg.StreamKeep
	t.Logf("%d streams unread: live heap %s → %s (%+.1f MB; bound %s = %s slack + %d × %d B: %s)",
		n, MB(before), MB(open), float64(open-before)/1e6, MB(bound), MB(HeapSlack), n, tg.StreamKeep, tg.StreamWhy)
	if open-before > bound {
		t.Fatalf("%d unread streams grew the live heap by %s: at most %s", n, MB(open-before), MB(bound))
	}
	if perClient {
		// The client's next connections reach its cap (the heap's reader,
		// idle, is closed for one; other connections of the test's may
		// hold the rest): every connection busy, the next one is closed
		// before a request is read.
		closed := false
		for range 2 + len(tg.FloodStreams) {
			c, status, err := openStream(addr, tg.FloodStreams[0].Path)
			if err != nil {
				closed = true
				break
			}
			if status != http.StatusOK {
				c.Close()
				t.Fatalf("a stream within the client's %d connections: status %d, want 200", tg.PerClient, status)
			}
			conns = append(conns, c)
		}
		if !closed {
			t.Fatalf("%d streams from one client: none closed past its cap of %d", len(conns), tg.PerClient)
		}
	} else {
		for _, sp := range tg.FloodStreams {
			StreamRefused(t, addr, sp, http.StatusServiceUnavailable)
		}
		start := time.Now()
		tg.Alive(t)
		if d := time.Since(start); d > Slack {
			t.Fatalf("with %d streams unread, the server took %v to answer", n, d)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	// The server sees each client leave (its read of the connection ends)
	// and frees the stream: one opens again, and the heap comes back.
	require.Eventually(t, func() bool {
		c, status, err := openStream(addr, tg.FloodStreams[0].Path)
		if err == nil {
			c.Close()
		}
		return status == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "no stream opens once the unread ones have closed")
	var after int64
	require.Eventually(t, func() bool {
		n, err := liveHeap(tg.Base, tg.GC)
		after = n
		return err == nil && after-before <= HeapSlack
	}, 10*time.Second, 100*time.Millisecond, "the streams' heap is not freed once they close")
	t.Logf("closed: live heap %s", MB(after))
}

package hostile

import (
	"net"
	"net/http"
	"testing"
	"time"
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
}

// Run attacks tg, each attack a parallel subtest.
func (tg Target) Run(t *testing.T) {
	addr := Addr(t, tg.Base)
	_, port, _ := net.SplitHostPort(addr)
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
	})
	for _, s := range tg.Stalls {
		t.Run("stalled body "+s.Method+" "+s.Path, func(t *testing.T) {
			t.Parallel()
			c := StalledBody(t, addr, s.Method, s.Path, s.Header, s.Sent, s.Length)
			resp, err := ReadResponse(t, c, tg.BodyTimeout+Slack)
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

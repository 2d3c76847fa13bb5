package hostile

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HeapMetric is the live heap a server of ours exports on /metrics: the
// bytes still reachable at the end of the last collection
// (runtime/metrics' /gc/heap/live:bytes), what the server keeps without
// the garbage of the moment.
const HeapMetric = "go_gc_heap_live_bytes"

// HeapSlack is what a server's live heap may move by between two
// collections with no attack between them: the runtime's and net/http's
// pools, the controller's history filling one point a tick, a few
// connections' buffers (idle servers move by well under 1 MiB).
const HeapSlack = 4 << 20

// LiveHeap reads HeapMetric from base's /metrics after gc has made the
// server collect (runtime.GC, for a server in the test's own process),
// heapReadings times, and returns the least: what the server keeps.
func LiveHeap(tb testing.TB, base string, gc func()) int64 {
	tb.Helper()
	least := int64(-1)
	for range heapReadings {
		n, err := liveHeap(base, gc)
		if err != nil {
			tb.Fatalf("hostile: %v", err)
		}
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

// heapReadings is how many collections LiveHeap reads. A collection
// keeps sync.Pool's contents live, and frees them at the next: read just
// after a flood of a thousand streams, the buffers net/http pooled for
// their connections (about 2 KiB each) were in the first reading and
// gone from the second (23.7, 22.0, 22.0 MB in a row). A reading may
// count what is in flight as it marks, too: the CI's single reading of
// the same flood was 14 MB over this machine's. What an attack leaves
// behind is in every reading.
const heapReadings = 3

func liveHeap(base string, gc func()) (int64, error) {
	gc()
	resp, err := Client().Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s/metrics: status %d", base, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), HeapMetric+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", HeapMetric, v, err)
			}
			return int64(f), nil
		}
	}
	return 0, fmt.Errorf("%s/metrics has no %s", base, HeapMetric)
}

// MB formats a byte count for a log line.
func MB(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// Flood is an attack of many requests, one after another, that a server
// must answer without keeping more than Keep bytes of each.
type Flood struct {
	Name string
	// N requests; Request builds the i-th.
	N       int
	Request func(tb testing.TB, i int) *http.Request
	// From, when set, is the loopback address the i-th request connects
	// from (clients rotating their addresses: any of 127.0.0.0/8).
	From func(i int) netip.Addr
	// Allow lists the statuses an answer may have. One of 400 or more
	// must be problem+json, or OFREP's error shape when OFREP.
	Allow []int
	OFREP bool
	// Keep is what the server may keep of each request, and Why says why:
	// the flood may grow the server's live heap by at most HeapSlack + N
	// × Keep.
	Keep int64
	Why  string
	// Check, when set, looks at the flood's answers (their statuses, in
	// order) and at the server once it is over: a refusal must have
	// changed nothing.
	Check func(tb testing.TB, statuses []int, elapsed time.Duration)
}

// bound is the flood's heap bound.
func (f Flood) bound() int64 { return HeapSlack + int64(f.N)*f.Keep }

// run sends the flood's requests and checks each answer.
func (f Flood) run(tb testing.TB) {
	tb.Helper()
	c := Client()
	statuses := make([]int, 0, f.N)
	start := time.Now()
	for i := range f.N {
		if f.From != nil {
			c = FromClient(f.From(i))
		}
		resp, err := c.Do(f.Request(tb, i))
		if err != nil {
			tb.Fatalf("%s: request %d: %v", f.Name, i, err)
		}
		if !allowed(f.Allow, resp.StatusCode) {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			tb.Fatalf("%s: request %d: status %d, want one of %v (%.200s)", f.Name, i, resp.StatusCode, f.Allow, b)
		}
		switch {
		case resp.StatusCode < 400:
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		case f.OFREP:
			RequireOFREPError(tb, resp, resp.StatusCode, f.Name)
		default:
			RequireProblem(tb, resp, resp.StatusCode, f.Name)
		}
		statuses = append(statuses, resp.StatusCode)
	}
	if f.Check != nil {
		f.Check(tb, statuses, time.Since(start))
	}
}

func allowed(statuses []int, s int) bool {
	for _, a := range statuses {
		if a == s {
			return true
		}
	}
	return false
}

// Count returns how many of statuses are s.
func Count(statuses []int, s int) int {
	n := 0
	for _, x := range statuses {
		if x == s {
			n++
		}
	}
	return n
}

// FromClient is Client connecting from the local address from.
func FromClient(from netip.Addr) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(from, 0))}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: d.DialContext}}
}

// Loopback is the i-th address of 127.1.0.0/16 (127.1.0.1 onwards): a
// client of its own to a server on 127.0.0.1, for up to 65 534 of them.
func Loopback(i int) netip.Addr {
	i++
	return netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)})
}

// Key is a client key of n bytes, distinct for each i: a header value
// near the servers' header cap.
func Key(i, n int) string {
	p := strconv.Itoa(i) + "-"
	return p + strings.Repeat("k", max(n-len(p), 0))
}

// StreamPath is an event stream of a server: its path, and whether its
// refusals have OFREP's error shape (else problem+json).
type StreamPath struct {
	Path  string
	OFREP bool
}

// OpenStream opens path on addr, reads the response's head, and never
// reads again: a subscriber that stopped reading. It returns the
// connection (closed when the test ends) and the status.
func OpenStream(tb testing.TB, addr, path string) (net.Conn, int) {
	tb.Helper()
	c, status, err := openStream(addr, path)
	if err != nil {
		tb.Fatalf("hostile: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c, status
}

func openStream(addr, path string) (net.Conn, int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	// A small receive buffer: the server's writes back up sooner.
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := "", error(nil)
	if _, err = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nAccept: text/event-stream\r\n\r\n"); err == nil {
		line, err = bufio.NewReaderSize(c, 512).ReadString('\n')
	}
	f := strings.Fields(line)
	if err == nil && len(f) < 2 {
		err = fmt.Errorf("status line %q", line)
	}
	if err != nil {
		c.Close()
		return nil, 0, fmt.Errorf("stream %s: %w", path, err)
	}
	status, _ := strconv.Atoi(f[1])
	return c, status, nil
}

// StreamRefused opens path on addr and expects a refusal with status,
// in the stream's error shape.
func StreamRefused(tb testing.TB, addr string, sp StreamPath, status int) {
	tb.Helper()
	c := Dial(tb, addr)
	Send(tb, c, "GET "+sp.Path+" HTTP/1.1\r\nHost: "+addr+"\r\nAccept: text/event-stream\r\n\r\n")
	resp, err := ReadResponse(tb, c, 10*time.Second)
	if err != nil {
		tb.Fatalf("hostile: stream %s past the cap: %v", sp.Path, err)
	}
	if sp.OFREP {
		RequireOFREPError(tb, resp, status, "stream "+sp.Path+" past the cap")
	} else {
		RequireProblem(tb, resp, status, "stream "+sp.Path+" past the cap")
	}
	if resp.Header.Get("Retry-After") == "" {
		tb.Fatalf("hostile: stream %s past the cap: no Retry-After", sp.Path)
	}
}

// HeapGrowth is how much this process's heap grew over f, after a
// collection on both sides: what f left reachable. Without the race
// detector (race.Enabled), whose allocations blur it.
func HeapGrowth(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// Package hostile is what the project's tests throw at its servers the
// way a hostile web page, a careless client or a noisy neighbour would:
// cross-site and DNS-rebinding writes and reads, CORS preflights for
// writes (also from an origin the server lets evaluate), untyped bodies, headers
// that never end, bodies that stall, huge headers, streams nobody reads;
// then floods — many client keys near the header cap, many client
// addresses, many pushing instances, streams up to the server's cap —
// each bounded in the server's live heap (HeapMetric, read after a
// collection, without the race detector). Every helper is bounded (a
// deadline on every read, a number of requests, never a duration) and
// talks to 127.0.0.0/8 only; the assertions say what a server must
// answer: a clear 4xx (problem+json, or OFREP's shape on OFREP routes)
// or a closed connection, and where a write was refused, an unchanged
// state. Target.Run is the suite; the commands' tests give it their
// servers on their defaults.
package hostile

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Slack is what a server may take past its own bound before a helper
// calls it a hang: scheduling on a busy 2-core machine, -race.
const Slack = 5 * time.Second

// Dial opens a raw TCP connection to addr (host:port), closed when the
// test ends.
func Dial(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("hostile: dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// Addr is the host:port of a base URL ("http://127.0.0.1:8080").
func Addr(tb testing.TB, base string) string {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		tb.Fatalf("hostile: base URL %q: %v", base, err)
	}
	return u.Host
}

// Send writes raw bytes on c.
func Send(tb testing.TB, c net.Conn, s string) {
	tb.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, s); err != nil {
		tb.Fatalf("hostile: write: %v", err)
	}
}

// SlowHeaders starts a request whose headers never end.
func SlowHeaders(tb testing.TB, addr string) net.Conn {
	tb.Helper()
	c := Dial(tb, addr)
	Send(tb, c, "GET /v1/state HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: 1\r\n")
	return c
}

// StalledBody sends a request's headers announcing length bytes of body,
// then only sent of them, and no more.
func StalledBody(tb testing.TB, addr, method, path string, hdr http.Header, sent string, length int) net.Conn {
	tb.Helper()
	c := Dial(tb, addr)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, addr, length)
	if hdr.Get("Content-Type") == "" {
		b.WriteString("Content-Type: application/json\r\n")
	}
	for k, vs := range hdr {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n" + sent)
	Send(tb, c, b.String())
	return c
}

// HugeHeader sends a GET of path with one header of n bytes and returns
// what the server answered (nil if it closed without an answer).
func HugeHeader(tb testing.TB, addr, path string, n int) (*http.Response, net.Conn) {
	tb.Helper()
	c := Dial(tb, addr)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	// The server may answer and close before the whole header is sent:
	// a failed write is what it may do.
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nX-Huge: "+strings.Repeat("a", n)+"\r\n\r\n")
	resp, _ := ReadResponse(tb, c, 10*time.Second)
	return resp, c
}

// ReadResponse reads one response (its body too) from c within d.
func ReadResponse(tb testing.TB, c net.Conn, d time.Duration) (*http.Response, error) {
	tb.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp, err
}

// Closed waits at most d for the server to close c (reading and dropping
// whatever it sends first): true if it did, false if c was still open.
func Closed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// RequireClosed fails the test unless the server closes c within d.
func RequireClosed(tb testing.TB, c net.Conn, d time.Duration, what string) {
	tb.Helper()
	if !Closed(c, d) {
		tb.Fatalf("hostile: %s: the connection is still open after %v", what, d)
	}
}

// Problem is an RFC 9457 body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// RequireProblem fails the test unless resp is status with an
// application/problem+json body that has a type and a detail; it returns
// the problem.
func RequireProblem(tb testing.TB, resp *http.Response, status int, what string) Problem {
	tb.Helper()
	if resp == nil {
		tb.Fatalf("hostile: %s: no answer, want %d problem+json", what, status)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		tb.Fatalf("hostile: %s: status %d, want %d (%s)", what, resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("hostile: %s: Content-Type %q, want application/problem+json (%s)", what, ct, b)
	}
	var p Problem
	if err := json.Unmarshal(b, &p); err != nil || p.Type == "" || p.Detail == "" || p.Status != status {
		tb.Fatalf("hostile: %s: problem %s: want a type, a detail and status %d", what, b, status)
	}
	return p
}

// OFREPError is OFREP's error body.
type OFREPError struct {
	Key          string `json:"key"`
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails"`
}

// RequireOFREPError fails the test unless resp is status with OFREP's
// error shape (errorCode, errorDetails) in application/json.
func RequireOFREPError(tb testing.TB, resp *http.Response, status int, what string) OFREPError {
	tb.Helper()
	if resp == nil {
		tb.Fatalf("hostile: %s: no answer, want %d with OFREP's error shape", what, status)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != status {
		tb.Fatalf("hostile: %s: status %d, want %d (%s)", what, resp.StatusCode, status, b)
	}
	var e OFREPError
	if err := json.Unmarshal(b, &e); err != nil || e.ErrorCode == "" || e.ErrorDetails == "" {
		tb.Fatalf("hostile: %s: %s: want OFREP's {errorCode, errorDetails}", what, b)
	}
	return e
}

// Attack is a write as a hostile page, or a careless client, sends it.
type Attack struct {
	Name string
	// Host replaces the request's Host ("" keeps the target's).
	Host   string
	Header map[string]string
	// Body replaces the write's valid body when set (Empty: none at all).
	Body  string
	Empty bool
}

// Attacks are the ways a page in the operator's browser, or a client
// behind a proxy, reaches a tokenless loopback write (port is the
// target's, for rebound names and same-site origins): each must be
// refused.
func Attacks(port string) []Attack {
	const evil = "evil.example"
	return []Attack{
		{Name: "cross-site fetch", Header: map[string]string{"Origin": "https://" + evil, "Sec-Fetch-Site": "cross-site"}},
		{Name: "cross-site Origin only", Header: map[string]string{"Origin": "https://" + evil}},
		{Name: "Sec-Fetch-Site cross-site only", Header: map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{Name: "opaque origin (sandbox, file://)", Header: map[string]string{"Origin": "null"}},
		{Name: "another local port's page", Header: map[string]string{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}},
		{Name: "https page of the same host", Header: map[string]string{"Origin": "https://127.0.0.1:" + port}},
		{Name: "form post", Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, Body: "reason=pwned"},
		{Name: "no-cors text/plain", Header: map[string]string{"Content-Type": "text/plain;charset=UTF-8"}},
		{Name: "untyped body", Header: map[string]string{"Content-Type": ""}},
		{Name: "untyped empty body", Header: map[string]string{"Content-Type": ""}, Empty: true},
		{Name: "DNS rebinding", Host: evil + ":" + port, Header: map[string]string{"Origin": "http://" + evil + ":" + port, "Sec-Fetch-Site": "same-origin"}},
		{Name: "rebound name, no browser headers", Host: evil + ":" + port},
		{Name: "through a proxy", Header: map[string]string{"X-Forwarded-For": "203.0.113.7"}},
	}
}

// Request builds attack a on a write: method url with its valid body
// (typed application/json unless a says otherwise).
func (a Attack) Request(tb testing.TB, method, url, body string) *http.Request {
	tb.Helper()
	if a.Body != "" {
		body = a.Body
	}
	var rd io.Reader = strings.NewReader(body)
	if a.Empty {
		rd = http.NoBody
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		tb.Fatalf("hostile: %s: %v", a.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range a.Header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	if a.Host != "" {
		req.Host = a.Host
	}
	return req
}

// Client is an HTTP client bounded in time that never reuses a
// connection (an attack's connection may be left closed).
func Client() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
}

// Streams opens n requests for path that never read what the server
// sends; it returns their connections.
func Streams(tb testing.TB, addr, path string, n int) []net.Conn {
	tb.Helper()
	out := make([]net.Conn, 0, n)
	for range n {
		c := Dial(tb, addr)
		// A small receive buffer: the server's writes back up sooner.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(4 << 10)
		}
		Send(tb, c, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nAccept: text/event-stream\r\n\r\n")
		out = append(out, c)
	}
	return out
}

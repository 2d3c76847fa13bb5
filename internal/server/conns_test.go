package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// serve runs h as New builds it on a listener limited by l (and changed
// by tweak before it serves), returning its address and the listener.
func serve(t *testing.T, h http.Handler, l Limits, tweak ...func(*Listener)) (string, *Listener) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = New(h)
	ln := LimitWith(srv.Listener, l)
	for _, f := range tweak {
		f(ln)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return hostile.Addr(t, srv.URL), ln
}

// keepAlive sends one request on a new connection, reads its answer and
// leaves the connection open and idle.
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, hostile.Slack)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hostile.Slack))
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c.SetDeadline(time.Time{})
	return c
}

// waitIdle waits until ln counts n of its connections idle: a client has
// its answer a moment before the server marks the connection idle.
func waitIdle(t *testing.T, ln *Listener, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		ln.mu.Lock()
		defer ln.mu.Unlock()
		idle := 0
		for c := range ln.mu.open {
			if c.idle {
				idle++
			}
		}
		return idle == n
	}, hostile.Slack, time.Millisecond)
}

// get makes one request on a fresh connection.
func get(addr string) (int, error) {
	c := &http.Client{Timeout: hostile.Slack, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// TestOneClientCannotHoldEveryConnection: one client (every loopback
// address is one) that leaves more idle connections open than the server
// holds does not lock others out: past its cap each new connection of
// its own closes its connection idle the longest, and a request from
// anyone is answered.
func TestOneClientCannotHoldEveryConnection(t *testing.T) {
	addr, ln := serve(t, ok, Limits{})
	var conns []net.Conn
	for range MaxConns + 4 {
		conns = append(conns, keepAlive(t, addr))
	}
	code, err := get(addr)
	require.NoError(t, err, "a request while one client held its connections idle")
	assert.Equal(t, http.StatusOK, code)
	all, mine := ln.Open("loopback")
	assert.LessOrEqual(t, mine, DefaultPerClient)
	assert.LessOrEqual(t, all, DefaultPerClient)
	assert.True(t, hostile.Closed(conns[0], hostile.Slack), "the client's connection idle the longest was closed")
	assert.False(t, hostile.Closed(conns[len(conns)-1], 100*time.Millisecond), "its newest stays")
}

// TestBusyConnectionsAreKept: a client at its cap whose connections all
// carry a request or a stream keeps them; its next connection is closed
// at once instead.
func TestBusyConnectionsAreKept(t *testing.T) {
	release := make(chan struct{})
	busy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, "ok")
	})
	addr, ln := serve(t, busy, Limits{PerClient: 3})
	defer close(release)
	var conns []net.Conn
	for range 3 {
		c := hostile.Dial(t, addr)
		hostile.Send(t, c, "GET /stream HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(hostile.Slack))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		conns = append(conns, c)
	}
	_, err := get(addr)
	assert.Error(t, err, "the fourth connection is closed: the three are busy")
	for i, c := range conns {
		assert.False(t, hostile.Closed(c, 50*time.Millisecond), "stream %d kept", i)
	}
	_, mine := ln.Open("loopback")
	assert.Equal(t, 3, mine)
}

// TestIdleConnectionsCloseNearTheCap: from reapAt open connections on,
// each new one closes the connection idle the longest, of any client.
// Each connection is idle before the next opens: a client has its answer
// a moment before the server marks its connection idle, and a connection
// accepted in that moment is idle (new) before it — idle the longer.
func TestIdleConnectionsCloseNearTheCap(t *testing.T) {
	addr, ln := serve(t, ok, Limits{PerClient: -1}, func(ln *Listener) { ln.reapAt = 4 })
	var conns []net.Conn
	for i := range 4 {
		conns = append(conns, keepAlive(t, addr))
		waitIdle(t, ln, i+1)
	}
	assert.False(t, hostile.Closed(conns[0], 50*time.Millisecond), "under the mark: kept")
	conns = append(conns, keepAlive(t, addr))
	assert.True(t, hostile.Closed(conns[0], hostile.Slack), "the idlest is closed")
	assert.False(t, hostile.Closed(conns[1], 50*time.Millisecond))
	all, _ := ln.Open("loopback")
	assert.Equal(t, 4, all)
}

// TestClientOf: every loopback address is one client; others by address.
func TestClientOf(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:5000":  "loopback",
		"127.0.0.2:5000":  "loopback",
		"[::1]:5000":      "loopback",
		"10.0.0.7:80":     "10.0.0.7",
		"[2001:db8::1]:1": "2001:db8::1",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		require.NoError(t, err)
		assert.Equal(t, want, clientOf(a), addr)
	}
	assert.True(t, strings.HasPrefix(clientOf(&net.UnixAddr{Name: "/x", Net: "unix"}), "/x"))
}

// TestCollectorCountsOpenConnections: the gauge reads the connections
// open, and falls when they close.
func TestCollectorCountsOpenConnections(t *testing.T) {
	addr, ln := serve(t, ok, Limits{})
	g := ln.Collector()
	assert.Zero(t, testutil.ToFloat64(g))
	var cs []net.Conn
	for range 3 {
		cs = append(cs, keepAlive(t, addr))
	}
	waitIdle(t, ln, 3)
	assert.Equal(t, 3.0, testutil.ToFloat64(g))
	for _, c := range cs {
		c.Close()
	}
	require.Eventually(t, func() bool { return testutil.ToFloat64(g) == 0 }, hostile.Slack, time.Millisecond)
}

// TestMaxConnsCapsTheListener: Limits.MaxConns in place of MaxConns —
// past it a new connection waits in the backlog until one closes.
func TestMaxConnsCapsTheListener(t *testing.T) {
	release := make(chan struct{})
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	addr, ln := serve(t, stream, Limits{PerClient: -1, MaxConns: 2})
	defer close(release)
	var conns []net.Conn
	for range 2 {
		c := hostile.Dial(t, addr)
		hostile.Send(t, c, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(hostile.Slack))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		conns = append(conns, c)
	}
	third := hostile.Dial(t, addr)
	hostile.Send(t, third, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := third.Read(make([]byte, 1))
	assert.Error(t, err, "the third waits while two are open")
	all, _ := ln.Open("loopback")
	assert.Equal(t, 2, all)
	conns[0].Close()
	third.SetReadDeadline(time.Now().Add(hostile.Slack))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	require.NoError(t, err, "the third is served once one closed")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 7, reapAt(8), "an eighth of the cap is kept from idle connections")
}

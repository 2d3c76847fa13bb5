package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits are a Listener's bounds on connections besides MaxConns. The
// zero value is the defaults.
type Limits struct {
	// PerClient caps the connections one client holds open at once: one
	// IP address, every loopback address counting as one client (a local
	// operator, a load generator and a load balancer on this machine are
	// one client to the server). Default DefaultPerClient; negative: no
	// cap (a server whose every client is one proxy or one generator).
	PerClient int
	// MaxConns caps the connections open at once, from every client.
	// Default (0) MaxConns; more is for a server that follows more
	// streams than MaxConns/2 (each holds a connection, a goroutine and
	// its buffers for as long as it lasts), within the process's
	// file-descriptor limit.
	MaxConns int
}

// DefaultPerClient is Limits.PerClient's default: a quarter of MaxConns,
// so that it takes four clients, not one, to hold every connection. A
// browser holds about six connections to a host and its streams, a load
// balancer's pool a few hundred (the shop's soak: 256); a load balancer
// that holds more must be given a higher cap (or none).
const DefaultPerClient = MaxConns / 4

// reapAt is how many open connections, of max, make the listener close
// idle ones: from there on each new connection closes the connection idle
// the longest, so that idle keep-alive connections (IdleTimeout, 2
// minutes) cannot hold the last eighth of max, and a new client still
// gets in while the cap would make it wait.
func reapAt(max int) int { return max - max/8 }

// Listener is a TCP listener with the bounds of this package: at most
// MaxConns connections open at once (Limits.MaxConns: further
// connections wait in the kernel's backlog), at most Limits.PerClient of
// them from one client, and idle ones closed when the server is near its
// cap. A client at its cap gets in by closing its own connection idle
// the longest, or, with none idle, is closed at once.
//
// Idle means what the http.Server reports through ConnState (New sets
// the hook): a keep-alive connection between requests, or one that has
// sent nothing yet. Connections carrying a request or a stream are never
// closed by the listener. Under a server that does not report states the
// caps hold, and nothing is closed early.
type Listener struct {
	net.Listener
	perClient int
	max       int
	reapAt    int
	// sem holds a place for each open connection (at most max); done is
	// closed with the listener. (netutil.LimitListener's, in place of
	// its wrapper, so that a connection's own socket stays reachable:
	// conn.SyscallConn.)
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu struct {
		sync.Mutex
		open    map[*conn]struct{}
		clients map[string]int
		seq     uint64 // orders state changes: the lowest idle seq is idle the longest
	}
}

// conn is one accepted connection.
type conn struct {
	net.Conn
	l      *Listener
	client string
	once   sync.Once
	// Guarded by l.mu.
	idle bool   // reported new or idle, and not yet closed by the listener
	seq  uint64 // when it became idle
}

// Limit caps ln at MaxConns connections open at once and DefaultPerClient
// per client.
func Limit(ln net.Listener) *Listener { return LimitWith(ln, Limits{}) }

// LimitWith caps ln at l.MaxConns connections open at once and
// l.PerClient per client.
func LimitWith(ln net.Listener, l Limits) *Listener {
	if l.PerClient == 0 {
		l.PerClient = DefaultPerClient
	}
	if l.MaxConns <= 0 {
		l.MaxConns = MaxConns
	}
	out := &Listener{Listener: ln, perClient: l.PerClient, max: l.MaxConns, reapAt: reapAt(l.MaxConns),
		sem: make(chan struct{}, l.MaxConns), done: make(chan struct{})}
	out.mu.open = map[*conn]struct{}{}
	out.mu.clients = map[string]int{}
	return out
}

// acquire takes a place for a connection, waiting for one; false once
// the listener is closed.
func (l *Listener) acquire() bool {
	select {
	case <-l.done:
		return false
	case l.sem <- struct{}{}:
		return true
	}
}

func (l *Listener) release() { <-l.sem }

// Close closes the listener; the connections stay open.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// Accept waits for the next connection a client may open: once fewer
// than MaxConns are open.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		if !l.acquire() {
			return nil, errClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.release()
			return nil, err
		}
		tc := &conn{Conn: c, l: l, client: clientOf(c.RemoteAddr())}
		var reap []*conn
		l.mu.Lock()
		if l.perClient > 0 && l.mu.clients[tc.client] >= l.perClient {
			victim := l.idlest(tc.client)
			if victim == nil {
				l.mu.Unlock()
				c.Close() // every one of its connections is busy
				l.release()
				continue
			}
			reap = append(reap, victim)
		}
		if len(l.mu.open)-len(reap) >= l.reapAt {
			if victim := l.idlest(""); victim != nil {
				reap = append(reap, victim)
			}
		}
		l.mu.open[tc] = struct{}{}
		l.mu.clients[tc.client]++
		l.mu.Unlock()
		for _, v := range reap {
			v.Close()
		}
		return tc, nil
	}
}

// idlest returns the connection idle the longest (of client, or of any
// when client is ""), no longer counted as idle, or nil. Callers hold
// l.mu.
func (l *Listener) idlest(client string) *conn {
	var best *conn
	for c := range l.mu.open {
		if c.idle && (client == "" || c.client == client) && (best == nil || c.seq < best.seq) {
			best = c
		}
	}
	if best != nil {
		best.idle = false
	}
	return best
}

// Open returns how many connections are open, in all and from client
// ("loopback" for the loopback addresses).
func (l *Listener) Open(client string) (all, fromClient int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.open), l.mu.clients[client]
}

// state notes what the server reports of c.
func (l *Listener) state(c *conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.mu.open[c]; !open {
		return
	}
	l.mu.seq++
	c.idle, c.seq = s == http.StateNew || s == http.StateIdle, l.mu.seq
}

// errClosed is Accept's error once the listener is closed.
var errClosed = fmt.Errorf("server: listener closed: %w", net.ErrClosed)

// SyscallConn is the connection's own socket's (net.TCPConn's), for a
// stream that writes to it directly (api's streams); an error for a
// connection without one.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		l := c.l
		l.release()
		l.mu.Lock()
		delete(l.mu.open, c)
		if l.mu.clients[c.client]--; l.mu.clients[c.client] <= 0 {
			delete(l.mu.clients, c.client)
		}
		l.mu.Unlock()
	})
	return err
}

// clientOf names a connection's client: its IP address, or "loopback".
func clientOf(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ta.IP.IsLoopback() {
		return "loopback"
	}
	return ta.IP.String()
}

// trackState is New's http.Server.ConnState: it tells a Listener's
// connections (under TLS too) what the server does with them.
func trackState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	if tc, ok := c.(*conn); ok {
		tc.l.state(tc, s)
	}
}

// Collector exports the connections open on l as the gauge
// brownout_http_connections_open: beside l's caps (its help says them),
// what an operator watches for a client holding connections, and what a
// soak subtracts from the goroutines (one each) to see the rest.
func (l *Listener) Collector() prometheus.Collector {
	per := "no cap from one client"
	if l.perClient > 0 {
		per = fmt.Sprintf("%d from one client", l.perClient)
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "brownout_http_connections_open",
		Help: fmt.Sprintf("Connections open on the server's listener (at most %d, %s).", l.max, per),
	}, func() float64 {
		n, _ := l.Open("")
		return float64(n)
	})
}

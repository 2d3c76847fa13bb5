// Package pipenet is an in-memory network for tests in testing/synctest
// bubbles, where real sockets are not durably blocking: a listener whose
// connections are net.Pipe ends, and a dialer for the client's end.
package pipenet

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Listener is a net.Listener of net.Pipe connections; Dial connects to it.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

// New returns a Listener at 127.0.0.1:80.
func New() *Listener { return newAt(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}) }

func newAt(addr net.Addr) *Listener {
	return &Listener{conns: make(chan net.Conn), done: make(chan struct{}), addr: addr}
}

// Accept waits for the next Dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is a loopback address, so that servers that check their listener
// see a local one: 127.0.0.1:80, or the port Net gave it.
func (l *Listener) Addr() net.Addr { return l.addr }

// Dial connects to the listener, whatever the network and address; use it
// as an http.Transport's DialContext.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Net holds several listeners, each at its own loopback port, for tests
// of a client that talks to several servers: Listen adds one, Dial
// connects by address. The zero value is ready.
type Net struct {
	mu  sync.Mutex
	ls  map[string]*Listener
	gen int
}

// Listen returns a new listener at the next port (from 10001).
func (n *Net) Listen() *Listener {
	n.mu.Lock()
	n.gen++
	port := 10000 + n.gen
	n.mu.Unlock()
	return n.ListenAt(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
}

// ListenAt returns a new listener at addr, in place of any there before
// (a server restarted at its address).
func (n *Net) ListenAt(addr net.Addr) *Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ls == nil {
		n.ls = map[string]*Listener{}
	}
	l := newAt(addr)
	n.ls[addr.String()] = l
	return l
}

// Dial connects to the listener at addr; use it as an http.Transport's
// DialContext. An address nobody listens at, or a closed listener, is
// refused at once, as a closed port is.
func (n *Net) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.ls[addr]
	n.mu.Unlock()
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errRefused}
	}
	c, err := l.Dial(ctx, network, addr)
	if err == net.ErrClosed {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errRefused}
	}
	return c, err
}

var errRefused = errors.New("connection refused")

// Package pipenet is an in-memory network for tests in testing/synctest
// bubbles, where real sockets are not durably blocking: a listener whose
// connections are net.Pipe ends, and a dialer for the client's end.
package pipenet

import (
	"context"
	"net"
	"sync"
)

// Listener is a net.Listener of net.Pipe connections; Dial connects to it.
type Listener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// New returns a Listener.
func New() *Listener { return &Listener{conns: make(chan net.Conn), done: make(chan struct{})} }

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
// see a local one.
func (l *Listener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

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

package deps

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// pipeNet is an in-memory network for testing/synctest bubbles, where real
// sockets are not durably blocking: a listener whose connections are
// net.Pipe ends, and a dialer for the client's end.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeNet() *pipeNet { return &pipeNet{conns: make(chan net.Conn), done: make(chan struct{})} }

func (l *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeNet) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeNet) Addr() net.Addr { return pipeAddr{} }

func (l *pipeNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
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

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// pipeServer serves h on a pipeNet; close stops the server (and the
// dependency, through stop) and the client's idle connections.
type pipeServer struct {
	*Server
	tr *http.Transport
}

func servePipe(h http.Handler, stop func()) *pipeServer {
	l := newPipeNet()
	// Host 127.0.0.1: the dependencies serve local clients only.
	return &pipeServer{Server: serve(l, "http://127.0.0.1", h, stop), tr: &http.Transport{DialContext: l.dial}}
}

// client is an HTTP client on the pipe network with a timeout (0: none).
func (p *pipeServer) client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: p.tr, Timeout: timeout}
}

func (p *pipeServer) close() {
	p.Server.Close()
	p.tr.CloseIdleConnections()
}

// serveRecorded calls h once, without a network, as a client on the
// same machine would (Host 127.0.0.1, a write typed application/json
// unless header says otherwise).
func serveRecorded(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Host = "127.0.0.1"
	if method != http.MethodGet {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

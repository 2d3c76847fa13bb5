// Package server builds every HTTP server of this project (brownoutd, the
// shop and its simulated dependencies, the sale's dial front, the test
// app) with the same bounds, so that a slow or hostile client holds a
// bounded amount of time, memory and connections whatever it sends:
//
//   - headers within ReadHeaderTimeout, at most MaxHeaderBytes of them
//     (net/http answers 431 past it and closes);
//   - a request body within BodyTimeout of the handler starting: the
//     read deadline is set before the handler runs and never cleared by
//     us (net/http clears it when the body reaches its end), so that the
//     drain net/http does after a handler that left its body unread is
//     bounded too, and a body that stalls ends in a closed connection;
//   - an idle keep-alive connection closes after IdleTimeout, and sooner
//     when the server is near MaxConns (Listener);
//   - at most MaxConns connections open at once (Listen; Limits.MaxConns
//     for more; further connections wait in the kernel's backlog until
//     one closes), at most Limits.PerClient of them (DefaultPerClient)
//     from one client address.
//
// There is no WriteTimeout: brownoutd and the shop carry event streams
// (/v1/stream, /ofrep/v1/events) that last as long as their clients; the
// streams bound each write themselves.
package server

import (
	"net"
	"net/http"
	"time"
)

const (
	// ReadHeaderTimeout bounds the time a client takes to send a
	// request's headers (slowloris): they are small (at most
	// MaxHeaderBytes), and a client that cannot send them in 5 s is broken
	// or hostile.
	ReadHeaderTimeout = 5 * time.Second
	// BodyTimeout bounds the time a client takes to send a request body
	// once its headers are in: our bodies are at most a few hundred KiB
	// (a push is capped at 256 KiB), 10 s is a slow mobile link's worth.
	BodyTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection that carries no request
	// for this long: long enough for the apps' and load generators'
	// connection pools to reuse connections, short enough that idle
	// clients do not hold MaxConns.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes caps a request's headers (net/http's default is 1
	// MiB): our largest legitimate headers are a bearer token, an
	// X-User-ID and a deadline; 64 KiB leaves room for proxies' and
	// browsers' own, and keeps what a client can make a server parse and
	// keep (rate-limit keys among them) small.
	MaxHeaderBytes = 64 << 10
	// MaxConns caps the connections a server holds open at once: each
	// costs a goroutine and its buffers (~16 KiB idle), so 4096 is at most
	// ~64 MiB, far under the file-descriptor limits Go raises at start,
	// and above what the sale's load (about a thousand concurrent
	// requests at 2× capacity with a 1 s timeout) or a fleet's streams
	// need.
	MaxConns = 4096
)

// New returns a server of h with the bounds above; the caller serves it
// on a listener from Listen (the server tells the listener which of its
// connections are idle).
func New(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           BodyDeadline(h, BodyTimeout),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnState:         trackState,
	}
}

// Listen listens on the TCP address addr with the default Limits.
func Listen(addr string) (*Listener, error) { return ListenWith(addr, Limits{}) }

// ListenWith listens on the TCP address addr with l's bounds.
func ListenWith(addr string, l Limits) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return LimitWith(ln, l), nil
}

// BodyDeadline gives every request with a body d to send it: the
// connection's read deadline is set before h runs. It is never cleared
// here: net/http clears it when the body is read to its end (its
// background read for the next request starts there), and a body left
// unread or stalled keeps it, so that net/http's drain after h returns
// ends at the deadline with the connection closed instead of waiting for
// ever.
func BodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetBodyDeadline(w, r, d)
		h.ServeHTTP(w, r)
	})
}

// SetBodyDeadline sets the read deadline of r's connection to now+d when r
// has a body (a Content-Length or chunked), for handlers mounted in
// servers this package did not build. A writer that cannot set deadlines
// (HTTP/2, a recorder) is left as it is.
func SetBodyDeadline(w http.ResponseWriter, r *http.Request, d time.Duration) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)) //nolint:errcheck // not supported: nothing to bound here
}

// Abandon ends r's connection after the answer, reading nothing more of
// r's body: for a handler that refuses a request without reading its
// body, or gave up reading it. net/http would otherwise read what is
// left (up to 256 KiB) after the answer, for as long as the client takes
// to send it, before the connection could close or serve another request.
func Abandon(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now()) //nolint:errcheck // not supported: the server's own deadline holds
}

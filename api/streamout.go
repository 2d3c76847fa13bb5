package api

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A stream's messages go out one of two ways (streamOut):
//
//   - with Config.OwnStreamConns, over HTTP/1.1 (a GET without a body),
//     the stream takes its connection from net/http (Hijack) and writes
//     the response itself: the head, then each wake's messages as one
//     chunk of the chunked body, one write to the socket (connOut) —
//     and on a plain TCP connection a hub's rounds are written to the
//     socket by the fan-out itself while the socket takes them
//     (fanout.go);
//   - elsewhere (without it, HTTP/2, HTTP/1.0, a HEAD, a writer that
//     cannot be hijacked), through net/http's response, one Flush a
//     wake (httpOut).
//
// Why take the connection: a fan-out to ten thousand streams touches
// each one's memory once a change, none of it in the processor's caches
// by then, and net/http's path copies every message twice (the
// response's buffer, the connection's) through layers of writers before
// the socket's write, where the stream's own write sends the bytes every
// stream shares. The server's CPU a delivery to 10 000 followers
// (BenchmarkStreamFanoutProcess, which runs the daemon's configuration),
// before rounds were written directly: 9.5–10.4 µs owning the
// connections, 10.8–12.1 µs through net/http's response (three runs
// each, alternated, on a shared two-core machine).
//
// What changes for a client of an HTTP/1.1 stream: the response says
// Connection: close, and once the stream ends (its last chunk written)
// the connection closes instead of serving another request; a client
// that sends anything after its request (a pipelined request) ends its
// stream. A stream that owns its connection is no longer one of the
// http.Server's: its Close does not close it and its Shutdown does not
// wait for it — the API's Shutdown ends it, and waits for it at most
// shutdownGrace.
type streamOut interface {
	// write sends msgs, in order, at once: false when the stream must
	// end (the client left, or a write waited past its deadline).
	write(msgs ...[]byte) bool
	// last sends a stream's last message, waiting at most shutdownGrace.
	last(msg []byte)
	// writeRaw sends bytes already framed for the response (what a
	// socket left of a round written directly: fanout.go).
	writeRaw(b []byte) bool
	// raw is the socket rounds may be written to directly, or nil.
	raw() syscall.RawConn
	// end ends the response (the connection's, closed).
	end()
}

// shutdownGrace bounds a stream's last write once the API shuts down
// (and the wait of Shutdown for the streams that own their connection).
var shutdownGrace = 2 * time.Second

// writeDeadline moves a connection's write deadline on lazily: only when
// less than streamWriteTimeout of it is left, to streamWriteTimeout and a
// half — moving it costs a timer's update, and a fan-out to ten thousand
// streams would pay it ten thousand times. A write so waits at least
// streamWriteTimeout for a client that stopped reading, at most half as
// long again.
type writeDeadline struct {
	at  time.Time
	set func(time.Time) error
}

func (d *writeDeadline) extend() {
	if now := time.Now(); d.at.Sub(now) < streamWriteTimeout {
		d.at = now.Add(streamWriteTimeout + streamWriteTimeout/2)
		d.set(d.at)
	}
}

// short sets the deadline shutdownGrace from now (a last write).
func (d *writeDeadline) short() {
	d.at = time.Now().Add(shutdownGrace)
	d.set(d.at)
}

// httpOut writes through net/http's response.
type httpOut struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	dl writeDeadline
}

func (o *httpOut) write(msgs ...[]byte) bool {
	o.dl.extend()
	for _, b := range msgs {
		if _, err := o.w.Write(b); err != nil {
			return false
		}
	}
	return o.rc.Flush() == nil // one flush for them all: one system call, not one each
}

func (o *httpOut) last(msg []byte) {
	o.dl.short()
	o.w.Write(msg)
	o.rc.Flush()
}

func (o *httpOut) end() {}

func (o *httpOut) writeRaw([]byte) bool { return false } // never: raw is nil

func (o *httpOut) raw() syscall.RawConn { return nil }

// connOut writes a chunked response on a connection taken from net/http.
type connOut struct {
	conn   net.Conn
	sock   syscall.RawConn // conn's socket, when it is a plain one (not TLS)
	dl     writeDeadline
	broken bool   // a write failed: nothing more goes out
	ended  func() // after end
}

func (o *connOut) raw() syscall.RawConn { return o.sock }

func (o *connOut) writeRaw(b []byte) bool {
	if o.broken {
		return false
	}
	o.dl.extend()
	_, err := o.conn.Write(b)
	o.broken = err != nil
	return !o.broken
}

// chunkPool holds the buffers a wake's chunk is put together in: a
// buffer used a moment ago by another stream, still in the cache, where
// each stream's own would not be.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledChunk is the largest chunk put together in a pooled buffer;
// a larger one (a first state with many features or instances) is
// written piece by piece, not copied.
const maxPooledChunk = 32 << 10

func (o *connOut) write(msgs ...[]byte) bool {
	if o.broken {
		return false
	}
	o.dl.extend()
	n := 0
	for _, m := range msgs {
		n += len(m)
	}
	if n == 0 {
		return true // a zero-length chunk would end the body
	}
	if n > maxPooledChunk {
		var head [20]byte
		_, err := o.conn.Write(append(strconv.AppendInt(head[:0], int64(n), 16), crlf...))
		for _, m := range msgs {
			if err == nil {
				_, err = o.conn.Write(m)
			}
		}
		if err == nil {
			_, err = o.conn.Write(crlf)
		}
		o.broken = err != nil
		return !o.broken
	}
	bp := chunkPool.Get().(*[]byte)
	b := strconv.AppendInt((*bp)[:0], int64(n), 16)
	b = append(b, crlf...)
	for _, m := range msgs {
		b = append(b, m...)
	}
	b = append(b, crlf...)
	_, err := o.conn.Write(b)
	*bp = b[:0]
	chunkPool.Put(bp)
	o.broken = err != nil
	return !o.broken
}

var crlf = []byte("\r\n")

func (o *connOut) last(msg []byte) {
	o.dl.short()
	o.write(msg)
}

// end writes the body's last chunk, unless a write failed, and closes
// the connection. The last chunk waits at most endGrace: it tells the
// client the stream ended rather than broke, and a client that does
// not read keeps the stream's place no longer for it.
func (o *connOut) end() {
	if !o.broken {
		o.conn.SetWriteDeadline(time.Now().Add(endGrace))
		o.conn.Write([]byte("0\r\n\r\n"))
	}
	o.conn.Close()
	o.ended()
}

// endGrace bounds the write of a stream's last chunk.
const endGrace = 250 * time.Millisecond

// openStream answers r with an event stream's head and returns where its
// messages go, with a context done once the client leaves; false when
// the stream cannot start (nothing more to write). The caller ends the
// stream with its end.
func (a *API) openStream(w http.ResponseWriter, r *http.Request) (streamOut, context.Context, bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // no proxy buffering (nginx)
	rc := http.NewResponseController(w)
	if a.cfg.OwnStreamConns && r.Method == http.MethodGet && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && (r.Body == nil || r.Body == http.NoBody) {
		conn, brw, err := rc.Hijack()
		switch {
		case err == nil:
			a.ownedStreams.Add(1)
			o, ctx, ok := ownStream(conn, brw.Reader, h)
			if !ok {
				a.ownedStreams.Add(-1)
				return nil, nil, false
			}
			o.ended = func() { a.ownedStreams.Add(-1) }
			return o, ctx, true
		case !errors.Is(err, http.ErrNotSupported):
			return nil, nil, false
		}
	}
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, nil, false
	}
	return &httpOut{w: w, rc: rc, dl: writeDeadline{set: rc.SetWriteDeadline}}, r.Context(), true
}

// ownStream writes the head of a stream on a connection taken from
// net/http, and watches the connection: the context it returns is done
// when the client closes it, or sends anything (a stream's client has
// nothing more to say).
func ownStream(conn net.Conn, br *bufio.Reader, h http.Header) (*connOut, context.Context, bool) {
	head := []byte("HTTP/1.1 200 OK\r\n")
	if h.Get("Date") == "" {
		head = append(head, "Date: "+time.Now().UTC().Format(http.TimeFormat)+"\r\n"...)
	}
	var hb headerBuf
	h.Write(&hb)
	head = append(head, hb...)
	head = append(head, "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"...)
	o := &connOut{conn: conn, dl: writeDeadline{set: conn.SetWriteDeadline}}
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			o.sock = raw
		}
	}
	o.dl.extend()
	if _, err := conn.Write(head); err != nil {
		conn.Close()
		return nil, nil, false
	}
	ctx, gone := context.WithCancel(context.Background())
	go func() {
		defer gone()
		br.ReadByte() // blocks until the client closes or says something
	}()
	return o, ctx, true
}

// headerBuf is an io.Writer for http.Header.Write.
type headerBuf []byte

func (b *headerBuf) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// WriteString keeps Header.Write from converting each string.
func (b *headerBuf) WriteString(s string) (int, error) {
	*b = append(*b, s...)
	return len(s), nil
}

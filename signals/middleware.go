package signals

import (
	"bufio"
	"net"
	"net/http"
	"time"
)

// MiddlewareConfig configures Middleware. The zero value classifies by the
// X-Priority header, reads time.Now and counts 5xx responses as failures.
type MiddlewareConfig struct {
	// Classify returns a request's class. Default ClassOf.
	Classify func(*http.Request) Class
	// Failed reports whether a status is a failure. Default: ≥ 500.
	Failed func(status int) bool
	// Now returns the current time. Default time.Now.
	Now func() time.Time
}

// Middleware returns net/http middleware that records, for every request,
// its arrival, its time in flight, its latency and its outcome (failed by
// status or panic; good when it also met its deadline, see DeadlineOf).
//
// Use it for services without admission control. shed's middleware records
// the same signals, plus queueing and rejections, into the same Recorder;
// don't stack both on one handler or arrivals count twice.
func Middleware(rec *Recorder, cfg MiddlewareConfig) func(http.Handler) http.Handler {
	classify, failed, now := cfg.Classify, cfg.Failed, cfg.Now
	if classify == nil {
		classify = ClassOf
	}
	if failed == nil {
		failed = func(status int) bool { return status >= 500 }
	}
	if now == nil {
		now = time.Now
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := classify(r)
			rec.Arrive(c)
			start := rec.Start(now())
			deadline, _, _ := DeadlineOf(r, start)
			sw := StatusWriter{ResponseWriter: w}
			defer func() {
				p := recover()
				bad := p != nil || failed(sw.Status())
				rec.Done(c, start, now(), bad, deadline)
				if p != nil {
					panic(p)
				}
			}()
			next.ServeHTTP(&sw, r)
		})
	}
}

// StatusWriter remembers the status a handler wrote. It forwards Flush and
// Hijack, and unwraps for http.ResponseController. Middleware that records
// outcomes wraps the handler's writer in one.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// Status returns the status written, 200 if the handler wrote none.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are informational
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *StatusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

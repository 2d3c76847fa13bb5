package signals

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"time"
)

// MiddlewareConfig configures Middleware. The zero value counts every
// request as Default unless its X-Priority header lowers it, reads
// time.Now, counts 503 responses as refusals for overload and other 5xx
// responses as failures.
type MiddlewareConfig struct {
	// Classify returns a request's class. Default: Default. The
	// X-Priority header may lower the class it returns, never raise it
	// (LowerClass), unless TrustPriority.
	Classify func(*http.Request) Class
	// TrustPriority makes the X-Priority header, when it names a class,
	// the request's class, raising it as well as lowering it: for requests
	// from your own services only (shed.Propagate forwards the class of
	// the request that made the call). Default false: any client can set
	// the header, so it may only lower the class.
	TrustPriority bool
	// Failed reports whether a status is a failure. Default: ≥ 500.
	// It is asked only about responses that Refused did not claim.
	Failed func(status int) bool
	// Refused reports whether a response is a refusal by a limiter inside
	// the handler (an adaptive concurrency limiter, a bulkhead, a load
	// shedder of another library) and why. A refusal is counted with
	// Recorder.Reject, not as a completion: it has no latency and is not a
	// failure, and reject.ratio (refusals for overload / arrivals) sees it
	// when its reason is one that ClassCounts.Overload counts. It reads the
	// status and the response header as the handler wrote them.
	//
	// Default RefusedUnavailable: 503 is a refusal for ReasonConcurrency,
	// nothing else is; so a handler that reports a failed dependency should
	// answer 502 or 504, not 503. 429 is not counted by default because it
	// usually says that one client went over its quota, and one client must
	// not dim the service for everyone. failsafe-go's failsafehttp, though,
	// answers 429 for its adaptive limiter, bulkhead, circuit breaker and
	// rate limiter (and 503 for its timeout): behind it, count 429 too (see
	// ExampleMiddleware_refused).
	Refused func(status int, h http.Header) (Reason, bool)
	// Now returns the current time. Default time.Now.
	Now func() time.Time
}

// RefusedUnavailable is MiddlewareConfig.Refused's default: a 503 Service
// Unavailable is a refusal for ReasonConcurrency.
func RefusedUnavailable(status int, _ http.Header) (Reason, bool) {
	return ReasonConcurrency, status == http.StatusServiceUnavailable
}

// Middleware returns net/http middleware that records, for every request,
// its arrival, its time in flight, and then either a refusal (see
// MiddlewareConfig.Refused) or its latency and outcome (failed by status or
// panic; good when it also met its deadline, see DeadlineOf).
//
// While features are registered (Recorder.Features), the handler's
// request context carries a tally (see RequestTally): at completion, the
// handler's duration counts as each marked feature's On or Off service
// time. The handler gets a copy of the request whose context is the tally
// (a child of the request's own: same deadline, cancellation and values),
// as net/http asks of middleware that changes a request — one allocation
// of a request's size, and a few hundred nanoseconds, only while features
// are registered. shed's middleware carries the tally in the context
// value it sets anyway, at no cost.
//
// Use it for services without admission control of their own, or whose
// admission control is another library's inside the handler. shed's
// middleware records the same signals, plus queueing and its own
// rejections, into the same Recorder; don't stack both on one handler or
// arrivals count twice.
func Middleware(rec *Recorder, cfg MiddlewareConfig) func(http.Handler) http.Handler {
	classify, failed, refused, now := PriorityClassifier(cfg.Classify, cfg.TrustPriority), cfg.Failed, cfg.Refused, cfg.Now
	if failed == nil {
		failed = func(status int) bool { return status >= 500 }
	}
	if refused == nil {
		refused = RefusedUnavailable
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
			var sw *StatusWriter
			var tally *RequestTally
			if rec.Tallying() {
				// One allocation, as without tallies: the writer and the
				// tally, which is the handler's context.
				st := new(talliedWriter)
				if rec.BeginTally(&st.tally, untallied(r.Context())) {
					r = r.WithContext(&st.tally)
					tally = &st.tally
				}
				sw = &st.sw
			} else {
				sw = new(StatusWriter)
			}
			sw.ResponseWriter = w
			defer func() {
				p := recover()
				if p == nil {
					if why, ok := refused(sw.Status(), sw.Header()); ok {
						rec.refused(c, why)
						return
					}
				}
				end := now()
				rec.Done(c, start, end, p != nil || failed(sw.Status()), deadline)
				if tally != nil {
					rec.EndTally(tally, end.Sub(start))
				}
				if p != nil {
					panic(p)
				}
			}()
			next.ServeHTTP(sw, r)
		})
	}
}

// talliedWriter is what Middleware allocates for a request while features
// are registered.
type talliedWriter struct {
	sw    StatusWriter
	tally RequestTally
}

// untallied returns ctx, or its parent when ctx is a tally Middleware set
// (a request served again, or through a second Middleware): tallies do not
// pile up.
func untallied(ctx context.Context) context.Context {
	if t, ok := ctx.(*RequestTally); ok {
		return t.Context
	}
	return ctx
}

// refused counts a request whose work started (Start) and that a limiter
// inside the handler refused: it leaves the in-flight count and counts as a
// rejection, not as a completion.
func (r *Recorder) refused(c Class, why Reason) {
	r.counters.shard().inFlight.Add(-1)
	r.counters.Reject(c, why)
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

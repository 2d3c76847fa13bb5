package deps

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brownout/brownout/internal/local"
	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/server"
)

// MaxAdminBody bounds the body of PUT /admin/fault; larger bodies get 413.
const MaxAdminBody = 4 << 10

// maxRequestBody bounds the dependencies' own request bodies.
const maxRequestBody = 16 << 10

// Options are what every dependency takes; the zero value runs on real
// time. Tests either inject Sleep, or run in a testing/synctest bubble,
// where the default timers and time.Now are the bubble's fake clock.
type Options struct {
	// Sleep waits d, or until ctx is done (then it returns ctx.Err()).
	// It simulates every latency, so it must not burn CPU. ctx is the
	// request's, or, for work that outlives its client (an SMS delivery,
	// a charge), the dependency's own, cancelled by Close. Default: a
	// timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of the SMS provider's token bucket. Default
	// time.Now.
	Now func() time.Time
	// Rand returns a uniform number in [0, 1), drawn once a request to
	// decide error injection (a request fails when Rand() < ErrorRate).
	// Default math/rand/v2's Float64.
	Rand func() float64
}

func (o Options) withDefaults() Options {
	if o.Sleep == nil {
		o.Sleep = timerSleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	return o
}

// timerSleep is the default Sleep: a timer, no busy wait.
func timerSleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Server is a dependency served on its own listener, started by a
// dependency's Start method.
type Server struct {
	// URL is the base URL clients use, e.g. "http://127.0.0.1:41234".
	URL string

	srv  *http.Server
	stop func()
}

// foreign refuses (403, true) a request that is not a local client's
// (internal/local): a dependency's every route — its API, its fault knobs,
// its listings — trusts its 127.0.0.1 listener, which every page a
// browser on the machine has open reaches too (another site's fetch, a
// name re-pointed at 127.0.0.1). The shop and the sale call them from the
// same machine, without a browser's headers.
func foreign(w http.ResponseWriter, r *http.Request) bool {
	why := local.Check(r)
	if why == nil {
		return false
	}
	server.Abandon(w, r)
	writeProblem(w, http.StatusForbidden, why.Type, why.Detail)
	return true
}

// listen binds addr; an empty host (or an empty addr) binds 127.0.0.1, an
// empty port a free one.
func listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "0"
	}
	ln, err := server.Listen(net.JoinHostPort(host, port))
	if err != nil {
		return nil, err // not a nil *server.Listener in a non-nil interface
	}
	return ln, nil
}

func start(addr string, h http.Handler, stop func()) (*Server, error) {
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	return serve(ln, "http://"+ln.Addr().String(), h, stop), nil
}

// serve runs h on ln until the Server is closed.
func serve(ln net.Listener, url string, h http.Handler, stop func()) *Server {
	srv := server.New(h)
	go srv.Serve(ln) //nolint:errcheck // http.ErrServerClosed once closed
	return &Server{URL: url, srv: srv, stop: stop}
}

// Close closes the listener and every connection at once, and closes the
// dependency: work still in flight (an SMS not yet delivered, a charge not
// yet made) is abandoned.
func (s *Server) Close() error {
	err := s.srv.Close()
	s.stop()
	return err
}

// Shutdown stops accepting connections and waits for the requests in
// flight, including those whose client already went away (an SMS provider
// delivers what it accepted), until ctx is done; then it closes like
// Close and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	s.stop()
	return err
}

// lifetime is a dependency's own context: the work it accepted runs under
// it rather than under the request's, and Close cancels it.
type lifetime struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newLifetime() lifetime {
	ctx, cancel := context.WithCancel(context.Background())
	return lifetime{ctx, cancel}
}

func (l lifetime) closed() bool { return l.ctx.Err() != nil }

// knobs holds a dependency's fault knobs: read lock-free on every request,
// written under mu (by Go or by the admin endpoint).
type knobs[F any] struct {
	mu       sync.Mutex
	cur      atomic.Pointer[F]
	def      F
	validate func(F) error
	decode   func(base F, data []byte) (F, error)
	apply    func(F) // side effects of a change, under mu; may be nil
}

func newKnobs[F any](def F, validate func(F) error, decode func(F, []byte) (F, error), apply func(F)) *knobs[F] {
	k := &knobs[F]{def: def, validate: validate, decode: decode, apply: apply}
	k.store(def)
	return k
}

func (k *knobs[F]) get() F { return *k.cur.Load() }

func (k *knobs[F]) store(f F) {
	k.cur.Store(&f)
	if k.apply != nil {
		k.apply(f)
	}
}

func (k *knobs[F]) set(f F) error {
	if err := k.validate(f); err != nil {
		return errors.New("deps: " + oneLine(err))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.store(f)
	return nil
}

func (k *knobs[F]) update(fn func(*F)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	f := k.get()
	fn(&f)
	if err := k.validate(f); err != nil {
		return errors.New("deps: " + oneLine(err))
	}
	k.store(f)
	return nil
}

func (k *knobs[F]) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.store(k.def)
}

// route registers the admin endpoints: GET, PUT and DELETE /admin/fault
// and GET /admin/stats.
func (k *knobs[F]) route(mux *http.ServeMux, stats func() any) {
	mux.HandleFunc("GET /admin/fault", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, k.get())
	})
	mux.HandleFunc("PUT /admin/fault", k.put)
	mux.HandleFunc("DELETE /admin/fault", func(w http.ResponseWriter, r *http.Request) {
		k.reset()
		writeJSON(w, http.StatusOK, k.get())
	})
	mux.HandleFunc("GET /admin/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, stats())
	})
}

func (k *knobs[F]) put(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !jsonish(ct) {
		writeProblem(w, http.StatusUnsupportedMediaType, "unsupported-media-type",
			"send the knobs as application/json, not "+ct)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxAdminBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeProblem(w, http.StatusRequestEntityTooLarge, "too-large", "the knobs must fit in 4 KiB")
			return
		}
		writeProblem(w, http.StatusBadRequest, "bad-fault", "reading the body: "+err.Error())
		return
	}
	k.mu.Lock()
	next, err := k.decode(k.get(), body)
	if err == nil {
		k.store(next)
	}
	k.mu.Unlock()
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "bad-fault", oneLine(err))
		return
	}
	writeJSON(w, http.StatusOK, next)
}

// jsonish accepts JSON media types, and text/plain and curl's default
// form type for a body that is JSON all the same. Over a dependency's own
// routes only application/json gets here (foreign refuses the rest, which
// a page of another site could send).
func jsonish(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "text/plain", "application/x-www-form-urlencoded":
		return true
	}
	return strings.HasSuffix(mt, "+json")
}

func decodeFault(base Fault, data []byte) (Fault, error) {
	err := base.UnmarshalJSON(data)
	return base, err
}

func decodeSMSFault(base SMSFault, data []byte) (SMSFault, error) {
	err := base.UnmarshalJSON(data)
	return base, err
}

// oneLine joins the lines of errors.Join's error with "; ".
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// problem is an RFC 9457 problem detail.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// RetryAfterMS is the precise wait behind a 429's Retry-After (which
	// counts whole seconds).
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, slug, detail string) {
	writeProblemP(w, problem{Type: problemType(slug), Title: http.StatusText(status), Status: status, Detail: detail})
}

// problemType is the problem type of a slug.
func problemType(slug string) string { return httpproblem.Type("deps", slug) }

func writeProblemP(w http.ResponseWriter, p problem) {
	b, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusTooManyRequests || p.Status >= 500 {
		h.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
}

// decodeBody decodes a request's JSON body strictly into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		return errors.New("reading the body: " + err.Error())
	}
	trimmed := strings.TrimLeft(string(body), " \t\r\n")
	if trimmed == "" || trimmed[0] != '{' {
		return errors.New("want a JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return explainBody(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func explainBody(err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return errors.New(typ.Field + ": want " + typ.Type.String() + ", got " + typ.Value)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// draw decides error injection for one request.
func draw(o *Options, rate float64) bool { return rate > 0 && o.Rand() < rate }

package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/brownout/brownout/signals"
)

// Kind is one kind of request in the traffic mix.
type Kind struct {
	// Name labels the kind in reports, e.g. "page" or "checkout".
	Name string
	// Share of arrivals, relative to the other kinds.
	Share float64
	// Method and Path of the request (Path relative to Config.Target).
	// Default GET /.
	Method, Path string
	// Class is sent as X-Priority.
	Class signals.Class
	// Body, when set, is sent with the request.
	Body []byte
	// Header is added to the request.
	Header http.Header

	// Make, when set, builds each request of the kind: its path (relative
	// to Config.Target; "" keeps Path), body and header replace Path, Body
	// and Header. It is called from several goroutines at once; r.Rand is
	// the request's own, seeded from Config.Seed and r.Seq, so the same
	// seed makes the same requests.
	Make func(r Req) (path string, body []byte, header http.Header)
	// Users, when set, picks the kind's user and client address instead of
	// the draw from Config.Users and Config.Addr (an empty addr falls back
	// to Config.Addr), e.g. a bot that rotates user ids from one address.
	// It is called from several goroutines at once, with the request's own
	// r.
	Users func(r *rand.Rand) (user int, addr string)
	// Retry, when set, makes the kind's clients retry failed requests.
	Retry *Retry
}

// Req is one logical request of a kind, for Kind.Make.
type Req struct {
	// Seq numbers the run's logical requests from 0 (sent as _lr=<seq>).
	Seq uint64
	// User is the request's user (X-User-ID u<User>).
	User int
	// Rand is the request's own source of randomness.
	Rand *rand.Rand
}

// Event is a change made at a moment of the run, e.g. "SMS provider slow"
// at 30 s.
type Event struct {
	// At is the offset from the start of the run.
	At   time.Duration
	Name string
	// Do makes the change, in its own goroutine. Its ctx is done when the
	// run ends, and Run waits for Do to return.
	Do func(ctx context.Context)
}

// Phase is a stretch of offered load: constant at Rate, or moving around
// it by Shape.
type Phase struct {
	Name     string
	Rate     float64 // new requests per second, open loop; a shaped phase's mean
	Duration time.Duration
	// Shape, Amplitude and Period: how the rate moves around Rate over
	// the phase (see Shape); Constant, the zero value, does not.
	Shape     Shape
	Amplitude float64
	Period    time.Duration
}

// Config is one open-loop run.
type Config struct {
	// Target is the base URL, e.g. http://127.0.0.1:8081.
	Target string
	// Phases of offered load, in order.
	Phases []Phase
	// Mix of requests. Default: 30 % critical, 70 % default, GET /.
	Mix []Kind
	// Users is the number of distinct users, sent as X-User-ID (the
	// targeting key and rate-limit key of the app). Default 5000.
	Users int
	// Timeout is the client's timeout. Default 1 s.
	Timeout time.Duration
	// MaxConnections bounds the connections open to the target, as a
	// load balancer's pool does: a request finding them all busy waits
	// for one (its wait counts in its latency and its timeout). Default
	// 0: unbounded, a connection for each request in flight, kept idle
	// once it is done — so the target holds as many as the run's peak
	// concurrency, which a soak measuring its memory must not confuse
	// with a leak.
	MaxConnections int
	// Skip: each phase is measured without its first Skip. Default 5 s
	// (but never more than half the phase).
	Skip time.Duration
	// Seed seeds the users and the mix. The same seed sends the same
	// sequence of requests.
	Seed uint64
	// Progress, when set, receives one line a second.
	Progress io.Writer
	// Sample, when set, is called once a second; its values are kept per
	// second (for example the server's concurrency limit) and summarised
	// per phase.
	Sample func(ctx context.Context) map[string]float64
	// Optional, when set, reads an answer's body and returns how many
	// optional parts it served and could have served.
	Optional func(body []byte) (served, offered int)
	// Addr, when set, gives each user its client address, sent as
	// X-Forwarded-For (for a server that trusts the generator as its
	// proxy). Called from several goroutines at once.
	Addr func(user int) string
	// Events are run at their offsets from the start (see Event), while
	// the run lasts; each is logged to Progress as "event: <name>".
	Events []Event
}

// UserHeader carries the user id; ForwardedHeader the client address.
const (
	UserHeader      = "X-User-ID"
	ForwardedHeader = "X-Forwarded-For"
)

func (c *Config) withDefaults() error {
	if c.Target == "" {
		return errors.New("load: no target")
	}
	if _, err := url.Parse(c.Target); err != nil {
		return fmt.Errorf("load: target: %w", err)
	}
	if len(c.Phases) == 0 {
		return errors.New("load: no phases")
	}
	for _, p := range c.Phases {
		if err := p.validate(); err != nil {
			return err
		}
	}
	if len(c.Mix) == 0 {
		c.Mix = []Kind{{Name: "critical", Share: 0.3, Class: signals.Critical}, {Name: "default", Share: 0.7, Class: signals.Default}}
	}
	for i := range c.Mix {
		if c.Mix[i].Method == "" {
			c.Mix[i].Method = http.MethodGet
		}
		if c.Mix[i].Path == "" {
			c.Mix[i].Path = "/"
		}
		if !(c.Mix[i].Share > 0) {
			return fmt.Errorf("load: kind %q: share must be positive", c.Mix[i].Name)
		}
		if rt := c.Mix[i].Retry; rt != nil {
			if rt.Backoff < 0 || rt.Cap < 0 || !(rt.Budget >= 0) || math.IsInf(rt.Budget, 0) {
				return fmt.Errorf("load: kind %q: retry: negative backoff, cap or budget", c.Mix[i].Name)
			}
		}
	}
	if len(c.Mix) > 255 {
		return errors.New("load: more than 255 kinds")
	}
	for _, e := range c.Events {
		if e.Do == nil {
			return fmt.Errorf("load: event %q: no Do", e.Name)
		}
	}
	if c.Users <= 0 {
		c.Users = 5000
	}
	if c.MaxConnections < 0 {
		return errors.New("load: max connections must not be negative")
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.Skip == 0 {
		c.Skip = 5 * time.Second
	}
	return nil
}

// result is one answer, compactly.
type result struct {
	sent    time.Duration // since the start
	latency time.Duration
	code    uint16
	kind    uint8
	reason  uint8 // refusal reason + 1; 0 none
	timeout bool
	errored bool
	optOn   uint8
	optAll  uint8
	attempt uint8  // 0: the first
	seq     uint64 // the logical request
}

// Run sends cfg's load and returns its report. It stops early when ctx is
// done, reporting what it sent.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	var total time.Duration
	for _, p := range cfg.Phases {
		total += p.Duration
	}
	s := newSched(cfg, total)
	targeter := newTargeter(cfg, s)
	atk := vegeta.NewAttacker(vegeta.Timeout(cfg.Timeout), vegeta.KeepAlive(true), vegeta.Workers(64),
		vegeta.MaxBody(64<<10), vegeta.Redirects(vegeta.NoFollow), vegeta.MaxConnections(cfg.MaxConnections))
	progress := cfg.Progress
	if progress != nil {
		progress = &syncWriter{w: progress}
	}
	start := time.Now()
	var results <-chan *vegeta.Result
	if s == nil {
		results = atk.Attack(targeter.next, phasePacer(cfg.Phases), total, "load")
	} else {
		// Retries are paced by their due times, outside the phases' count;
		// the pacer ends the attack once no retry can come.
		results = atk.Attack(targeter.next, &retryPacer{ph: phases(cfg.Phases), total: total, s: s}, 0, "load")
	}

	secs := int(math.Ceil(total.Seconds()))
	samples := make([]map[string]float64, secs+1)
	var mu sync.Mutex
	var rs []result
	attackDone := make(chan struct{})
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		done := attackDone
		for {
			select {
			case <-ctx.Done():
				atk.Stop()
				s.stop()
				return
			case <-done:
				if progress == nil && cfg.Sample == nil {
					return // nothing more to tick for
				}
				done = nil
			case now := <-tick.C:
				sec := int(now.Sub(start) / time.Second)
				if cfg.Sample != nil && sec-1 >= 0 && sec-1 <= secs {
					sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					samples[sec-1] = cfg.Sample(sctx)
					cancel()
				}
				if progress != nil && sec >= 2 {
					var sample map[string]float64
					if sec-2 < len(samples) {
						sample = samples[sec-2]
					}
					mu.Lock()
					line := progressLine(rs, sec-2, cfg, sample)
					mu.Unlock()
					fmt.Fprintln(progress, line)
				}
				// Every second of the phases sampled and printed, every
				// answer in.
				if done == nil && sec >= secs+1 {
					return
				}
			}
		}
	}()
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	ev := startEvents(runCtx, cfg.Events, start, attackDone, progress)

	for r := range results {
		res := classify(r, start, cfg)
		if s != nil {
			s.settle(&res, r.Headers, time.Since(start))
		}
		mu.Lock()
		rs = append(rs, res)
		mu.Unlock()
	}
	atk.Stop()
	close(attackDone)
	<-sampleDone
	cancelRun()
	marks := ev.wait()
	rep := report(cfg, rs, samples)
	rep.Events = marks
	return rep, nil
}

// syncWriter serialises the progress lines and the event lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// targeter draws users and kinds.
type targeter struct {
	cfg  Config
	s    *sched // nil: no kind retries
	mu   sync.Mutex
	rnd  *rand.Rand
	seq  uint64
	sum  float64
	pre  []string // base+Path+sep+"_lr=", per kind
	post []string // "&_lk=<kind>"
}

func newTargeter(cfg Config, s *sched) *targeter {
	t := &targeter{cfg: cfg, s: s, rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	for i, k := range cfg.Mix {
		t.sum += k.Share
		// The kind and the logical request travel in the URL so that
		// their answers can be told.
		t.pre = append(t.pre, t.prefix(k.Path))
		t.post = append(t.post, "&_lk="+strconv.Itoa(i))
	}
	return t
}

func (t *targeter) prefix(path string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return strings.TrimRight(t.cfg.Target, "/") + path + sep + "_lr="
}

func (t *targeter) next(tgt *vegeta.Target) error {
	if t.s != nil && t.s.take(tgt) {
		return nil // a retry that is due
	}
	t.mu.Lock()
	seq := t.seq
	t.seq++
	u := t.rnd.Float64() * t.sum
	user := t.rnd.IntN(t.cfg.Users)
	t.mu.Unlock()
	i := len(t.cfg.Mix) - 1
	for j, k := range t.cfg.Mix {
		if u < k.Share {
			i = j
			break
		}
		u -= k.Share
	}
	k := &t.cfg.Mix[i]
	var rr *rand.Rand
	if k.Make != nil || k.Users != nil {
		rr = rand.New(rand.NewPCG(t.cfg.Seed^0xda3e39cb94b95bdb, seq))
	}
	var addr string
	if k.Users != nil {
		user, addr = k.Users(rr)
	}
	if addr == "" && t.cfg.Addr != nil {
		addr = t.cfg.Addr(user)
	}
	pre, body, hdr := t.pre[i], k.Body, k.Header
	if k.Make != nil {
		var path string
		path, body, hdr = k.Make(Req{Seq: seq, User: user, Rand: rr})
		if path != "" {
			pre = t.prefix(path)
		}
	}
	tgt.Method, tgt.URL, tgt.Body = k.Method, pre+strconv.FormatUint(seq, 10)+t.post[i], body
	h := make(http.Header, len(hdr)+3)
	for name, v := range hdr {
		h[name] = v
	}
	h.Set(signals.PriorityHeader, k.Class.String())
	h.Set(UserHeader, "u"+strconv.Itoa(user))
	if addr != "" {
		h.Set(ForwardedHeader, addr)
	}
	tgt.Header = h
	if t.s != nil {
		t.s.add(seq, i, tgt)
	}
	return nil
}

// phases paces phases in sequence, open loop: each phase's requests are
// sent at its rate whatever the answers do.
type phases []Phase

var _ vegeta.Pacer = phases(nil)

func phasePacer(ps []Phase) vegeta.Pacer { return phases(ps) }

// due returns the requests due by elapsed time t.
func (ps phases) due(t time.Duration) float64 {
	var h float64
	for _, p := range ps {
		if t <= 0 {
			break
		}
		h += p.sent(t)
		t -= p.Duration
	}
	return h
}

func (ps phases) total() time.Duration {
	var t time.Duration
	for _, p := range ps {
		t += p.Duration
	}
	return t
}

// Pace implements vegeta.Pacer.
func (ps phases) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	total := ps.total()
	if elapsed >= total {
		return 0, true
	}
	if float64(hits) < ps.due(elapsed) {
		return 0, false
	}
	return max(ps.at(hits+1)-elapsed, time.Microsecond), false
}

// at returns when request n (from 1) is due; the end when never.
func (ps phases) at(n uint64) time.Duration {
	want := float64(n)
	var t time.Duration
	var h float64
	for _, p := range ps {
		c := p.sent(p.Duration)
		if c > 0 && h+c >= want {
			return t + p.when(want-h)
		}
		h += c
		t += p.Duration
	}
	return t
}

// when is the first time from the phase's start by which it has offered n
// requests (0 < n ≤ all it offers): at a constant rate n/Rate; for a shape,
// found by bisection of its offered count, which never falls, to a
// microsecond.
func (p Phase) when(n float64) time.Duration {
	if p.Shape == Constant {
		return time.Duration(n / p.Rate * float64(time.Second))
	}
	lo, hi := time.Duration(0), p.Duration
	for hi-lo > time.Microsecond {
		mid := lo + (hi-lo)/2
		if p.sent(mid) >= n {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Rate implements vegeta.Pacer.
func (ps phases) Rate(elapsed time.Duration) float64 {
	for _, p := range ps {
		if elapsed < p.Duration {
			return p.rateAt(elapsed)
		}
		elapsed -= p.Duration
	}
	return 0
}

// problem is the part of an application/problem+json body we read.
type problem struct {
	Reason string `json:"reason"`
}

func classify(r *vegeta.Result, start time.Time, cfg Config) result {
	res := result{sent: r.Timestamp.Sub(start), latency: r.Latency, code: r.Code}
	if i := strings.LastIndex(r.URL, "_lk="); i >= 0 {
		if k, err := strconv.Atoi(r.URL[i+4:]); err == nil && k < len(cfg.Mix) {
			res.kind = uint8(k)
		}
		if j := strings.LastIndex(r.URL[:i], "_lr="); j >= 0 {
			res.seq, _ = strconv.ParseUint(strings.TrimSuffix(r.URL[j+4:i], "&"), 10, 64)
		}
	}
	switch {
	case r.Code == 0 && strings.Contains(r.Error, "Client.Timeout"):
		res.timeout = true
	case r.Code == 0:
		res.errored = true
	case r.Code == http.StatusServiceUnavailable || r.Code == http.StatusTooManyRequests:
		var p problem
		res.reason = uint8(signals.NumReasons) + 1 // unknown
		if strings.HasPrefix(r.Headers.Get("Content-Type"), "application/problem+json") && json.Unmarshal(r.Body, &p) == nil {
			for i := range signals.Reason(signals.NumReasons) {
				if i.String() == p.Reason {
					res.reason = uint8(i) + 1
				}
			}
		}
	case r.Code/100 == 2 && cfg.Optional != nil:
		on, all := cfg.Optional(r.Body)
		res.optOn, res.optAll = uint8(min(on, 255)), uint8(min(all, 255))
	}
	return res
}

// ok reports whether an answer counts as good: a 2xx within the timeout.
func (r result) ok() bool { return r.code/100 == 2 && !r.timeout }

// refusedName names a refusal reason index.
func refusedName(i int) string {
	if i < int(signals.NumReasons) {
		return signals.Reason(i).String()
	}
	return "other"
}

// p99 returns the 99th percentile of ds, or 0.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[int(math.Ceil(q*float64(len(ds))))-1]
}

func progressLine(rs []result, sec int, cfg Config, sample map[string]float64) string {
	var sent, ok, refused, timeouts, retries, crit, critOK int
	var lat []time.Duration
	for _, r := range rs {
		if int(r.sent/time.Second) != sec {
			continue
		}
		sent++
		if r.attempt > 0 {
			retries++
		}
		switch {
		case r.ok():
			ok++
			lat = append(lat, r.latency)
		case r.reason > 0:
			refused++
		case r.timeout:
			timeouts++
		}
		if cfg.Mix[r.kind].Class == signals.Critical {
			crit++
			if r.ok() {
				critOK++
			}
		}
	}
	line := fmt.Sprintf("%4ds  sent %5d  ok %5d  refused %5d  timeouts %4d  p99 %5dms", sec, sent, ok, refused, timeouts, quantile(lat, 0.99).Milliseconds())
	if crit > 0 {
		line += fmt.Sprintf("  critical %5.1f%%", 100*float64(critOK)/float64(crit))
	}
	if retries > 0 {
		line += fmt.Sprintf("  retries %d", retries)
	}
	keys := make([]string, 0, len(sample))
	for k := range sample {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		line += fmt.Sprintf("  %s %.4g", k, sample[k])
	}
	return line
}

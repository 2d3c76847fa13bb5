package sim

import (
	"math"
	"slices"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// Epoch returns virtual time zero, 2026-11-11 00:00 UTC. Policies see
// time.Time values Epoch() + t.
func Epoch() time.Time { return epoch }

var epoch = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

// Config is one run of the lab. Zero fields take the documented defaults.
type Config struct {
	// Seed seeds the generators; the same seed gives the same run.
	Seed uint32
	// Duration of the run. New requests arrive until then; answers after
	// it do not count. Default 30 s.
	Duration time.Duration
	// Load is the arrival rate of new user requests. Required.
	Load Profile
	// Mix is the traffic by class. Default: 30 % critical, 70 % default,
	// cost 1, no optional parts (the sources' model).
	Mix    []ClassMix
	Server Server
	Client Client
	// Admission is the server's policy. Default Unbounded(). A policy holds
	// state: give each run its own.
	Admission Admission
	// Dimmer moves the optional parts. Default Static(1).
	Dimmer Dimmer
	// Parts, when set, replace the mix's single optional block
	// (ClassMix.Optional is then ignored) with one optional part per
	// feature, each with its own true cost and its own level (Dim.Levels),
	// decided per user as the provider buckets them. At most 64.
	Parts []Part
	// Tick is the controller's period. Default 1 s.
	Tick time.Duration
	// Signals configures the recorder the Dimmer reads.
	Signals signals.Config
	// RecoverFrom, when positive, measures the recovery time after this
	// moment (the end of a capacity dip) as the sources do: the first
	// second s from which 5 s of attempts get ≥ 95 % good answers.
	RecoverFrom time.Duration
}

// Second is what happened during one second of virtual time. Requests are
// counted in the second they arrived (Arrivals, New, Refused), were
// dropped or timed out, or finished (Served, Good, latencies).
type Second struct {
	T        int                     `json:"t"`
	Arrivals int                     `json:"arrivals"` // attempts, retries included
	New      int                     `json:"new"`
	Served   int                     `json:"served"` // work completed, in time or not
	Good     int                     `json:"good"`   // answered within the client's deadline
	Refused  [signals.NumClasses]int `json:"refused"`
	Dropped  int                     `json:"dropped"` // taken in, then thrown away unserved
	// Admitted counts the requests the admission policy let start this
	// second (at once or from its queue), by class; Failed the refusals
	// and drops that happened this second, by class and reason — together
	// they show a priority inversion: a second in which a lower class was
	// admitted while a higher one was turned away.
	Admitted [signals.NumClasses]int                     `json:"admitted"`
	Failed   [signals.NumClasses][signals.NumReasons]int `json:"failed"`
	Timeouts int                                         `json:"timeouts"`
	P99      time.Duration                               `json:"p99_ns"`     // of good answers finishing this second
	Sojourn  time.Duration                               `json:"sojourn_ns"` // mean wait of requests starting this second
	Level    float64                                     `json:"level"`      // dimmer level at the end of the second
	Shed     float64                                     `json:"shed"`       // cascade shed level at the end of the second
	Optional float64                                     `json:"optional"`   // share of good answers with optional parts
	// Levels are the parts' levels at the end of the second, aligned with
	// Config.Parts, and OptionalShare the share of the optional work the
	// good answers finishing this second got, weighted by the parts' true
	// costs (1: every part for every answer). Both only with Parts.
	Levels        []float64 `json:"levels,omitempty"`
	OptionalShare float64   `json:"optional_share,omitempty"`
	InSystem      int       `json:"in_system"` // queued or in service at the end of the second
	Limit         float64   `json:"limit"`     // the admission layer's concurrency limit at the end of the second, if it has one
	GoodByArrival int       `json:"good_by_arrival"`
	// Users counts the new user requests that arrived this second and
	// whose first deadline fell inside the run; UsersInTime those of them
	// answered in time by some attempt.
	Users       int `json:"users"`
	UsersInTime int `json:"users_in_time"`
	// CriticalUsers and CriticalInTime are the same for critical users.
	CriticalUsers  int `json:"critical_users"`
	CriticalInTime int `json:"critical_in_time"`
	lat            []time.Duration
	sojSum         time.Duration
	sojN           int
	optGood        int
	optWork        float64 // Σ over good answers of the optional work they got, in shares of all parts' cost
	seen           bool    // an event happened in this second
}

// Summary is a run in one line, as the sources' tables have it.
type Summary struct {
	Duration   time.Duration `json:"duration_ns"`
	New        int           `json:"new"`
	Attempts   int           `json:"attempts"`
	Served     int           `json:"served"`
	Good       int           `json:"good"`
	GoodPerSec float64       `json:"good_per_s"`
	P99        time.Duration `json:"p99_ns"` // of good answers, arrival to answer
	Refused    int           `json:"refused"`
	Dropped    int           `json:"dropped"`
	Timeouts   int           `json:"timeouts"`
	// InTime is the share of user requests answered in time by some
	// attempt, and CriticalOK the same for critical ones. Both count only
	// users whose first deadline fell inside the run.
	InTime         float64 `json:"in_time"`
	CriticalOK     float64 `json:"critical_ok"`
	OptionalServed float64 `json:"optional_served"` // share of good answers with optional parts
	// OptionalShare is the share of the optional work good answers got,
	// weighted by the parts' true costs: only with Config.Parts.
	OptionalShare float64        `json:"optional_share,omitempty"`
	InSystem      int            `json:"in_system"`             // left queued or in service at the end
	Recovery      *time.Duration `json:"recovery_ns,omitempty"` // nil unless RecoverFrom is set; -1: never
}

// Result is a run's per-second series and summary.
type Result struct {
	Seconds []Second `json:"seconds"`
	Summary Summary  `json:"summary"`
}

type evKind uint8

const (
	evNew     evKind = iota // a new user request arrives
	evRetry                 // a retry arrives
	evFinish                // work on a request ends
	evTimeout               // a client gives up
	evTick                  // the controller steps
)

type event struct {
	at   time.Duration
	seq  uint64
	kind evKind
	r    *Request
}

// events is a min-heap ordered by (at, seq): typed, so that pushing an
// event does not box it as container/heap would. Each node has
// eventsArity children: a run pops every event it pushes, and a wider
// heap is shallower (half the levels of a binary one), so a pop moves
// fewer events, at the price of comparing four children at each level,
// which sit side by side in memory. The keys are unique (seq), so the
// order of the pops is the order of the keys whatever the heap's shape.
type events []event

// eventsArity is how many children a node of events has.
const eventsArity = 4

func (e event) before(o event) bool {
	return e.at < o.at || (e.at == o.at && e.seq < o.seq)
}

func (h *events) push(e event) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 { // move parents down into the hole until e's place is found
		p := (i - 1) / eventsArity
		if !e.before(q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
}

func (h *events) pop() event {
	q := *h
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q[n] = event{} // (the request it held is not kept alive by the heap)
	q = q[:n]
	if n > 0 {
		i := 0
		for { // move the least child up into the hole until last's place is found
			c := eventsArity*i + 1
			if c >= n {
				break
			}
			m := c
			for j := c + 1; j < min(c+eventsArity, n); j++ {
				if q[j].before(q[m]) {
					m = j
				}
			}
			if !q[m].before(last) {
				break
			}
			q[i] = q[m]
			i = m
		}
		q[i] = last
	}
	*h = q
	return top
}

type engine struct {
	cfg    Config
	mixSum float64
	now    time.Duration
	q      events
	seq    uint64
	arr    *Mulberry32 // arrivals: gaps, classes, users
	svc    *Mulberry32 // service times
	cli    *Mulberry32 // client jitter
	busy   int
	// gateRecords: the admission policy records queue sojourn itself, at
	// its gate (see recording), as the production middleware does.
	gateRecords bool
	rec         *signals.Recorder
	dim         Dim
	tokens      float64
	nextID      int
	inSys       int
	secs        []Second
	users       []userState
	goodLat     []time.Duration
	sum         Summary
	// With Config.Parts: each part's current level, and Σ of their costs.
	partLevel []float64
	partsCost float64
	// tallies[cur] accumulates each part's on/off service times over the
	// current tick; the other is the one the last Snapshot handed the
	// Dimmer, left alone until the next tick (Snapshot.Tallies' contract).
	tallies [2][]signals.Tally
	work    [2]signals.Moments // every request's, as Snapshot.Work
	cur     int
}

type userState struct {
	class signals.Class
	ok    bool
	first time.Duration
}

// withDefaults returns c with the documented defaults in its zero fields
// (but Admission and Dimmer, which hold state: see newEngine).
func (cfg Config) withDefaults() Config {
	if cfg.Duration <= 0 {
		cfg.Duration = 30 * time.Second
	}
	if len(cfg.Mix) == 0 {
		cfg.Mix = []ClassMix{{Class: signals.Critical, Share: 0.3}, {Class: signals.Default, Share: 0.7}}
	}
	if cfg.Server.Workers <= 0 {
		cfg.Server.Workers = 1
	}
	if cfg.Server.ServiceMean <= 0 {
		cfg.Server.ServiceMean = 10 * time.Millisecond
	}
	if cfg.Client.Timeout <= 0 {
		cfg.Client.Timeout = time.Second
	}
	if cfg.Client.Retry.BudgetBurst <= 0 {
		cfg.Client.Retry.BudgetBurst = 10
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	return cfg
}

// Run runs one configuration to its end. It is deterministic: the same
// Config gives the same Result.
func Run(cfg Config) Result {
	e := newEngine(cfg)
	for len(e.q) > 0 {
		ev := e.q.pop()
		if ev.at >= e.cfg.Duration {
			break // what happens after the end does not count
		}
		e.now = ev.at
		switch ev.kind {
		case evNew:
			e.newRequest()
		case evRetry:
			e.arrive(ev.r)
		case evFinish:
			e.finish(ev.r)
		case evTimeout:
			e.timeout(ev.r)
		case evTick:
			e.tick()
		}
		s := e.sec()
		s.InSystem, s.Level, s.Shed, s.seen = e.inSys, e.dim.Level, e.dim.Shed, true
		if e.partLevel != nil {
			if s.Levels == nil {
				s.Levels = make([]float64, len(e.partLevel))
			}
			copy(s.Levels, e.partLevel)
		}
		if l, ok := e.cfg.Admission.(Limiter); ok {
			s.Limit = l.Limit()
		}
	}
	return e.result()
}

func newEngine(cfg Config) *engine {
	cfg = cfg.withDefaults()
	if cfg.Admission == nil {
		cfg.Admission = Unbounded()
	}
	if cfg.Dimmer == nil {
		cfg.Dimmer = Static(1)
	}
	e := &engine{
		cfg: cfg,
		arr: NewMulberry32(cfg.Seed), svc: NewMulberry32(cfg.Seed ^ 0x5bd1e995), cli: NewMulberry32(cfg.Seed ^ 0x27d4eb2f),
		rec:    signals.NewRecorder(oneWriter(cfg.Signals)),
		tokens: cfg.Client.Retry.BudgetBurst,
		secs:   make([]Second, int((cfg.Duration+time.Second-1)/time.Second)),
	}
	for i := range e.secs {
		e.secs[i].T = i
	}
	for _, m := range cfg.Mix {
		e.mixSum += m.Share
	}
	if r, ok := cfg.Admission.(recording); ok {
		r.record(e.rec, func(c signals.Class) { e.sec().Admitted[c]++ })
		e.gateRecords = true
	}
	if len(cfg.Parts) > 0 {
		checkParts(cfg.Parts)
		e.partLevel = make([]float64, len(cfg.Parts))
		e.partsCost = partsCost(cfg.Parts)
		for k := range e.tallies {
			e.tallies[k] = make([]signals.Tally, len(cfg.Parts))
			for i, p := range cfg.Parts {
				e.tallies[k][i].Feature = p.Name
			}
		}
	} else {
		// One optional block and no parts: the service times are still
		// tallied, as a Recorder does for every request, under no
		// feature's name (every request "off").
		for k := range e.tallies {
			e.tallies[k] = make([]signals.Tally, 1)
		}
	}
	e.rec.Snapshot(epoch) // start the recorder's windows at zero
	e.dim = cfg.Dimmer.Step(epoch, signals.Snapshot{Time: epoch})
	if e.partLevel != nil {
		e.resolveLevels()
	}
	e.schedule(e.gap(), evNew, nil)
	e.schedule(cfg.Tick, evTick, nil)
	return e
}

func (e *engine) schedule(at time.Duration, k evKind, r *Request) {
	e.seq++
	e.q.push(event{at: at, seq: e.seq, kind: k, r: r})
}

func (e *engine) vt(d time.Duration) time.Time { return epoch.Add(d) }

// oneWriter is c for a recorder that one goroutine writes: a run is
// single-threaded, so its windows need one shard each (see
// signals.WindowConfig.Shards), unless c says otherwise. Their reads,
// every period, were a tenth of a lab run's time with a shard per core.
func oneWriter(c signals.Config) signals.Config {
	if c.Latency.Shards == 0 {
		c.Latency.Shards = 1
	}
	if c.Sojourn.Window.Shards == 0 {
		c.Sojourn.Window.Shards = 1
	}
	return c
}

func (e *engine) sec() *Second { return e.secAt(e.now) }

func (e *engine) secAt(d time.Duration) *Second {
	i := int(d / time.Second)
	return &e.secs[min(i, len(e.secs)-1)]
}

// keyFraction maps a user key to [0, 1): sticky decisions per user.
func keyFraction(k uint32) float64 { return float64(k) / 4294967296 }

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// gap draws the time to the next new request at the current rate.
func (e *engine) gap() time.Duration {
	rate := e.cfg.Load.Rate(e.now)
	if rate <= 0 {
		return e.now + 100*time.Millisecond // nothing now; look again soon
	}
	return e.now + max(seconds(e.arr.Exp(1/rate)), 1)
}

func (e *engine) newRequest() {
	if e.cfg.Load.Rate(e.now) > 0 {
		u := e.arr.Float64() * e.mixSum
		m := e.cfg.Mix[len(e.cfg.Mix)-1]
		for _, c := range e.cfg.Mix {
			if u < c.Share {
				m = c
				break
			}
			u -= c.Share
		}
		cost := m.Cost
		if cost <= 0 {
			cost = 1
		}
		opt := m.Optional
		if e.partLevel != nil {
			opt = cost * e.partsCost // every part on
			if m.NoParts {
				opt = 0
			}
		}
		r := &Request{
			ID: e.nextID, Attempt: 1, Class: m.Class, Key: uint32(e.arr.Float64() * 4294967296),
			Cost: cost, Optional: opt, first: e.now, dep: m.Dependency, noParts: m.NoParts,
		}
		e.nextID++
		e.users = append(e.users, userState{class: m.Class, first: e.now})
		e.sec().New++
		e.sum.New++
		if rp := e.cfg.Client.Retry; rp.Budget > 0 {
			e.tokens = math.Min(rp.BudgetBurst, e.tokens+rp.Budget)
		}
		e.arrive(r)
	}
	if next := e.gap(); next < e.cfg.Duration {
		e.schedule(next, evNew, nil)
	}
}

// arrive handles an attempt reaching the server.
func (e *engine) arrive(r *Request) {
	r.arrival = e.now
	r.Arrival, r.Deadline = e.vt(e.now), e.vt(e.now+e.cfg.Client.Timeout)
	r.Estimate = r.Cost + r.Optional*e.dim.Level
	e.sec().Arrivals++
	e.sum.Attempts++
	e.rec.Arrive(r.Class)
	// The cascade refuses a share of users at the door; critical never.
	if share := dimmer.ShedShare(e.dim.Shed, r.Class); share > 0 && keyFraction(r.Key^0x9e3779b9) < share {
		e.refuse(r, signals.ReasonShedLevel)
		return
	}
	ok, why := e.cfg.Admission.Offer(e.vt(e.now), r, e.drop)
	if !ok {
		e.refuse(r, why)
		return
	}
	r.state = stQueued
	e.inSys++
	e.schedule(e.now+e.cfg.Client.Timeout, evTimeout, r)
	e.startWork()
}

func (e *engine) refuse(r *Request, why signals.Reason) {
	r.state = stRefused
	e.rec.Reject(r.Class, why)
	e.secAt(r.arrival).Refused[r.Class]++
	e.sec().Failed[r.Class][why]++
	e.sum.Refused++
	if e.cfg.Client.Retry.RetryRefused {
		e.retry(r)
	}
}

func (e *engine) drop(r *Request, why signals.Reason) {
	wasWaiting := e.now <= r.arrival+e.cfg.Client.Timeout && r.state == stQueued
	r.state = stRefused
	e.inSys--
	e.rec.Reject(r.Class, why)
	e.sec().Dropped++
	e.sec().Failed[r.Class][why]++
	e.sum.Dropped++
	if wasWaiting && e.cfg.Client.Retry.RetryRefused {
		e.retry(r) // the client hears a 503 now
	}
}

// startWork fills free workers from the admission queue.
func (e *engine) startWork() {
	for e.busy < e.cfg.Server.workers(e.now) {
		r := e.cfg.Admission.Pull(e.vt(e.now), e.drop)
		if r == nil {
			return
		}
		e.busy++
		r.state = stRunning
		r.Start = e.vt(e.now)
		var cost float64
		if e.partLevel != nil {
			if !r.noParts {
				r.parts = e.decideParts(r.Key)
			}
			r.WithOptional = r.parts != 0
			cost = r.Cost * (1 + e.onCost(r.parts))
		} else {
			r.WithOptional = r.Optional > 0 && keyFraction(r.Key) < e.dim.Level
			cost = r.Cost
			if r.WithOptional {
				cost += r.Optional
			}
		}
		speed := 1.0
		if e.cfg.Server.Capacity != nil {
			speed = e.cfg.Server.Capacity(e.now)
		}
		mean := cost * e.cfg.Server.ServiceMean.Seconds() / speed * e.cfg.Server.contention(e.busy)
		sojourn := e.now - r.arrival
		if !e.gateRecords {
			e.rec.Queued(r.Class, sojourn, r.Start)
		}
		e.rec.Start(r.Start)
		r.cost = cost
		s := e.sec()
		s.sojSum += sojourn
		s.sojN++
		hold := seconds(mean)
		if !e.cfg.Server.Fixed {
			hold = seconds(e.svc.Exp(mean))
		}
		hold = max(hold, 1)
		if r.dep != nil {
			hold += r.dep.call(e.now)
		}
		e.schedule(e.now+hold, evFinish, r)
	}
}

func (e *engine) finish(r *Request) {
	gaveUp := r.state != stRunning // the client timed out meanwhile
	r.state = stDone
	e.busy--
	e.inSys--
	e.cfg.Admission.Done(e.vt(e.now), r)
	e.tally(r)
	// The latency the controller reads is the time inside the server, as
	// a middleware at its edge measures it: queueing in the seeds' model is
	// contention inside the server.
	e.rec.Done(r.Class, r.Arrival, e.vt(e.now), false, r.Deadline)
	s := e.sec()
	s.Served++
	e.sum.Served++
	if !gaveUp && e.now-r.arrival <= e.cfg.Client.Timeout {
		lat := e.now - r.arrival
		s.Good++
		s.lat = append(s.lat, lat)
		if r.WithOptional {
			s.optGood++
			if e.partLevel != nil && e.partsCost > 0 {
				s.optWork += e.onCost(r.parts) / e.partsCost
			}
		}
		e.secAt(r.arrival).GoodByArrival++
		e.sum.Good++
		e.goodLat = append(e.goodLat, lat)
		e.users[r.ID].ok = true
	}
	e.startWork()
}

func (e *engine) timeout(r *Request) {
	if r.state != stQueued && r.state != stRunning {
		return // answered or refused already
	}
	if r.state == stQueued && e.cfg.Server.CancelWaiting {
		if c, ok := e.cfg.Admission.(Canceler); ok && c.Cancel(e.vt(e.now), r) {
			// The handler saw its client go and returned: the admission
			// layer and the signals see a failed request that took the
			// client's timeout.
			r.state = stAbandoned
			e.inSys--
			e.rec.Done(r.Class, r.Arrival, e.vt(e.now), true, r.Deadline)
		}
	}
	if r.state == stRunning {
		r.state = stAbandoned // the work goes on, wasted
	}
	e.sec().Timeouts++
	e.sum.Timeouts++
	e.retry(r)
}

// retry schedules the client's next attempt, if its policy allows one.
func (e *engine) retry(r *Request) {
	rp := e.cfg.Client.Retry
	if r.Attempt > rp.MaxRetries {
		return
	}
	if rp.Budget > 0 {
		if e.tokens < 1 {
			return
		}
		e.tokens--
	}
	delay := time.Duration(0)
	if rp.Backoff > 0 {
		delay = seconds(e.cli.Float64() * rp.Backoff.Seconds() * math.Pow(2, float64(r.Attempt)))
	}
	at := e.now + delay
	if at >= e.cfg.Duration {
		return
	}
	next := &Request{ID: r.ID, Attempt: r.Attempt + 1, Class: r.Class, Key: r.Key, Cost: r.Cost, Optional: r.Optional, first: r.first, dep: r.dep}
	e.schedule(at, evRetry, next)
}

func (e *engine) tick() {
	now := e.vt(e.now)
	snap := e.rec.Snapshot(now)
	snap.Tallies, snap.Work = e.tallies[e.cur], e.work[e.cur]
	e.cur ^= 1
	for i := range e.tallies[e.cur] {
		t := &e.tallies[e.cur][i]
		t.On, t.Off = signals.Moments{}, signals.Moments{}
	}
	e.work[e.cur] = signals.Moments{}
	e.dim = e.cfg.Dimmer.Step(now, snap)
	e.dim.Level = min(max(e.dim.Level, 0), 1)
	if e.partLevel != nil {
		e.resolveLevels()
	}
	if next := e.now + e.cfg.Tick; next < e.cfg.Duration {
		e.schedule(next, evTick, nil)
	}
}

func (e *engine) result() Result {
	for i := range e.secs {
		s := &e.secs[i]
		if !s.seen && i > 0 { // a quiet second keeps the state of the one before
			prev := e.secs[i-1]
			s.InSystem, s.Level, s.Shed, s.Limit = prev.InSystem, prev.Level, prev.Shed, prev.Limit
			s.Levels = prev.Levels
		}
		if len(s.lat) > 0 {
			slices.Sort(s.lat)
			s.P99 = s.lat[int(math.Ceil(0.99*float64(len(s.lat))))-1]
			s.Optional = float64(s.optGood) / float64(len(s.lat))
			s.OptionalShare = s.optWork / float64(len(s.lat))
		}
		if s.sojN > 0 {
			s.Sojourn = s.sojSum / time.Duration(s.sojN)
		}
	}
	sum := e.sum
	sum.Duration = e.cfg.Duration
	sum.GoodPerSec = float64(sum.Good) / e.cfg.Duration.Seconds()
	if len(e.goodLat) > 0 {
		slices.Sort(e.goodLat)
		sum.P99 = e.goodLat[int(math.Ceil(0.99*float64(len(e.goodLat))))-1]
	}
	crit, critOK, decided, inTime, opt, optWork := 0, 0, 0, 0, 0, 0.0
	for _, u := range e.users {
		if u.first+e.cfg.Client.Timeout > e.cfg.Duration {
			continue // its answer was still due when the run ended
		}
		decided++
		s := e.secAt(u.first)
		s.Users++
		if u.ok {
			inTime++
			s.UsersInTime++
		}
		if u.class == signals.Critical {
			crit++
			s.CriticalUsers++
			if u.ok {
				critOK++
				s.CriticalInTime++
			}
		}
	}
	if decided > 0 {
		sum.InTime = float64(inTime) / float64(decided)
	}
	if crit > 0 {
		sum.CriticalOK = float64(critOK) / float64(crit)
	}
	for _, s := range e.secs {
		opt += s.optGood
		optWork += s.optWork
	}
	if sum.Good > 0 {
		sum.OptionalServed = float64(opt) / float64(sum.Good)
		sum.OptionalShare = optWork / float64(sum.Good)
	}
	sum.InSystem = e.inSys
	if e.cfg.RecoverFrom > 0 {
		r := recovery(e.secs, int(e.cfg.RecoverFrom/time.Second))
		sum.Recovery = &r
	}
	return Result{Seconds: e.secs, Summary: sum}
}

// Window is a stretch of a run in one line: see Result.Between.
type Window struct {
	Good     int     `json:"good"`
	InTime   float64 `json:"in_time"`  // of the users who arrived in the window
	Optional float64 `json:"optional"` // share of good answers with optional parts
	// OptionalShare is the share of the optional work the good answers
	// got, weighted by the parts' true costs (only with Config.Parts).
	OptionalShare float64       `json:"optional_share,omitempty"`
	P99           time.Duration `json:"p99_ns"` // of the good answers that finished in the window
}

// Between summarizes seconds [from, to) of the run, as Summary does the
// whole run: the lab judges a controller after its first minute.
func (r Result) Between(from, to int) Window {
	var w Window
	users, inTime, opt, optWork := 0, 0, 0, 0.0
	for _, s := range r.span(from, to) {
		w.Good += len(s.lat)
		opt += s.optGood
		optWork += s.optWork
		users += s.Users
		inTime += s.UsersInTime
	}
	if users > 0 {
		w.InTime = float64(inTime) / float64(users)
	}
	if w.Good > 0 {
		w.Optional = float64(opt) / float64(w.Good)
		w.OptionalShare = optWork / float64(w.Good)
	}
	w.P99, _ = r.P99Between(from, to)
	return w
}

// span returns seconds [from, to) of the run, clamped to it (empty when
// the range lies outside).
func (r Result) span(from, to int) []Second {
	n := len(r.Seconds)
	from, to = min(max(from, 0), n), min(max(to, 0), n)
	if to < from {
		return nil
	}
	return r.Seconds[from:to]
}

// P99Between returns the p99 latency of the good answers that finished in
// seconds [from, to) of the run, and false if there were none.
func (r Result) P99Between(from, to int) (time.Duration, bool) {
	var lat []time.Duration
	for _, s := range r.span(from, to) {
		lat = append(lat, s.lat...)
	}
	if len(lat) == 0 {
		return 0, false
	}
	slices.Sort(lat)
	return lat[int(math.Ceil(0.99*float64(len(lat))))-1], true
}

// recovery is the sources' measure: seconds after from until a 5 s stretch
// in which ≥ 95 % of attempts got a good answer; -1 if never.
func recovery(secs []Second, from int) time.Duration {
	for rec := from; rec < len(secs)-5; rec++ {
		att, ok := 0, 0
		for _, s := range secs[rec : rec+5] {
			att += s.Arrivals
			ok += s.GoodByArrival
		}
		if float64(ok) >= 0.95*float64(att) {
			return time.Duration(rec-from) * time.Second
		}
	}
	return -1
}

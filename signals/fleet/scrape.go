package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/brownout/brownout/signals"
)

// ScrapeConfig configures a ScrapeSource. Only Targets is required.
type ScrapeConfig struct {
	// Targets are the /metrics URLs of the instances (http or https).
	Targets []string
	// Client sends the scrapes. Default: a client with no overall timeout
	// (each scrape is bounded by Timeout).
	Client *http.Client
	// Timeout bounds one scrape. Default 2 s.
	Timeout time.Duration
	// Window is how far back deltas look: quantiles and rates describe the
	// last Window. Default 10 s.
	Window time.Duration
	// MaxBody bounds an exposition's size. Default DefaultMaxBody.
	MaxBody int64
}

// DefaultMaxBody bounds what a source reads from one answer (a scrape's
// exposition, a PromQL answer) by default: 16 MiB holds the exposition of
// an app with thousands of series, and a server that sends more is
// broken or hostile, not a source of signals.
const DefaultMaxBody = 16 << 20

// ScrapeSource reads the signals of a fleet from the instances' /metrics
// endpoints (the names signals.Collector exports), in the Prometheus text or
// protobuf format (protobuf is asked for first, so native histograms come
// through).
//
// Histograms are cumulative, so each Snapshot keeps the reads of the last
// Window per target and works from the difference between the newest and the
// one a Window ago: per-target deltas are summed over the fleet (a target
// whose counts went down restarted, and its new counts are its delta), and
// quantiles are computed from the summed buckets — native buckets when every
// target has them, else classic ones with linear interpolation, as PromQL's
// histogram_quantile. The first Snapshot has no history and reports only the
// gauges. PushSource computes its fleet with the same code (aggregate.go).
//
// A target that fails (timeout, non-2xx, unparsable body, a metric missing,
// of the wrong type or not finite) is left out of the metrics it could not
// give, and Snapshot's error names the target and the metric. A signal that
// no target gave is missing from the snapshot, never zero.
//
// A ScrapeSource must be made with NewScrapeSource. It is safe for
// concurrent use; Snapshots are serialized.
type ScrapeSource struct {
	cfg    ScrapeConfig
	client *http.Client

	mu struct {
		sync.Mutex
		history map[string]series // by target
		health  health
		targets map[string]signals.InstanceHealth
	}
}

// targetState is what one exposition (or one push, see pushwire.go) says.
type targetState struct {
	parsed              bool // the body was read and parsed
	latency, sojourn    hist
	hasLat, hasSoj      bool
	sojournMin          float64
	hasSojMin, standing bool
	inFlight            float64
	hasInFlight         bool
	gate                signals.GateReading
	hasGate             bool
	classes             [signals.NumClasses]signals.ClassCounts
	hasClasses          bool
	// tallies are the cumulative feature tallies (a push's features, an
	// exposition's brownout_feature_* counters), sorted by feature name.
	// PushSource keeps a push's apart from the readings.
	tallies []signals.Tally
	// work is the cumulative work of every tallied request
	// (Snapshot.Work: a push's work, an exposition's brownout_work_*
	// counters), kept apart as the tallies are; hasWork says the reading
	// carried it.
	work    signals.Moments
	hasWork bool
	// tallyBad: the exposition's tallies or work were dropped (a family
	// missing, unread or inconsistent): no interval begins or ends at
	// this reading, which would count a target's whole life in one.
	// tallyFams, while parsing, says which families gave each tally's on
	// and off (see tally).
	tallyBad  bool
	tallyFams []uint8
}

// NewScrapeSource checks cfg and returns a source.
func NewScrapeSource(cfg ScrapeConfig) (*ScrapeSource, error) {
	if len(cfg.Targets) == 0 {
		return nil, errors.New("fleet: scrape source: no targets")
	}
	for i, t := range cfg.Targets {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("fleet: scrape source: target %q is not an http(s) URL", truncate(t))
		}
		if slices.Contains(cfg.Targets[:i], t) {
			// (Scraped twice, its rates would count twice, its
			// intervals once.)
			return nil, fmt.Errorf("fleet: scrape source: target %q is listed twice", shownURL(truncate(t)))
		}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = 10 * time.Second
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	c := cfg.Client
	if c == nil {
		c = &http.Client{}
	}
	s := &ScrapeSource{cfg: cfg, client: c}
	s.mu.history = map[string]series{}
	s.mu.targets = map[string]signals.InstanceHealth{}
	return s, nil
}

// Name describes the source for messages.
// A target's password (http://user:password@host/…) is never shown.
func (s *ScrapeSource) Name() string {
	names := make([]string, len(s.cfg.Targets))
	for i, t := range s.cfg.Targets {
		names[i] = shownURL(t)
	}
	return "scrape(" + strings.Join(names, ",") + ")"
}

// shownURL is raw without its password, for names and messages that
// /v1/state shows to whoever reaches the daemon.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

// acceptHeader asks for delimited protobuf (native histograms), then text.
var acceptHeader = string(expfmt.NewFormat(expfmt.TypeProtoDelim)) + ";q=0.7," +
	string(expfmt.NewFormat(expfmt.TypeTextPlain)) + ";q=0.3"

// Snapshot scrapes every target and computes the fleet's signals at now.
// Its Tallies and Work sum, by feature, each target's increase of the
// exported brownout_feature_* and brownout_work_* counters between its
// last two scrapes — the same interval as Recent (as PushSource's between
// an instance's last two pushes); a target's first scrape gives none.
// Work is zero while a target exports tallies without it.
func (s *ScrapeSource) Snapshot(ctx context.Context, now time.Time) (signals.Snapshot, error) {
	type result struct {
		st  targetState
		err error
	}
	res := make([]result, len(s.cfg.Targets))
	var wg sync.WaitGroup
	for i, t := range s.cfg.Targets {
		wg.Go(func() {
			res[i].st, res[i].err = s.scrape(ctx, t)
		})
	}
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	snap := signals.Snapshot{Time: now, Window: s.cfg.Window, Source: s.Name()}
	f := aggregate{snap: &snap}
	var tallies map[string]*signals.Tally
	partial := false // a target's tallies are summed without its work
	for i, t := range s.cfg.Targets {
		r := res[i]
		th := s.mu.targets[t]
		th.Name, th.OK, th.LastError = shownURL(t), r.err == nil, ""
		if r.err != nil {
			f.errs = append(f.errs, r.err)
			th.LastError = r.err.Error()
		}
		if r.st.parsed {
			th.LastSeen = now
			h := s.mu.history[t]
			h.add(reading{at: now, st: r.st}, s.cfg.Window)
			s.mu.history[t] = h
			f.add("scrape "+shownURL(t), h)
			if prev, last := h[max(len(h)-2, 0)], h[len(h)-1]; len(h) >= 2 && elapsed(prev, last) > 0 {
				if prev.st.tallyBad || last.st.tallyBad {
					// (No base, or no end, for this target's
					// interval: the others' work alone would read a
					// feature's share too high.)
					partial = true
				} else {
					var w signals.Moments
					var hasWork bool
					tallies, w, hasWork = addIntervalTallies(tallies, prev.st, last.st)
					snap.Work.Merge(w)
					partial = partial || !hasWork && len(last.st.tallies) > 0
				}
			}
		}
		s.mu.targets[t] = th
	}
	f.finish()
	snap.Tallies = sortedTallies(tallies)
	if partial {
		// (As PushSource's: a work without some of the tallied requests
		// would read a feature's share of it too high.)
		snap.Work = signals.Moments{}
	}
	err := errors.Join(f.errs...)
	s.mu.health.record(now, err)
	return snap, err
}

// addIntervalTallies adds one target's tallies over the interval between
// two of its readings, prev and last, into sum (see addTallyDelta), and
// returns sum and the interval's work, with whether both readings had it.
// A target that restarted in between (a class count went down, as the
// fleet computation reads it) counts its new tallies whole.
func addIntervalTallies(sum map[string]*signals.Tally, prev, last targetState) (map[string]*signals.Tally, signals.Moments, bool) {
	base, work := prev.tallies, prev.work
	if last.hasClasses && prev.hasClasses {
		for c := range last.classes {
			if !covers(last.classes[c], prev.classes[c]) {
				base, work = nil, signals.Moments{}
				break
			}
		}
	}
	sum = addTallyDelta(sum, last.tallies, base)
	if !last.hasWork || !prev.hasWork {
		return sum, signals.Moments{}, false
	}
	return sum, momentsDelta(last.work, work), true
}

// Health reports the last Snapshot: OK when it had no error, and each
// target's last scrape.
func (s *ScrapeSource) Health() signals.SourceHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.mu.health.report(s.Name())
	for _, t := range s.cfg.Targets {
		if th, ok := s.mu.targets[t]; ok {
			h.Instances = append(h.Instances, th)
		} else {
			h.Instances = append(h.Instances, signals.InstanceHealth{Name: shownURL(t)})
		}
	}
	return h
}

// scrape fetches and parses one target.
func (s *ScrapeSource) scrape(ctx context.Context, target string) (targetState, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	shown := shownURL(target)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return targetState{}, fmt.Errorf("fleet: scrape %s: %w", shown, err)
	}
	req.Header.Set("Accept", acceptHeader)
	resp, err := s.client.Do(req)
	if err != nil {
		return targetState{}, fmt.Errorf("fleet: scrape %s: all metrics: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return targetState{}, fmt.Errorf("fleet: scrape %s: all metrics: HTTP %s", shown, resp.Status)
	}
	body := io.LimitReader(resp.Body, s.cfg.MaxBody+1)
	st, err := parseExposition(&countingReader{r: body, limit: s.cfg.MaxBody, what: "exposition"}, expfmt.ResponseFormat(resp.Header), s.cfg.MaxBody)
	if err != nil {
		return st, fmt.Errorf("fleet: scrape %s: %w", shown, err)
	}
	return st, nil
}

type protoDecoder struct {
	r   *bufio.Reader
	max int64
}

func (d *protoDecoder) Decode(mf *dto.MetricFamily) error {
	return protodelim.UnmarshalOptions{MaxSize: d.max}.UnmarshalFrom(d.r, mf)
}

// countingReader fails a read that takes its total past limit, naming
// what it reads.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	what  string
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		return n, fmt.Errorf("%s larger than %d bytes", c.what, c.limit)
	}
	return n, err
}

// parseExposition reads the brownout_ families of one exposition. Families
// that are missing or malformed are reported in the returned error (joined,
// each naming its metric); the others are still returned. No message may
// claim more than maxMsg bytes.
func parseExposition(r io.Reader, format expfmt.Format, maxMsg int64) (targetState, error) {
	var st targetState
	var errs []error
	seen := map[string]bool{}
	read := map[string]bool{} // by family: read whole (false: with an error)
	var dec expfmt.Decoder
	if format.FormatType() == expfmt.TypeProtoDelim {
		// expfmt's protobuf decoder trusts each message's length prefix
		// and allocates it up front: a hostile target could ask for
		// terabytes. Ours caps it.
		dec = &protoDecoder{r: bufio.NewReader(r), max: min(maxMsg, 1<<30)}
	} else {
		dec = expfmt.NewDecoder(r, format)
	}
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("all metrics: parse: %w", err))
			// A failed parse leaves nothing trustworthy.
			return targetState{}, errors.Join(errs...)
		}
		name := mf.GetName()
		seen[name] = true
		if err := st.read(&mf); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			read[name] = false
		} else if _, again := read[name]; !again {
			read[name] = true
		}
	}
	if err := st.checkTallies(read); err != nil {
		errs = append(errs, err)
	}
	st.parsed = true
	if !seen[signals.MetricLatency] {
		errs = append(errs, fmt.Errorf("%s: metric missing", signals.MetricLatency))
	}
	return st, errors.Join(errs...)
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// read takes one family into st.
func (st *targetState) read(mf *dto.MetricFamily) error {
	wantType := func(t dto.MetricType) error {
		if mf.GetType() != t {
			return fmt.Errorf("is a %s, want a %s", strings.ToLower(mf.GetType().String()), strings.ToLower(t.String()))
		}
		return nil
	}
	switch name := mf.GetName(); name {
	case signals.MetricLatency, signals.MetricSojourn:
		if err := wantType(dto.MetricType_HISTOGRAM); err != nil {
			return err
		}
		var sum hist
		for _, m := range mf.GetMetric() {
			h, err := histFromDTO(m.GetHistogram())
			if err != nil {
				return err
			}
			if err := sum.add(h); err != nil {
				return err
			}
		}
		if name == signals.MetricLatency {
			st.latency, st.hasLat = sum, len(mf.GetMetric()) > 0
		} else {
			st.sojourn, st.hasSoj = sum, len(mf.GetMetric()) > 0
		}
	case signals.MetricSojournMin, signals.MetricStanding, signals.MetricInFlight, signals.MetricGateLimit, signals.MetricGateInFlight, signals.MetricGateQueued:
		if err := wantType(dto.MetricType_GAUGE); err != nil {
			return err
		}
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue()
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("value %v: %w", v, errValue)
			}
			switch name {
			case signals.MetricSojournMin:
				st.sojournMin, st.hasSojMin = max(st.sojournMin, v), true
			case signals.MetricStanding:
				st.standing = st.standing || v > 0
			case signals.MetricInFlight:
				st.inFlight += v
				st.hasInFlight = true
			case signals.MetricGateLimit:
				st.gate.Limit, st.hasGate = st.gate.Limit+v, true
			case signals.MetricGateInFlight:
				st.gate.InFlight += v
			case signals.MetricGateQueued:
				st.gate.Queued += int(v)
			}
		}
	case signals.MetricFeatureRequests, signals.MetricFeatureServiceSum, signals.MetricFeatureServiceSquares:
		if err := wantType(dto.MetricType_COUNTER); err != nil {
			return err
		}
		for _, m := range mf.GetMetric() {
			v, err := tallyCount(m)
			if err != nil {
				return err
			}
			feature, state := labelOf(m, "feature"), labelOf(m, "state")
			if err := signals.CheckFeature(feature); err != nil {
				return fmt.Errorf("feature %q: %s", truncate(feature), strings.TrimPrefix(err.Error(), "signals: "))
			}
			i, err := st.tally(feature)
			if err != nil {
				return err
			}
			t, fams := &st.tallies[i], &st.tallyFams[i]
			var into *signals.Moments
			var shift uint8
			switch state {
			case "on":
				into = &t.On
			case "off":
				into, shift = &t.Off, famOff
			case "unattributed":
				if name == signals.MetricFeatureRequests {
					t.Unattributed += int64(v)
				}
				continue
			default:
				continue // a state this version does not know
			}
			switch name {
			case signals.MetricFeatureRequests:
				into.N += int64(v)
				*fams |= famRequests << shift
			case signals.MetricFeatureServiceSum:
				into.Sum += v
				*fams |= famSum << shift
			default:
				into.SumSq += v
				*fams |= famSquares << shift
			}
		}
	case signals.MetricWorkRequests, signals.MetricWorkSum, signals.MetricWorkSquares:
		if err := wantType(dto.MetricType_COUNTER); err != nil {
			return err
		}
		for _, m := range mf.GetMetric() {
			v, err := tallyCount(m)
			if err != nil {
				return err
			}
			switch name {
			case signals.MetricWorkRequests:
				st.work.N += int64(v)
				st.hasWork = true
			case signals.MetricWorkSum:
				st.work.Sum += v
			default:
				st.work.SumSq += v
			}
		}
	case signals.MetricArrived, signals.MetricCompleted, signals.MetricFailed, signals.MetricGood, signals.MetricRejected, signals.MetricWaited:
		if err := wantType(dto.MetricType_COUNTER); err != nil {
			return err
		}
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			if !finiteNonNeg(v) {
				return fmt.Errorf("value %v: %w", v, errValue)
			}
			c, err := signals.ParseClass(labelOf(m, "class"))
			if err != nil {
				continue // a class this version does not know
			}
			cc := &st.classes[c]
			n := uint64(v)
			switch name {
			case signals.MetricArrived:
				cc.Arrived += n
			case signals.MetricCompleted:
				cc.Completed += n
			case signals.MetricFailed:
				cc.Failed += n
			case signals.MetricGood:
				cc.Good += n
			case signals.MetricWaited:
				cc.Waited += n
			case signals.MetricRejected:
				if r, ok := reasonNamed(labelOf(m, "reason")); ok {
					cc.Rejected[r] += n
				}
			}
			st.hasClasses = true
		}
	}
	return nil
}

// tally returns the index of st's tally of feature, added (in name
// order) if new: at most signals.MaxFeatures, as a Recorder tallies.
func (st *targetState) tally(feature string) (int, error) {
	i, found := slices.BinarySearchFunc(st.tallies, feature, func(t signals.Tally, f string) int { return strings.Compare(t.Feature, f) })
	if !found {
		if len(st.tallies) >= signals.MaxFeatures {
			return 0, fmt.Errorf("feature %q: more than %d features: a Recorder tallies at most %d", truncate(feature), signals.MaxFeatures, signals.MaxFeatures)
		}
		st.tallies = slices.Insert(st.tallies, i, signals.Tally{Feature: feature})
		st.tallyFams = slices.Insert(st.tallyFams, i, 0)
	}
	return i, nil
}

// The families a tally's state came from, as bits of targetState.tallyFams:
// the requests, their service time and its squares, for on (the low three
// bits) and off (the next three).
const (
	famRequests uint8 = 1 << iota
	famSum
	famSquares
	famAll = famRequests | famSum | famSquares
	famOff = 3 // the shift of off's bits
)

// checkTallies drops an exposition's tallies unless their three families
// were each read whole (read: by family, true when read without an
// error), and none has a time without a request (a sum with no request,
// as a push with one is refused): a count whose time is missing would read
// as a request that took none. The same for the work.
func (st *targetState) checkTallies(read map[string]bool) error {
	bad := func(m signals.Moments) bool { return m.N == 0 && (m.Sum > 0 || m.SumSq > 0) }
	all := func(names ...string) bool {
		for _, n := range names {
			if !read[n] {
				return false
			}
		}
		return true
	}
	var errs []error
	if len(st.tallies) > 0 {
		ok := all(signals.MetricFeatureRequests, signals.MetricFeatureServiceSum, signals.MetricFeatureServiceSquares)
		if !ok {
			errs = append(errs, fmt.Errorf("%s, %s, %s: one missing or unread: the tallies are left out", signals.MetricFeatureRequests, signals.MetricFeatureServiceSum, signals.MetricFeatureServiceSquares))
		}
		for i, t := range st.tallies {
			if !ok {
				break
			}
			f := st.tallyFams[i]
			switch {
			case bad(t.On) || bad(t.Off):
				ok = false
				errs = append(errs, fmt.Errorf("%s: feature %q: service time with no request: the tallies are left out", signals.MetricFeatureRequests, t.Feature))
			case f&famAll != 0 && f&famAll != famAll, f>>famOff != 0 && f>>famOff != famAll:
				// (A count without its time would read as requests
				// that took none.)
				ok = false
				errs = append(errs, fmt.Errorf("%s: feature %q: a state missing from one of the three families: the tallies are left out", signals.MetricFeatureRequests, t.Feature))
			}
		}
		if !ok {
			st.tallies, st.work, st.hasWork, st.tallyBad = nil, signals.Moments{}, false, true
		}
	}
	st.tallyFams = nil
	if (st.hasWork || st.work != signals.Moments{}) && (bad(st.work) || !all(signals.MetricWorkRequests, signals.MetricWorkSum, signals.MetricWorkSquares)) {
		st.work, st.hasWork, st.tallyBad = signals.Moments{}, false, true
		errs = append(errs, fmt.Errorf("%s, %s, %s: one missing, unread, or a time with no request: the work is left out", signals.MetricWorkRequests, signals.MetricWorkSum, signals.MetricWorkSquares))
	}
	return errors.Join(errs...)
}

// tallyCount is a tally counter's value: finite, non-negative, and at most
// maxCount, that its count converts to an int64 exactly.
func tallyCount(m *dto.Metric) (float64, error) {
	v := m.GetCounter().GetValue()
	if !finiteNonNeg(v) || v > maxCount {
		return 0, fmt.Errorf("value %v: %w", v, errValue)
	}
	return v, nil
}

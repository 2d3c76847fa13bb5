package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// LevelSuffix turns a feature name into the key of its level flag:
// "recommendations.level".
const LevelSuffix = ".level"

// FeaturesFlag is the object flag that answers every feature at once:
// {"recommendations": true, "reviews": false, …} for this user.
const FeaturesFlag = "brownout.features"

// CheckFeatureName says what is wrong with name as a feature's name, the
// rule brownoutd's configuration applies (check-config): one flag key,
// with one meaning over OFREP's URLs and keys — not empty; no space, tab,
// '/', '\', '?', '#' or '%' (a key in a URL's path); not ending in
// LevelSuffix (the key of another feature's level flag); not
// FeaturesFlag. dimmer.Config checks the rest (its length, UTF-8, no
// control character).
func CheckFeatureName(name string) error {
	switch {
	case name == "":
		return errors.New("a feature needs a name")
	case strings.ContainsAny(name, " \t/\\?#%") || strings.HasSuffix(name, LevelSuffix) || name == FeaturesFlag:
		return fmt.Errorf("%q: a flag key (no spaces, /, ?, #, %%; not ending in %s; not %s)", name, LevelSuffix, FeaturesFlag)
	}
	return nil
}

// Source is what a provider evaluates against: a *dimmer.Controller in the
// same process, or a follower of brownoutd.
type Source interface {
	// State returns the current state; it must be cheap (an atomic load).
	State() *dimmer.State
	// Subscribe delivers the newest state after each change, coalesced.
	Subscribe() (<-chan *dimmer.State, func())
}

var _ Source = (*dimmer.Controller)(nil)

// Options configure a Provider. The zero value is usable.
type Options struct {
	// Name is the provider's metadata name. Default "brownout".
	Name string
	// SegmentAttribute is the evaluation-context attribute that names the
	// user's segment (dimmer.Segment). Default "segment".
	SegmentAttribute string
	// RequireTargetingKey makes an evaluation without a targeting key fail
	// with TARGETING_KEY_MISSING. By default it gets a random draw
	// instead: on with probability level, reason SPLIT, metadata
	// sticky=false.
	RequireTargetingKey bool
	// Registerer, when set, receives brownout_flag_evaluations_total.
	Registerer prometheus.Registerer
	// Recorder, when set, counts the boolean evaluations of its
	// registered features (signals.Recorder.Features) whose context
	// carries no request's tally as unattributed
	// (signals.Recorder.Unattributed). Evaluations whose context carries
	// one are marked in it (signals.Evaluated) with or without it. Give
	// the Recorder the middleware records into.
	Recorder *signals.Recorder
}

// Provider is an OpenFeature provider that answers from the brownout
// controller's levels. See the package documentation for the flags it
// serves.
//
// A Provider must be made with New. It is safe for concurrent use.
type Provider struct {
	src    Source
	name   string
	segKey string
	strict bool
	rec    *signals.Recorder

	events chan openfeature.Event
	meta   atomic.Pointer[metaCache]
	counts atomic.Pointer[map[string]*flagCounts]

	countsMu sync.Mutex // serializes growing counts
	metaMu   sync.Mutex // serializes making meta's cache for a new state

	mu struct {
		sync.Mutex
		cancel context.CancelFunc
		done   chan struct{}
	}
}

var (
	_ openfeature.FeatureProvider = (*Provider)(nil)
	_ openfeature.StateHandler    = (*Provider)(nil)
	_ openfeature.EventHandler    = (*Provider)(nil)
)

// New returns a provider reading src.
func New(src Source, o Options) (*Provider, error) {
	p := &Provider{src: src, name: o.Name, segKey: o.SegmentAttribute, strict: o.RequireTargetingKey,
		rec: o.Recorder, events: make(chan openfeature.Event, 16)}
	if p.name == "" {
		p.name = "brownout"
	}
	if p.segKey == "" {
		p.segKey = "segment"
	}
	m := map[string]*flagCounts{}
	p.counts.Store(&m)
	if o.Registerer != nil {
		if err := o.Registerer.Register(collector{p}); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Metadata implements openfeature.FeatureProvider.
func (p *Provider) Metadata() openfeature.Metadata { return openfeature.Metadata{Name: p.name} }

// Hooks implements openfeature.FeatureProvider.
func (p *Provider) Hooks() []openfeature.Hook { return nil }

// BooleanEvaluation answers "<feature>": on for this user or not. When
// ctx carries a request's feature tally (signals.RequestTally, which the
// middlewares of packages signals and shed put there), the answer is
// marked in it: the request's service time will count as the feature's
// on or off. Without one, the evaluation counts as unattributed when
// Options.Recorder is set. An evaluation that fails marks nothing.
func (p *Provider) BooleanEvaluation(ctx context.Context, flag string, def bool, fc openfeature.FlattenedContext) openfeature.BoolResolutionDetail {
	st := p.src.State()
	f, ok := st.FeatureIndex(flag)
	if !ok {
		return openfeature.BoolResolutionDetail{Value: def, ProviderResolutionDetail: p.notFound(st, flag, "a boolean")}
	}
	seg, level := p.segment(st, f, fc)
	key, _ := fc[openfeature.TargetingKey].(string)
	sticky := key != ""
	var on bool
	switch {
	case sticky:
		on = On(flag, key, level)
	case p.strict:
		return openfeature.BoolResolutionDetail{Value: def, ProviderResolutionDetail: openfeature.ProviderResolutionDetail{
			ResolutionError: openfeature.NewTargetingKeyMissingResolutionError("brownout: " + flag + " is split per user: set a targeting key"),
			Reason:          openfeature.ErrorReason,
		}}
	default:
		on = rand.Float64() < level
	}
	p.tally(ctx, flag, on)
	c := p.flagCounts(flag)
	variant := "off"
	if on {
		variant = "on"
		c.on.Inc()
	} else {
		c.off.Inc()
	}
	return openfeature.BoolResolutionDetail{Value: on, ProviderResolutionDetail: openfeature.ProviderResolutionDetail{
		Reason: openfeature.SplitReason, Variant: variant, FlagMetadata: p.metadata(st, f, seg, sticky),
	}}
}

// FloatEvaluation answers "<feature>.level": the share of users who get
// the feature (for this user's segment).
func (p *Provider) FloatEvaluation(_ context.Context, flag string, def float64, fc openfeature.FlattenedContext) openfeature.FloatResolutionDetail {
	st := p.src.State()
	name, isLevel := strings.CutSuffix(flag, LevelSuffix)
	f, ok := st.FeatureIndex(name)
	if !isLevel || !ok {
		return openfeature.FloatResolutionDetail{Value: def, ProviderResolutionDetail: p.notFound(st, flag, "a float")}
	}
	seg, level := p.segment(st, f, fc)
	p.flagCounts(name).level.Inc()
	return openfeature.FloatResolutionDetail{Value: level, ProviderResolutionDetail: openfeature.ProviderResolutionDetail{
		Reason: openfeature.TargetingMatchReason, Variant: "level", FlagMetadata: p.metadata(st, f, seg, true),
	}}
}

// StringEvaluation implements openfeature.FeatureProvider; brownout serves
// no string flags.
func (p *Provider) StringEvaluation(_ context.Context, flag string, def string, _ openfeature.FlattenedContext) openfeature.StringResolutionDetail {
	return openfeature.StringResolutionDetail{Value: def, ProviderResolutionDetail: p.notFound(p.src.State(), flag, "a string")}
}

// IntEvaluation implements openfeature.FeatureProvider; brownout serves no
// integer flags.
func (p *Provider) IntEvaluation(_ context.Context, flag string, def int64, _ openfeature.FlattenedContext) openfeature.IntResolutionDetail {
	return openfeature.IntResolutionDetail{Value: def, ProviderResolutionDetail: p.notFound(p.src.State(), flag, "an integer")}
}

// ObjectEvaluation answers FeaturesFlag: every feature's boolean answer
// for this user at once, as a map[string]any of feature name to bool —
// one SDK evaluation where a page would make one per feature. Each
// feature's answer is the one its boolean flag gives (same bucket, same
// segment, same counters, same tally marks). Other keys are not object
// flags.
func (p *Provider) ObjectEvaluation(ctx context.Context, flag string, def any, fc openfeature.FlattenedContext) openfeature.InterfaceResolutionDetail {
	st := p.src.State()
	if flag != FeaturesFlag {
		return openfeature.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: p.notFound(st, flag, "an object")}
	}
	key, _ := fc[openfeature.TargetingKey].(string)
	sticky := key != ""
	if !sticky && p.strict {
		return openfeature.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: openfeature.ProviderResolutionDetail{
			ResolutionError: openfeature.NewTargetingKeyMissingResolutionError("brownout: " + flag + " is split per user: set a targeting key"),
			Reason:          openfeature.ErrorReason,
		}}
	}
	out := make(map[string]any, st.NumFeatures())
	for i := range st.NumFeatures() {
		name := st.FeatureName(i)
		_, level := p.segment(st, i, fc)
		var on bool
		if sticky {
			on = On(name, key, level)
		} else {
			on = rand.Float64() < level
		}
		p.tally(ctx, name, on)
		c := p.flagCounts(name)
		if on {
			c.on.Inc()
		} else {
			c.off.Inc()
		}
		out[name] = on
	}
	return openfeature.InterfaceResolutionDetail{Value: out, ProviderResolutionDetail: openfeature.ProviderResolutionDetail{
		Reason: openfeature.SplitReason, Variant: "split", FlagMetadata: p.allMetadata(st, sticky),
	}}
}

// tally marks feature's answer in the request's tally that ctx carries,
// or counts it as unattributed: never as off.
func (p *Provider) tally(ctx context.Context, feature string, on bool) {
	if !signals.Evaluated(ctx, feature, on) && p.rec != nil {
		p.rec.Unattributed(feature)
	}
}

// notFound tells an unknown key (FLAG_NOT_FOUND) from a known key asked as
// the wrong type (TYPE_MISMATCH).
func (p *Provider) notFound(st *dimmer.State, flag, asked string) openfeature.ProviderResolutionDetail {
	name, isLevel := strings.CutSuffix(flag, LevelSuffix)
	if _, ok := st.Feature(name); ok || flag == FeaturesFlag {
		want := "a boolean"
		switch {
		case flag == FeaturesFlag:
			want = "an object"
		case isLevel:
			want = "a float"
		}
		return openfeature.ProviderResolutionDetail{
			ResolutionError: openfeature.NewTypeMismatchResolutionError("brownout: " + flag + " is " + want + ", asked as " + asked),
			Reason:          openfeature.ErrorReason,
		}
	}
	return openfeature.ProviderResolutionDetail{
		ResolutionError: openfeature.NewFlagNotFoundResolutionError("brownout: no feature " + flag),
		Reason:          openfeature.ErrorReason,
	}
}

// segment returns the index of the user's segment (−1 for none) and
// feature i's level for it. It reads the state's private copy (LevelAt),
// never the exported fields a caller could have changed.
func (p *Provider) segment(st *dimmer.State, i int, fc openfeature.FlattenedContext) (int, float64) {
	if name, ok := fc[p.segKey].(string); ok && name != "" {
		if j, ok := st.SegmentIndex(name); ok {
			return j, st.LevelAt(i, j)
		}
	}
	return -1, st.LevelAt(i, -1)
}

// EventChannel implements openfeature.EventHandler. It returns the same
// channel on every call.
func (p *Provider) EventChannel() <-chan openfeature.Event { return p.events }

// Init implements openfeature.StateHandler: it starts following the
// source's changes. The provider is ready at once (the source always has a
// state); it reports PROVIDER_STALE while the controller's signals are.
func (p *Provider) Init(openfeature.EvaluationContext) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.cancel, p.mu.done = cancel, make(chan struct{})
	// Subscribe and take the baseline here, not in the goroutine: a change
	// made right after Init returns must be announced.
	ch, unsubscribe := p.src.Subscribe()
	go p.follow(ctx, p.src.State(), ch, unsubscribe, p.mu.done)
	return nil
}

// Shutdown implements openfeature.StateHandler.
func (p *Provider) Shutdown() {
	p.mu.Lock()
	cancel, done := p.mu.cancel, p.mu.done
	p.mu.cancel, p.mu.done = nil, nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// follow turns state changes into provider events. It is the only sender
// on p.events; a slow reader delays it, never the controller (the
// subscription keeps only the newest state).
func (p *Provider) follow(ctx context.Context, last *dimmer.State, ch <-chan *dimmer.State, unsubscribe func(), done chan struct{}) {
	defer close(done)
	defer unsubscribe()
	stale := last.StateMode() == dimmer.Stale
	if stale && !p.emit(ctx, openfeature.ProviderStale, "signals stale: "+last.Why(), nil) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case st := <-ch:
			if st.Seq() <= last.Seq() {
				continue
			}
			if now := st.StateMode() == dimmer.Stale; now != stale {
				stale = now
				kind, msg := openfeature.ProviderReady, "signals back: "+st.Why()
				if stale {
					kind, msg = openfeature.ProviderStale, "signals stale: "+st.Why()
				}
				if !p.emit(ctx, kind, msg, nil) {
					return
				}
			}
			if changed := changedFlags(last, st); len(changed) > 0 {
				if !p.emit(ctx, openfeature.ProviderConfigChange, st.Why(), changed) {
					return
				}
			}
			last = st
		}
	}
}

func (p *Provider) emit(ctx context.Context, kind openfeature.EventType, msg string, flags []string) bool {
	ev := openfeature.Event{ProviderName: p.name, EventType: kind,
		ProviderEventDetails: openfeature.ProviderEventDetails{Message: msg, FlagChanges: flags}}
	select {
	case p.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// changedFlags lists the flag keys whose answers may differ between a and
// b: a feature's boolean and level flags when its level, segment levels,
// mode or pin changed.
func changedFlags(a, b *dimmer.State) []string {
	var out []string
	for i := range b.NumFeatures() {
		name := b.FeatureName(i)
		if k, ok := a.FeatureIndex(name); ok && sameFeature(a, k, b, i) {
			continue
		}
		out = append(out, name, name+LevelSuffix)
	}
	return out
}

// sameFeature reports whether feature k of a and feature i of b answer
// alike: level, segment levels, mode and pin.
func sameFeature(a *dimmer.State, k int, b *dimmer.State, i int) bool {
	_, pa := a.PinReason(k)
	_, pb := b.PinReason(i)
	if a.FeatureMode(k) != b.FeatureMode(i) || pa != pb || a.LevelAt(k, -1) != b.LevelAt(i, -1) {
		return false
	}
	for j := range b.NumSegments() {
		if a.LevelAt(k, j) != b.LevelAt(i, j) {
			return false
		}
	}
	return true
}

// metaCache holds the flag metadata of one state generation, shared by
// every evaluation of that generation, so that evaluating does not
// allocate. It is made once per state (under Provider.metaMu, never by
// each racing evaluation), and each entry is built on first use: a state
// holds up to dimmer.MaxFeatures × (dimmer.MaxSegments+1) × 2 of them, and
// a page asks for a few. The maps are read-only: callers must not change
// them (the SDK copies them before handing them to applications).
type metaCache struct {
	st   *dimmer.State
	nseg int
	// by feature × (segment+1) (0: no segment), then sticky (0 false, 1 true)
	md []atomic.Pointer[[2]openfeature.FlagMetadata]
	// FeaturesFlag's, by sticky
	all [2]openfeature.FlagMetadata
}

// cache returns st's metadata cache, making it if st is new.
func (p *Provider) cache(st *dimmer.State) *metaCache {
	if c := p.meta.Load(); c != nil && c.st == st {
		return c
	}
	p.metaMu.Lock()
	defer p.metaMu.Unlock()
	if c := p.meta.Load(); c != nil && c.st == st {
		return c
	}
	c := &metaCache{st: st, nseg: st.NumSegments(),
		md: make([]atomic.Pointer[[2]openfeature.FlagMetadata], st.NumFeatures()*(st.NumSegments()+1))}
	for s, sticky := range [2]bool{false, true} {
		c.all[s] = openfeature.FlagMetadata{"generation": int64(st.Seq()), "reason": st.Why(), "sticky": sticky}
	}
	// An evaluation of an older state (read before this one was
	// published) makes its own and does not replace the newer one.
	if old := p.meta.Load(); old == nil || old.st.Seq() <= st.Seq() {
		p.meta.Store(c)
	}
	return c
}

func (p *Provider) allMetadata(st *dimmer.State, sticky bool) openfeature.FlagMetadata {
	c := p.cache(st)
	if sticky {
		return c.all[1]
	}
	return c.all[0]
}

func (p *Provider) metadata(st *dimmer.State, i, seg int, sticky bool) openfeature.FlagMetadata {
	c := p.cache(st)
	slot := &c.md[i*(c.nseg+1)+seg+1]
	e := slot.Load()
	if e == nil {
		e = buildMeta(st, i, seg)
		if !slot.CompareAndSwap(nil, e) {
			e = slot.Load() // a racing evaluation built the same
		}
	}
	if sticky {
		return e[1]
	}
	return e[0]
}

// buildMeta makes feature i's metadata for segment seg (−1: none), not
// sticky and sticky.
func buildMeta(st *dimmer.State, i, seg int) *[2]openfeature.FlagMetadata {
	var out [2]openfeature.FlagMetadata
	for s, sticky := range [2]bool{false, true} {
		md := openfeature.FlagMetadata{
			"level":      st.LevelAt(i, seg),
			"generation": int64(st.Seq()),
			"mode":       st.FeatureMode(i).String(),
			"reason":     st.Why(),
			"sticky":     sticky,
		}
		if why, pinned := st.PinReason(i); pinned {
			md["reason"] = why
		} else if why, capped := st.CapReason(i); capped {
			md["reason"] = why // the scheduled cap's, as a pin's
		}
		if seg >= 0 {
			md["segment"] = st.SegmentName(seg)
		}
		out[s] = md
	}
	return &out
}

// flagCounts are the evaluation counters of one feature.
type flagCounts struct{ on, off, level *signals.Counter }

func (p *Provider) flagCounts(name string) *flagCounts {
	if c, ok := (*p.counts.Load())[name]; ok {
		return c
	}
	p.countsMu.Lock()
	defer p.countsMu.Unlock()
	m := *p.counts.Load()
	if c, ok := m[name]; ok {
		return c
	}
	c := &flagCounts{signals.NewCounter(), signals.NewCounter(), signals.NewCounter()}
	next := make(map[string]*flagCounts, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[name] = c
	p.counts.Store(&next)
	return c
}

// Evaluations returns how many times each flag was evaluated, by variant
// ("on", "off" for the boolean flags, "level" for the level flags).
func (p *Provider) Evaluations() map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for name, c := range *p.counts.Load() {
		out[name] = map[string]uint64{"on": c.on.Load(), "off": c.off.Load()}
		out[name+LevelSuffix] = map[string]uint64{"level": c.level.Load()}
	}
	return out
}

var evalDesc = prometheus.NewDesc("brownout_flag_evaluations_total",
	"Flag evaluations by the brownout provider, by flag and variant (on/off: optional content served or not).",
	[]string{"flag", "variant"}, nil)

type collector struct{ p *Provider }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- evalDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for flag, vs := range c.p.Evaluations() {
		for v, n := range vs {
			ch <- prometheus.MustNewConstMetric(evalDesc, prometheus.CounterValue, float64(n), flag, v)
		}
	}
}

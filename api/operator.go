package api

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
)

// StateJSON is GET /v1/state's body (version 1).
type StateJSON struct {
	V int `json:"v"`
	// Service is the service's name on a daemon of several; absent for a
	// daemon's one service.
	Service    string    `json:"service,omitempty"`
	Boot       int64     `json:"boot"`
	Generation uint64    `json:"generation"`
	Time       time.Time `json:"time"`
	Mode       string    `json:"mode"`
	Frozen     bool      `json:"frozen"`
	Shadow     bool      `json:"shadow"`
	Brightness float64   `json:"brightness"`
	Pressure   *float64  `json:"pressure"`
	Shed       float64   `json:"shed"`
	// RequestCost is what a request is expected to take at the levels
	// published, as a share of one with every feature on
	// (dimmer.Controller.RequestCost: 1 at full brightness and before the
	// law's first step): what the fleet's gates charge a request, so that
	// they count work in flight.
	RequestCost float64 `json:"request_cost"`
	Action      string  `json:"action"`
	Cause       string  `json:"cause,omitempty"`
	Reason      string  `json:"reason"`
	// SegmentNames lists the segments in order (each feature's segments
	// map has a level for each).
	SegmentNames []string               `json:"segment_names"`
	Features     []FeatureJSON          `json:"features"`
	Signals      []ReadingJSON          `json:"signals"`
	Sources      []signals.SourceHealth `json:"sources"`
	Tick         TickJSON               `json:"tick"`
	// Law is the control law and its pressure band (the dial draws the
	// band on the pressure gauge).
	Law LawJSON `json:"law"`
	// Model is what the law knows of the service: its capacity, the load
	// and a request's work, with their uncertainty.
	Model ModelJSON `json:"model"`
	// Cluster is what this replica knows of the others (absent for a
	// lone daemon).
	Cluster *ClusterJSON `json:"cluster,omitempty"`
}

// LawJSON is the control law — the model law (dimmer's only law,
// docs/model.md) — and its pressure band. Kind is always LawModel; it
// stays in the JSON for the clients that read it. A period at or over
// High reads as over target and counts against the capacity K the law
// measures; under Low a period was carried well within target; Setpoint
// is the pressure the corrections of K aim at. At the floors, CascadeAt
// starts shedding, up to MaxShed (negative: the cascade is off).
type LawJSON struct {
	Kind      string  `json:"kind"`
	High      float64 `json:"high"`
	Low       float64 `json:"low"`
	Setpoint  float64 `json:"setpoint"`
	CascadeAt float64 `json:"cascade_at"`
	MaxShed   float64 `json:"max_shed"`
}

// LawModel is the control law LawJSON.Kind names: dimmer's model law, the
// levels that keep the offered load within a capacity K the controller
// measures and corrects.
const LawModel = "model"

// FeatureJSON is one feature in StateJSON.
type FeatureJSON struct {
	Name     string        `json:"name"`
	Level    float64       `json:"level"`
	Computed float64       `json:"computed"`
	Floor    float64       `json:"floor"`
	Mode     string        `json:"mode"`
	Default  bool          `json:"default"`
	Override *OverrideJSON `json:"override,omitempty"`
	// Cap is the scheduled cap that binds now.
	Cap      *CapJSON           `json:"cap,omitempty"`
	Segments map[string]float64 `json:"segments,omitempty"`
	// Cost is what the controller has learned of the feature's cost from
	// the requests' tallies; absent until it was contrasted.
	Cost *CostJSON `json:"cost,omitempty"`
}

// CostJSON is a learned cost (dimmer.CostEstimate): extra work as a
// share of the all-off request's, its standard error, the ticks it was
// learned from, and whether the law uses it yet (until it is precise
// enough the law sets the levels with the configured cost).
type CostJSON struct {
	Value      float64 `json:"value"`
	SE         float64 `json:"se"`
	Contrasted int     `json:"contrasted_ticks"`
	InUse      bool    `json:"in_use"`
}

// ModelJSON is dimmer.ModelEstimate: what the law knows of the service.
// Mode is "cold" (the capacity not yet known: full brightness until an
// overload measures it), "feedback-only" (no load measured: the capacity
// is the work one request may take, set by the pressure alone),
// "no-gate" (no gate reports its room: the pressure alone corrects the
// capacity) or "measured".
type ModelJSON struct {
	Mode     string        `json:"mode"`
	Capacity CapacityJSON  `json:"capacity"`
	Load     *EstimateJSON `json:"load,omitempty"`
	AllOff   *EstimateJSON `json:"all_off,omitempty"`
	// Unconfigured is a feature the requests' tallies name that the
	// configuration does not have (an app whose flag keys are not the
	// features' names teaches the law nothing of their costs), with how
	// many such names the last tick held; absent unless seen within a
	// minute.
	Unconfigured *UnconfiguredJSON `json:"unconfigured,omitempty"`
}

// UnconfiguredJSON names the tallied features the configuration lacks:
// the first, and how many.
type UnconfiguredJSON struct {
	Feature string `json:"feature"`
	Count   int    `json:"count"`
}

// CapacityJSON is the capacity K: the work a second the service carries
// within target, in Unit ("s/s": seconds of service a second, where the
// requests are tallied; "all-off/s": all-off requests a second); 0 while
// unknown. In feedback-only mode (no load measured) it is the work one
// request may take, in "s" or "all-off". Source says what set it last; Saturated is what the service
// did while its gate was saturated (K's ceiling; absent while never
// measured); Step how far the next correction moves K at most, the
// resolution the corrections know it to.
type CapacityJSON struct {
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Source    string  `json:"source,omitempty"`
	Saturated float64 `json:"saturated,omitempty"`
	Step      float64 `json:"step,omitempty"`
}

// EstimateJSON is an estimate and its standard error: the load in
// requests a second, the all-off request's work in seconds.
type EstimateJSON struct {
	Value float64 `json:"value"`
	SE    float64 `json:"se"`
}

// modelJSON converts the law's model estimate.
func modelJSON(e dimmer.ModelEstimate) ModelJSON {
	out := ModelJSON{Mode: e.Mode, Capacity: CapacityJSON{Value: round(e.Capacity), Unit: "all-off/s", Source: e.Source,
		Saturated: round(e.Saturated), Step: round(e.Step)}}
	switch {
	case e.Mode == dimmer.ModelFeedback && e.Seconds:
		out.Capacity.Unit = "s" // a request's work, not a rate: no load is measured
	case e.Mode == dimmer.ModelFeedback:
		out.Capacity.Unit = "all-off"
	case e.Seconds:
		out.Capacity.Unit = "s/s"
	}
	if e.Load > 0 {
		out.Load = &EstimateJSON{Value: round(e.Load), SE: round(e.LoadSE)}
	}
	if e.AllOff > 0 {
		out.AllOff = &EstimateJSON{Value: e.AllOff, SE: e.AllOffSE}
	}
	if e.UnconfiguredN > 0 {
		out.Unconfigured = &UnconfiguredJSON{Feature: e.Unconfigured, Count: e.UnconfiguredN}
	}
	return out
}

// CapJSON is a binding scheduled cap.
type CapJSON struct {
	Max    float64   `json:"max"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// OverrideJSON is an operator's override.
type OverrideJSON struct {
	Level  float64   `json:"level"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
	// Who is the operator who set it (their token's name); absent when
	// it is not known (a replica's pin, set through the store).
	Who string `json:"who,omitempty"`
}

// ReadingJSON is one pressure signal in StateJSON.
type ReadingJSON struct {
	Signal     string   `json:"signal"`
	Value      *float64 `json:"value"`
	Target     float64  `json:"target"`
	Pressure   *float64 `json:"pressure"`
	Missing    bool     `json:"missing,omitempty"`
	Discounted bool     `json:"discounted,omitempty"`
}

// TickJSON reports the control loop's schedule.
type TickJSON struct {
	Period string  `json:"period"`
	LagP99 float64 `json:"lag_p99_seconds"`
	Ticks  uint64  `json:"ticks"`
}

// round drops float noise from a quantized level (0.47000000000000003).
func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func num(v float64, ok bool) *float64 {
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// State returns the controller's state as /v1/state shows it.
func (a *API) State() StateJSON {
	// The defaults are read once, and before the status: a reload sets
	// the defaults that bridge both laws, then the new law, then the new
	// file's defaults, so defaults read first never belong to a law newer
	// than the status's (a feature the new file drops would read a
	// missing default — true — beside the old law's level).
	var defaults map[string]bool
	if d := a.defaults.Load(); d != nil {
		defaults = *d
	}
	st := a.ctl.Status()
	cfg := a.ctl.Config()
	costs := a.ctl.Costs()
	a.mu.Lock()
	frozen, shadow := a.mu.frozen, a.mu.shadow
	a.mu.Unlock()
	out := StateJSON{V: Version, Service: a.cfg.Service, Boot: a.boot, Generation: st.Generation, Time: st.Time, Mode: st.Mode.String(),
		Frozen: frozen, Shadow: shadow, Brightness: st.Brightness, Pressure: num(st.Pressure, st.PressureOK),
		Shed: st.Shed, RequestCost: round(a.ctl.RequestCost()), Action: st.Action.String(), Reason: st.Reason,
		Features: []FeatureJSON{}, Signals: []ReadingJSON{}, Sources: []signals.SourceHealth{}, SegmentNames: []string{}}
	for _, sg := range cfg.Segments {
		out.SegmentNames = append(out.SegmentNames, sg.Name)
	}
	if st.CauseOK {
		out.Cause = st.Cause.String()
	}
	for _, f := range st.Features {
		def, ok := defaults[f.Name]
		fj := FeatureJSON{Name: f.Name, Level: round(f.Level), Computed: round(f.Computed), Floor: f.Floor, Mode: f.Mode.String(), Default: def || !ok}
		if f.Pin != nil {
			fj.Override = &OverrideJSON{Level: round(f.Pin.Level), Until: f.Pin.Until, Reason: f.Pin.Reason, Who: a.pinnedBy(f.Name, f.Pin)}
		}
		if f.Cap != nil {
			fj.Cap = &CapJSON{Max: f.Cap.Max, Until: f.Cap.Until(), Reason: f.Cap.Reason}
		}
		if len(cfg.Segments) > 0 && len(f.Segments) == len(cfg.Segments) {
			fj.Segments = map[string]float64{}
			for i, sg := range cfg.Segments {
				fj.Segments[sg.Name] = round(f.Segments[i])
			}
		}
		for i, cf := range cfg.Features {
			if cf.Name == f.Name && i < len(costs) && costs[i].Known() {
				fj.Cost = &CostJSON{Value: round(costs[i].Value), SE: round(costs[i].SE), Contrasted: costs[i].Contrasted, InUse: costs[i].InUse}
			}
		}
		out.Features = append(out.Features, fj)
	}
	for _, r := range st.Signals {
		out.Signals = append(out.Signals, ReadingJSON{Signal: r.Signal.String(), Value: num(r.Value, !r.Missing),
			Target: r.Target, Pressure: num(r.Pressure, !r.Missing), Missing: r.Missing, Discounted: r.Discounted})
	}
	if a.cfg.Sources != nil {
		out.Sources = append(out.Sources, a.cfg.Sources()...)
	}
	out.Tick = TickJSON{Period: cfg.Tick.String(), LagP99: a.hist.lagP99(), Ticks: a.hist.ticks()}
	out.Model = modelJSON(a.ctl.Model())
	out.Law = LawJSON{Kind: LawModel, High: round(cfg.High), Low: round(cfg.Low), Setpoint: round(cfg.Setpoint), CascadeAt: round(cfg.CascadeAt), MaxShed: round(cfg.MaxShed)}
	if a.cfg.Cluster != nil {
		out.Cluster = a.cfg.Cluster()
	}
	return out
}

func (a *API) getState(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.State())
}

// overrideRequest is PUT /v1/features/{name}/override's body.
type overrideRequest struct {
	V     *int     `json:"v"` // the body's version: absent or 1
	Level *float64 `json:"level"`
	// TTL is a Go duration ("10m"); default 1h, at most 7 days.
	TTL    string `json:"ttl"`
	Reason string `json:"reason"`
}

// MaxTTL bounds an override's time to live.
const MaxTTL = 7 * 24 * time.Hour

// MinTTL bounds an override's time to live below: a pin is an operator's
// act for an incident, and one shorter than a minute ends before anyone
// could see it in /v1/state or on the dial — while it replaces (and so
// ends) the pin that stood before. A "1ns" or "1s" is a typo for 1m or
// 1h, refused rather than taken.
const MinTTL = time.Minute

// body decodes a write's JSON body (strict: an unknown field is a typo)
// and checks its "v"; false when it answered the client.
func body(w http.ResponseWriter, r *http.Request, v any, version func() *int, optional bool) bool {
	sniff := &firstByte{ReadCloser: r.Body}
	r.Body = sniff
	if status, err := decodeBody(w, r, v, true, optional); err != nil {
		problem(w, status, "bad-body", err.Error())
		return false
	}
	if sniff.first != 0 && sniff.first != '{' {
		// null decodes into a struct as {} would: refused, as any body
		// but an object is.
		problem(w, http.StatusBadRequest, "bad-body", "want a JSON object ({} at least)")
		return false
	}
	if p := version(); p != nil && *p != Version {
		problem(w, http.StatusBadRequest, "bad-version", fmt.Sprintf(`"v": %d: this server reads version %d of its request bodies (or none: "v" may be left out)`, *p, Version))
		return false
	}
	return true
}

// firstByte is a request body that notes its first byte that is not
// JSON's white space.
type firstByte struct {
	io.ReadCloser
	first byte
}

func (f *firstByte) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if f.first != 0 {
			break
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			f.first = c
		}
	}
	return n, err
}

// pinStatus answers a refused pin or unpin with the status of its cause.
func pinStatus(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, dimmer.ErrUnknownFeature):
		problem(w, http.StatusNotFound, "unknown-feature", err.Error())
	case errors.Is(err, dimmer.ErrNotPinned):
		problem(w, http.StatusNotFound, "no-override", err.Error())
	case errors.Is(err, dimmer.ErrBadPin):
		problem(w, http.StatusBadRequest, "bad-override", err.Error())
	default:
		problem(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func (a *API) putOverride(w http.ResponseWriter, r *http.Request, who string) {
	name := r.PathValue("name")
	var req overrideRequest
	if !body(w, r, &req, func() *int { return req.V }, false) {
		return
	}
	if req.Level == nil {
		problem(w, http.StatusBadRequest, "bad-override", `"level" is required: the share of users who get the feature, 0 to 1`)
		return
	}
	lvl := *req.Level
	if lvl == 0 {
		lvl = 0 // not −0: "level -0.00", "pinned at -0%"
	}
	if math.IsNaN(lvl) || lvl < 0 || lvl > 1 {
		problem(w, http.StatusBadRequest, "bad-override", fmt.Sprintf("level %v: want 0 to 1", lvl))
		return
	}
	ttl := time.Hour
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			problem(w, http.StatusBadRequest, "bad-override", fmt.Sprintf("ttl %q: want a duration such as 10m or 2h", req.TTL))
			return
		}
		if d < MinTTL || d > MaxTTL {
			problem(w, http.StatusBadRequest, "bad-override", fmt.Sprintf("ttl %v: want from %v to %v", d, MinTTL, MaxTTL))
			return
		}
		ttl = d
	}
	if reasonTooLong(w, req.Reason) {
		return
	}
	reason := req.Reason
	if reason == "" {
		reason = "override by " + who
	}
	if a.cfg.Store != nil {
		if _, ok := a.ctl.State().Feature(name); !ok {
			pinStatus(w, fmt.Errorf("api: override: %w %q", dimmer.ErrUnknownFeature, name))
			return
		}
		a.stored(w, r, Change{Kind: "override", Feature: name, Level: lvl, TTL: ttl, Who: who, What: fmt.Sprintf("level %.2f for %v", lvl, ttl), Reason: reason},
			func(res ChangeResult) map[string]any {
				return map[string]any{"feature": name, "level": lvl, "until": res.Until, "reason": reason}
			})
		return
	}
	var now time.Time
	st, saved, err := a.change(func(at time.Time) (*dimmer.State, error) {
		now = at
		st, err := a.ctl.PinAt(at, name, lvl, ttl, reason)
		if err == nil {
			a.setPinner(name, who, at.Add(ttl))
			a.audit(at, who, "override", name, fmt.Sprintf("level %.2f for %v", lvl, ttl), reason)
		}
		return st, err
	})
	if err != nil {
		pinStatus(w, err)
		return
	}
	if f, ok := st.Feature(name); ok && f.Pin != nil {
		lvl = round(f.Pin.Level) // as pinned: on the controller's quantum
	}
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "saved": saved, "generation": st.Generation, "feature": name, "level": lvl, "until": now.Add(ttl), "reason": reason})
}

func (a *API) deleteOverride(w http.ResponseWriter, r *http.Request, who string) {
	name := r.PathValue("name")
	var req reasonRequest
	if !body(w, r, &req, func() *int { return req.V }, true) || reasonTooLong(w, req.Reason) {
		return
	}
	if a.cfg.Store != nil {
		a.stored(w, r, Change{Kind: "release", Feature: name, Who: who, What: "override released", Reason: req.Reason},
			func(ChangeResult) map[string]any { return map[string]any{"feature": name} })
		return
	}
	st, saved, err := a.change(func(at time.Time) (*dimmer.State, error) {
		st, err := a.ctl.UnpinAt(at, name)
		if err == nil {
			a.audit(at, who, "release", name, "override released", req.Reason)
		}
		return st, err
	})
	if err != nil {
		pinStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "saved": saved, "generation": st.Generation, "feature": name})
}

// reasonRequest is the body of POST /v1/freeze, /v1/unfreeze ({} at
// least) and, optionally, of DELETE …/override.
type reasonRequest struct {
	V      *int   `json:"v"`
	Reason string `json:"reason"`
}

// maxReason bounds what an operator types as a reason.
const maxReason = 500

func reasonTooLong(w http.ResponseWriter, reason string) bool {
	if len(reason) > maxReason {
		problem(w, http.StatusBadRequest, "bad-body", fmt.Sprintf("reason: at most %d bytes", maxReason))
		return true
	}
	return false
}

// change applies an operator's change and saves the operators' state, all
// under one lock: the controller and this API's own flags move together,
// and the file written is the state after this change, never an older
// one landing last. The change runs with the time of the write; one that
// finds nothing to change returns no state, and nothing is written (the
// state is the controller's as it stands, saved as it was).
func (a *API) change(do func(now time.Time) (*dimmer.State, error)) (st *dimmer.State, saved bool, err error) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if st, err = do(a.now()); err != nil {
		return nil, false, err
	}
	if st == nil {
		return a.ctl.State(), true, nil
	}
	return st, a.saveLocked(), nil
}

func (a *API) postFreeze(w http.ResponseWriter, r *http.Request, who string) {
	var req reasonRequest
	if !body(w, r, &req, func() *int { return req.V }, false) || reasonTooLong(w, req.Reason) {
		return
	}
	if req.Reason == "" {
		req.Reason = "frozen by " + who
	}
	if a.cfg.Store != nil {
		a.stored(w, r, Change{Kind: "freeze", Who: who, What: "every level frozen", Reason: req.Reason},
			func(ChangeResult) map[string]any { return map[string]any{"frozen": true} })
		return
	}
	st, saved, _ := a.change(func(now time.Time) (*dimmer.State, error) {
		st := a.ctl.FreezeAt(now, req.Reason)
		a.mu.Lock()
		a.mu.frozen, a.mu.freezeReason = true, req.Reason
		a.mu.Unlock()
		a.audit(now, who, "freeze", "", "every level frozen", req.Reason)
		return st, nil
	})
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "saved": saved, "generation": st.Generation, "frozen": true})
}

func (a *API) postUnfreeze(w http.ResponseWriter, r *http.Request, who string) {
	var req reasonRequest
	if !body(w, r, &req, func() *int { return req.V }, false) || reasonTooLong(w, req.Reason) {
		return
	}
	if a.cfg.Store != nil {
		a.stored(w, r, Change{Kind: "unfreeze", Who: who, What: "levels follow the law again", Reason: req.Reason},
			func(ChangeResult) map[string]any { return map[string]any{"frozen": false} })
		return
	}
	var was bool
	st, saved, _ := a.change(func(now time.Time) (*dimmer.State, error) {
		a.mu.Lock()
		was = a.mu.frozen
		a.mu.Unlock()
		if !was {
			return nil, nil // nothing to change: no event, no new generation
		}
		st := a.ctl.UnfreezeAt(now)
		a.mu.Lock()
		a.mu.frozen, a.mu.freezeReason = false, ""
		a.mu.Unlock()
		a.audit(now, who, "unfreeze", "", "levels follow the law again", req.Reason)
		return st, nil
	})
	out := map[string]any{"v": Version, "saved": saved, "generation": st.Generation, "frozen": false}
	if !was {
		out["detail"] = "not frozen: nothing changed"
	}
	writeJSON(w, http.StatusOK, out)
}

type shadowRequest struct {
	V      *int   `json:"v"`
	On     *bool  `json:"on"`
	Reason string `json:"reason"`
}

func (a *API) putShadow(w http.ResponseWriter, r *http.Request, who string) {
	var req shadowRequest
	if !body(w, r, &req, func() *int { return req.V }, false) {
		return
	}
	if req.On == nil {
		problem(w, http.StatusBadRequest, "bad-body", `"on" is required: true or false`)
		return
	}
	if reasonTooLong(w, req.Reason) {
		return
	}
	if a.cfg.Store != nil {
		on := *req.On
		a.stored(w, r, Change{Kind: "shadow", On: on, Who: who, What: "shadow " + strconv.FormatBool(on), Reason: req.Reason},
			func(ChangeResult) map[string]any { return map[string]any{"shadow": on} })
		return
	}
	st, saved, _ := a.change(func(now time.Time) (*dimmer.State, error) {
		st := a.ctl.SetShadowAt(now, *req.On)
		a.mu.Lock()
		a.mu.shadow = *req.On
		a.mu.Unlock()
		a.audit(now, who, "shadow", "", "shadow "+strconv.FormatBool(*req.On), req.Reason)
		return st, nil
	})
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "saved": saved, "generation": st.Generation, "shadow": *req.On})
}

// audit logs an accepted change and records it as an event.
func (a *API) audit(now time.Time, who, kind, feature, what, reason string) {
	a.log.Info("brownout: operator change", "who", who, "what", kind, "feature", feature, "detail", what, "reason", reason)
	a.events.add(Event{Time: now, Kind: kind, Feature: feature, Who: who, What: what, Reason: reason})
}

// Frozen reports whether the operators froze the levels (through this
// API, or restored at start).
func (a *API) Frozen() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.frozen
}

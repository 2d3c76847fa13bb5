package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/internal/cli"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// fileConfig is brownoutd's YAML configuration (see brownoutd.example.yaml
// and, for several services, brownoutd.services.example.yaml).
type fileConfig struct {
	Listen string `yaml:"listen"`
	// MaxConnsPerClient caps one client address's connections (0: none).
	MaxConnsPerClient *whole `yaml:"max_conns_per_client"`
	// MaxConns caps the connections open at once (default
	// server.MaxConns), MaxStreams the event streams (default half of
	// MaxConns; with services:, every service's together).
	MaxConns   *whole `yaml:"max_conns"`
	MaxStreams *whole `yaml:"max_streams"`
	StateDir   string `yaml:"state_dir"`
	// Store, a postgres:// URL, keeps the operators' state for replicas
	// that share it (ha.go); default none: the state dir.
	Store string `yaml:"store"`
	// serviceFields are the one service's, without Services; with them,
	// only tick and auth may be set here, as what the services inherit.
	serviceFields `yaml:",inline"`
	TLS           tlsCfg `yaml:"tls"`
	// CORSOrigins are the origins whose pages may evaluate flags from a
	// browser (api.Config.CORSOrigins); none by default.
	CORSOrigins []string `yaml:"cors_origins"`
	// Services, when any, are the services this daemon controls, each
	// with its own controller, source and tokens (services.go).
	Services []serviceCfg `yaml:"services"`
}

// serviceFields are one service's settings: its controller's, its signal
// source and its tokens.
type serviceFields struct {
	Tick     duration      `yaml:"tick"`
	Law      lawConfig     `yaml:"law"`
	Targets  []targetCfg   `yaml:"targets"`
	Features []featureCfg  `yaml:"features"`
	Segments []segmentCfg  `yaml:"segments"`
	Schedule []scheduleCfg `yaml:"schedule"`
	Sources  sourcesCfg    `yaml:"sources"`
	Auth     authCfg       `yaml:"auth"`
}

// serviceCfg is one entry of services:.
type serviceCfg struct {
	Name          string `yaml:"name"`
	serviceFields `yaml:",inline"`
}

// lawConfig is law:, the control law: dimmer's model law (docs/model.md),
// the only one. Kind may name it ("model") or be left out; "search" was
// the former default law, removed with its settings (the removed fields,
// removedKeys): each is read only to say what the model law does instead.
type lawConfig struct {
	Kind       string   `yaml:"kind"`
	High       float64  `yaml:"high"`
	Low        float64  `yaml:"low"`
	Hold       duration `yaml:"hold"`
	Quantum    float64  `yaml:"quantum"`
	StaleAfter whole    `yaml:"stale_after"`
	MaxShed    float64  `yaml:"max_shed"`
	// Probe: the most of the users a feature all on or all off is
	// flipped for, so that its cost stays measured; negative: off.
	Probe float64 `yaml:"probe"`

	// The search law's settings, errors whenever set.
	DownGain     removed `yaml:"down_gain"`
	UpGain       removed `yaml:"up_gain"`
	Proportional removed `yaml:"proportional"`
	MaxRise      removed `yaml:"max_rise"`
	Evidence     removed `yaml:"evidence"`
	MaxStep      removed `yaml:"max_step"`
	ProbeAfter   removed `yaml:"probe_after"`
	ProbeRise    removed `yaml:"probe_rise"`
}

// removed is a setting that no longer exists: it records only that the
// file sets it (to any value but null), so that check-config says what
// replaced it rather than "unknown field" or a type error.
type removed bool

func (r *removed) UnmarshalYAML(*yaml.Node) error {
	*r = true
	return nil
}

type targetCfg struct {
	Signal string `yaml:"signal"`
	// Target: a duration ("300ms") for latency and sojourn signals, a
	// number otherwise.
	Target  string `yaml:"target"`
	DimOnly bool   `yaml:"dim_only"`
}

type featureCfg struct {
	Name  string  `yaml:"name"`
	Rank  *whole  `yaml:"rank"`
	Cost  float64 `yaml:"cost"`
	Value float64 `yaml:"value"`
	Floor float64 `yaml:"floor"`
	// Default is what an app should fall back to when it cannot reach the
	// daemon: true fails open, false fails closed.
	Default *bool `yaml:"default"`
}

type segmentCfg struct {
	Name   string  `yaml:"name"`
	Offset float64 `yaml:"offset"`
}

type scheduleCfg struct {
	Feature string   `yaml:"feature"`
	From    string   `yaml:"from"`
	Zone    string   `yaml:"zone"`
	For     duration `yaml:"for"`
	Max     *float64 `yaml:"max"`
	Reason  string   `yaml:"reason"`
}

type sourcesCfg struct {
	Push   *pushCfg   `yaml:"push"`
	Scrape *scrapeCfg `yaml:"scrape"`
	PromQL *promqlCfg `yaml:"promql"`
}

type pushCfg struct {
	Window duration `yaml:"window"`
	Expire duration `yaml:"expire"`
	// MaxInstances caps the instances the source keeps
	// (fleet.PushConfig.MaxInstances); 0: its default.
	MaxInstances whole `yaml:"max_instances"`
}

type scrapeCfg struct {
	Targets []string `yaml:"targets"`
	Window  duration `yaml:"window"`
	Timeout duration `yaml:"timeout"`
}

type promqlCfg struct {
	URL   string `yaml:"url"`
	Range string `yaml:"range"`
	// Selector is label matchers every default query selects its series
	// with (fleet.DefaultQueriesFor), e.g. service="shop".
	Selector string            `yaml:"selector"`
	Queries  map[string]string `yaml:"queries"`
	Timeout  duration          `yaml:"timeout"`
	// Period is how far back the counts of one period look (the
	// arrivals, the feature tallies and the work the model law learns
	// from): fleet.PromQLConfig.Period. Default half the range.
	Period duration `yaml:"period"`
}

type authCfg struct {
	// Files of "name token" lines (or "name: token"); # comments.
	OperatorTokensFile string `yaml:"operator_tokens_file"`
	EvalTokensFile     string `yaml:"eval_tokens_file"`
	PushTokensFile     string `yaml:"push_tokens_file"`
}

type tlsCfg struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// duration is a time.Duration written as "1s", "300ms".
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return valueError(n, "want a duration such as 500ms, 10s or 5m")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return valueError(n, "want a duration such as 500ms, 10s or 5m")
	}
	if v < 0 {
		return valueError(n, "a duration must not be negative")
	}
	*d = duration(v)
	return nil
}

// whole is an integer setting: a number with a fraction (rank: 1.5) is
// refused, not truncated as YAML would into an int.
type whole int

func (w *whole) UnmarshalYAML(n *yaml.Node) error {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return valueError(n, "want a whole number")
	}
	*w = whole(v)
	return nil
}

// valueError is a value the file's node n cannot be: a yaml.TypeError,
// so that the decoder goes on to the rest of the file (another error
// stops it), at n's line and column, which parseConfig turns into the
// value's field path.
func valueError(n *yaml.Node, want string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d, column %d: %s: %s", n.Line, n.Column, shown(n), want)}}
}

// shown is a node's value as an error quotes it, at most 40 bytes.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return strconv.Quote(v)
}

// defaultFeatures are the shop's optional sections, in shed order.
var defaultFeatures = []string{"recommendations", "reviews", "gallery"}

// config is the daemon's resolved configuration.
type config struct {
	Listen string
	// Conns are the listener's caps: PerClient (max_conns_per_client)
	// and MaxConns (max_conns), 0 for the defaults.
	Conns server.Limits
	// MaxStreams caps the streams of the daemon, of every service
	// together (max_streams); 0 for the default, maxStreams.
	MaxStreams int
	StateDir   string
	Store      string // a postgres:// URL: run as a replica (ha.go)
	TLS        tlsCfg
	// CORSOrigins, as browsers write them (api.ParseOrigin).
	CORSOrigins []string
	// serviceConfig is the one service of a file without services:;
	// with them, its Dimmer.Tick and Auth (and tokens) are what the
	// services inherit, and nothing else of it is used.
	serviceConfig
	// Services are the file's services:, in its order; none without.
	Services []*serviceConfig
}

// serviceConfig is one service's resolved configuration.
type serviceConfig struct {
	// Name is the service's; "" for the one of a file without services:.
	Name     string
	Dimmer   dimmer.Config
	Defaults map[string]bool
	Push     *pushCfg
	Scrape   *scrapeCfg
	PromQL   *promqlCfg
	Auth     authCfg
	// Tokens, read from the auth files.
	OperatorTokens, EvalTokens, PushTokens map[string]string
}

// configError is every problem in a configuration, each with its line
// and field path.
type configError struct {
	file string
	errs []string
}

func (e *configError) Error() string {
	return fmt.Sprintf("%s: %d error(s):\n  %s", e.file, len(e.errs), strings.Join(e.errs, "\n  "))
}

// lines maps a field path ("features[1].floor") to its line in the file.
type lines map[string]int

// pos is a node's place in the file.
type pos struct{ line, col int }

// tree is where each field path of the file is: its line (lines), the
// path of the value at a line and column (at), and each scalar's tag and
// value (for the decoder's type errors, which name only a line).
type tree struct {
	lines  lines
	at     map[pos]string
	scalar map[string][2]string // path → {short tag, value}
}

func index(n *yaml.Node, path string, t *tree) {
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			index(c, path, t)
		}
		return
	}
	t.lines[path] = n.Line
	if _, ok := t.at[pos{n.Line, n.Column}]; !ok {
		t.at[pos{n.Line, n.Column}] = path
	}
	switch n.Kind {
	case yaml.ScalarNode:
		t.scalar[path] = [2]string{n.ShortTag(), n.Value}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			index(n.Content[i+1], p, t)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			index(c, path+"["+strconv.Itoa(i)+"]", t)
		}
	}
}

// parseConfig reads a YAML configuration: unknown fields are errors, and
// every error is reported with its line and field path — all of them, as
// far as they do not follow from one another: a value that cannot be read
// is one error, and the rest of the file is still checked. An empty input
// is the defaults.
func parseConfig(name string, data []byte) (*config, error) {
	return parseConfigWith(name, data, nil)
}

// parseConfigWith is parseConfig, then also check (when not nil) on the
// configuration read, its problems reported with the file's.
func parseConfigWith(name string, data []byte, check func(c *config, clean bool, at func(path, format string, a ...any))) (*config, error) {
	var fc fileConfig
	t := &tree{lines: lines{}, at: map[pos]string{}, scalar: map[string][2]string{}}
	ln := t.lines
	ce := &configError{file: name}
	unread := map[string]bool{} // paths whose value YAML could not read
	if len(bytes.TrimSpace(data)) > 0 {
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, &configError{file: name, errs: []string{yamlMsg(err)}}
		}
		index(&root, "", t)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				for _, e := range te.Errors {
					msg, path := typeError(e, t)
					ce.errs = append(ce.errs, msg)
					if path != "" {
						unread[path] = true
					}
				}
			} else {
				ce.errs = append(ce.errs, yamlMsg(err))
			}
		}
	}
	at := func(path, format string, a ...any) {
		for p := path; p != ""; {
			if unread[p] {
				return // its zero value, not the file's: the type error says it
			}
			i := strings.LastIndexAny(p, ".[")
			if i < 0 {
				break
			}
			p = p[:i]
		}
		l := ln[path]
		for p := path; l == 0 && p != ""; {
			i := strings.LastIndexAny(p, ".[")
			if i < 0 {
				break
			}
			p = p[:i]
			l = ln[p]
		}
		ce.errs = append(ce.errs, fmt.Sprintf("line %d: %s: %s", l, path, fmt.Sprintf(format, a...)))
	}
	c := resolve(&fc, at)
	clean := len(ce.errs) == 0
	if clean {
		checkControllers(c, at)
	}
	if check != nil {
		check(c, len(ce.errs) == 0, at)
	}
	if len(ce.errs) > 0 {
		sort.SliceStable(ce.errs, func(i, j int) bool { return lineOf(ce.errs[i]) < lineOf(ce.errs[j]) })
		return nil, ce
	}
	return c, nil
}

// typeError rewrites one of the decoder's errors with the field path of
// the value it is about, and returns that path ("" if none is found):
// "line 4: field colour not found in type main.featureCfg" becomes "line
// 4: features[0].colour: unknown field"; "line 1: cannot unmarshal !!str
// `lots` into int" "line 1: max_conns: \"lots\": want a whole number";
// valueError's "line 1, column 7: …" "line 1: tick: …".
func typeError(msg string, t *tree) (string, string) {
	var line, col int
	var rest string
	if n, _ := fmt.Sscanf(msg, "line %d, column %d:", &line, &col); n == 2 {
		_, rest, _ = strings.Cut(msg, ": ")
		if p, ok := t.at[pos{line, col}]; ok {
			return fmt.Sprintf("line %d: %s: %s", line, p, rest), p
		}
		return fmt.Sprintf("line %d: %s", line, rest), ""
	}
	if strings.Contains(msg, " not found in type ") {
		return unknownField(msg, t.lines), ""
	}
	var tag, into string
	if n, _ := fmt.Sscanf(msg, "line %d: cannot unmarshal %s", &line, &tag); n != 2 {
		return msg, ""
	}
	_, into, _ = strings.Cut(msg, " into ")
	value, quoted := "", false
	if i := strings.IndexByte(msg, '`'); i >= 0 {
		if j := strings.LastIndexByte(msg, '`'); j > i {
			value, quoted = msg[i+1:j], true
		}
	}
	best := ""
	for p, sc := range t.scalar {
		if t.lines[p] != line || sc[0] != tag {
			continue
		}
		if v, cut := strings.CutSuffix(value, "..."); quoted && sc[1] != value && !(cut && strings.HasPrefix(sc[1], v)) {
			continue
		}
		if best == "" || p < best {
			best = p
		}
	}
	if best == "" && (tag == "!!seq" || tag == "!!map") {
		for p, l := range t.lines {
			if l == line && p != "" && (best == "" || len(p) < len(best) || len(p) == len(best) && p < best) {
				if _, sc := t.scalar[p]; !sc {
					best = p
				}
			}
		}
	}
	what := "a " + tag
	if quoted {
		what = strconv.Quote(t.scalar[best][1])
		if best == "" {
			what = strconv.Quote(value)
		}
	} else if tag == "!!seq" {
		what = "a list"
	} else if tag == "!!map" {
		what = "a mapping"
	}
	if best == "" {
		return fmt.Sprintf("line %d: %s: %s", line, what, wantType(into)), ""
	}
	return fmt.Sprintf("line %d: %s: %s: %s", line, best, what, wantType(into)), best
}

// wantType says what a Go type of the configuration takes, in the file's
// terms.
func wantType(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(goType, "int"), goType == "main.whole":
		return "want a whole number"
	case strings.HasPrefix(goType, "float"):
		return "want a number"
	case goType == "bool":
		return "want true or false"
	case goType == "string":
		return "want a string"
	case strings.HasPrefix(goType, "[]"):
		return "want a list"
	}
	return "want a mapping (key: value)"
}

// unknownField rewrites yaml's "line 4: field colour not found in type
// main.featureCfg" as "line 4: features[0].colour: unknown field".
func unknownField(msg string, ln lines) string {
	var line int
	var field string
	if n, _ := fmt.Sscanf(msg, "line %d: field %s not found in type", &line, &field); n != 2 {
		return msg
	}
	best := ""
	for p, l := range ln {
		if l == line && (p == field || strings.HasSuffix(p, "."+field)) && (best == "" || p < best) {
			best = p
		}
	}
	if best == "" {
		best = field
	}
	return fmt.Sprintf("line %d: %s: unknown field", line, best)
}

func lineOf(s string) int {
	if rest, ok := strings.CutPrefix(s, "line "); ok {
		n, _ := strconv.Atoi(strings.SplitN(rest, ":", 2)[0])
		return n
	}
	return 0
}

func yamlMsg(err error) string { return strings.TrimPrefix(err.Error(), "yaml: ") }

// resolve turns a parsed file into a config, reporting problems to at.
func resolve(fc *fileConfig, at func(path, format string, a ...any)) *config {
	c := &config{Listen: fc.Listen, StateDir: fc.StateDir, Store: fc.Store, TLS: fc.TLS}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	} else if err := checkListen(c.Listen); err != nil {
		at("listen", "%v", err)
	}
	if c.Store != "" {
		if err := checkStore(c.Store); err != nil {
			at("store", "%v", err)
		}
	}
	if n := fc.MaxConnsPerClient; n != nil {
		var err error
		if c.Conns.PerClient, err = perClient(int(*n)); err != nil {
			at("max_conns_per_client", "%v", err)
		}
	}
	if n := fc.MaxConns; n != nil {
		var err error
		if c.Conns.MaxConns, err = connsCap(int(*n)); err != nil {
			at("max_conns", "%v", err)
		}
	}
	if n := fc.MaxStreams; n != nil {
		var err error
		if c.MaxStreams, err = streamsCap(int(*n)); err != nil {
			at("max_streams", "%v", err)
		} else if err := c.checkStreams(); err != nil {
			at("max_streams", "%v", err)
		}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		at("tls", "cert and key go together")
	}
	for i, o := range fc.CORSOrigins {
		co, err := corsOrigin(o)
		if err != nil {
			at(fmt.Sprintf("cors_origins[%d]", i), "%v", err)
			continue
		}
		c.CORSOrigins = append(c.CORSOrigins, co)
	}
	if len(fc.Services) > 0 {
		resolveServices(fc, c, at)
		return c
	}
	c.serviceConfig = *resolveService("", &fc.serviceFields, "", at)
	return c
}

// resolveService resolves one service's fields, reporting problems to
// top with their paths prefixed by prefix ("" or "services[1].").
func resolveService(name string, fc *serviceFields, prefix string, top func(path, format string, a ...any)) *serviceConfig {
	at := func(path, format string, a ...any) { top(prefix+path, format, a...) }
	c := &serviceConfig{Name: name, Auth: fc.Auth, Defaults: map[string]bool{},
		Push: fc.Sources.Push, Scrape: fc.Sources.Scrape, PromQL: fc.Sources.PromQL}
	checkLaw(fc.Law, at)
	d := dimmer.Config{Tick: time.Duration(fc.Tick), High: fc.Law.High, Low: fc.Law.Low, Hold: time.Duration(fc.Law.Hold),
		Quantum: fc.Law.Quantum, StaleAfter: int(fc.Law.StaleAfter), MaxShed: fc.Law.MaxShed, Probe: fc.Law.Probe}
	if d.Tick != 0 {
		if err := checkTick(d.Tick); err != nil {
			at("tick", "%v", err)
		}
	}
	for name, v := range map[string]float64{"law.high": d.High, "law.low": d.Low, "law.quantum": d.Quantum} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			at(name, "%v: want a finite number, not negative", v)
		}
	}
	high, low := cmp.Or(d.High, defaultHigh), cmp.Or(d.Low, defaultLow)
	switch {
	case high > cascadeAt:
		at("law.high", "%v: at most %v (a pressure: 1 is at target, and the cascade starts at %v)", high, cascadeAt, cascadeAt)
	case low >= high && d.Low != 0:
		at("law.low", "%v: must be below law.high (%v%s)", low, high, defaultNote(d.High))
	case low >= high:
		at("law.high", "%v: must be above law.low (%v, the default)", high, low)
	}
	if fc.Law.StaleAfter < 0 {
		at("law.stale_after", "%d: want a number of periods, at least 1, or 0 for the default (3)", fc.Law.StaleAfter)
	}
	if m := fc.Law.MaxShed; math.IsNaN(m) || m > 2 {
		at("law.max_shed", "%v: want at most 2 (1 sheds all the sheddable class, 2 the default class too), or negative for no cascade", m)
	}
	if d.Quantum > 0.5 {
		at("law.quantum", "%v: at most 0.5", d.Quantum)
	}
	if p := fc.Law.Probe; math.IsNaN(p) || p > dimmer.MaxProbe {
		at("law.probe", "%v: at most %v (a share of the users), or negative for no probe", p, dimmer.MaxProbe)
	}
	for i, t := range fc.Targets {
		p := fmt.Sprintf("targets[%d]", i)
		k, err := signals.ParseKey(t.Signal)
		if err != nil {
			at(p+".signal", "%q: not a signal (latency.p99, sojourn.p99, reject.ratio, error.ratio, …)", t.Signal)
			continue
		}
		v, err := targetValue(k, t.Target)
		if err != nil {
			at(p+".target", "%v", err)
			continue
		}
		if k.Unit() == signals.UnitRatio && v > 1 {
			at(p+".target", "%q: want a share from 0 to 1 for %s (0.01 is 1 %%)", t.Target, k)
			continue
		}
		d.Targets = append(d.Targets, dimmer.Target{Signal: k, Target: v, DimOnly: t.DimOnly})
	}
	if len(fc.Targets) == 0 {
		d.Targets = []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}, {Signal: signals.RejectRatio, Target: 0.01, DimOnly: true}}
	}
	if len(fc.Features) > dimmer.MaxFeatures {
		at("features", "%d features: at most %d", len(fc.Features), dimmer.MaxFeatures)
	}
	if len(fc.Segments) > dimmer.MaxSegments {
		at("segments", "%d segments: at most %d", len(fc.Segments), dimmer.MaxSegments)
	}
	seen := map[string]bool{}
	for i, f := range fc.Features {
		p := fmt.Sprintf("features[%d]", i)
		switch {
		case f.Name == "":
			at(p+".name", "required")
		case len(f.Name) > dimmer.MaxName:
			at(p+".name", "%d bytes long: at most %d", len(f.Name), dimmer.MaxName)
		case seen[f.Name]:
			at(p+".name", "%q: declared twice", f.Name)
		case provider.CheckFeatureName(f.Name) != nil:
			// (The rule brownout.New applies too: a name is one flag key.)
			at(p+".name", "%v", provider.CheckFeatureName(f.Name))
		}
		seen[f.Name] = true
		if f.Floor < 0 || f.Floor >= 1 || math.IsNaN(f.Floor) {
			at(p+".floor", "%v: want 0 ≤ floor < 1", f.Floor)
		}
		if f.Cost < 0 || math.IsNaN(f.Cost) || math.IsInf(f.Cost, 0) {
			at(p+".cost", "%v: want a finite number, not negative", f.Cost)
		}
		if f.Value < 0 || math.IsNaN(f.Value) || math.IsInf(f.Value, 0) {
			at(p+".value", "%v: want a finite number, not negative", f.Value)
		}
		rank := i
		if f.Rank != nil {
			rank = int(*f.Rank)
		}
		d.Features = append(d.Features, dimmer.Feature{Name: f.Name, Rank: rank, Floor: f.Floor, Cost: f.Cost, Value: f.Value})
		def := true
		if f.Default != nil {
			def = *f.Default
		}
		c.Defaults[f.Name] = def
	}
	if len(fc.Features) == 0 {
		for i, n := range defaultFeatures {
			d.Features = append(d.Features, dimmer.Feature{Name: n, Rank: i})
			c.Defaults[n] = true
			seen[n] = true
		}
	}
	segSeen := map[string]bool{}
	for i, s := range fc.Segments {
		p := fmt.Sprintf("segments[%d]", i)
		switch {
		case s.Name == "":
			at(p+".name", "required")
		case len(s.Name) > dimmer.MaxName:
			at(p+".name", "%d bytes long: at most %d", len(s.Name), dimmer.MaxName)
		case segSeen[s.Name]:
			at(p+".name", "%q: declared twice", s.Name)
		}
		segSeen[s.Name] = true
		if s.Offset < -1 || s.Offset > 1 || math.IsNaN(s.Offset) {
			at(p+".offset", "%v: want −1 to 1", s.Offset)
		}
		d.Segments = append(d.Segments, dimmer.Segment{Name: s.Name, Offset: s.Offset})
	}
	schedule(fc, &d, seen, at)
	if c.Push == nil && c.Scrape == nil && c.PromQL == nil {
		c.Push = &pushCfg{}
	}
	if c.Scrape != nil {
		if len(c.Scrape.Targets) == 0 {
			at("sources.scrape.targets", "at least one /metrics URL")
		}
		listed := map[string]bool{}
		for i, t := range c.Scrape.Targets {
			u, err := url.Parse(t)
			switch {
			case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
				at(fmt.Sprintf("sources.scrape.targets[%d]", i), "%q: want an http(s) URL with a host, such as http://10.0.0.5:9090/metrics", t)
			case listed[t]:
				at(fmt.Sprintf("sources.scrape.targets[%d]", i), "%q: listed twice", t)
			}
			listed[t] = true
		}
		checkWindow(time.Duration(c.Scrape.Window), "sources.scrape.window", at)
	}
	if c.PromQL != nil {
		if !strings.HasPrefix(c.PromQL.URL, "http://") && !strings.HasPrefix(c.PromQL.URL, "https://") {
			at("sources.promql.url", "%q: want Prometheus' http(s) base URL", c.PromQL.URL)
		}
		if u, err := url.Parse(c.PromQL.URL); err == nil && u.Host == "" {
			at("sources.promql.url", "%q: want Prometheus' http(s) base URL, with a host", c.PromQL.URL)
		}
		if c.PromQL.Range != "" && !promRange.MatchString(c.PromQL.Range) {
			at("sources.promql.range", "%q: want a range such as 1m or 30s (units ms, s, m, h: the queries read rate(…[range]))", c.PromQL.Range)
		} else if r, err := time.ParseDuration(cmp.Or(c.PromQL.Range, "1m")); err == nil && (r < minPromRange || r > maxSourceWindow) {
			at("sources.promql.range", "%v: want from %v to %v", r, minPromRange, maxSourceWindow)
		}
		if c.PromQL.Selector != "" && !promSelector.MatchString(c.PromQL.Selector) {
			at("sources.promql.selector", "%q: want label matchers such as service=\"shop\" or job=~\"shop-.*\", comma-separated", c.PromQL.Selector)
		}
		if p := time.Duration(c.PromQL.Period); p != 0 && p < time.Second {
			at("sources.promql.period", "%v: want a second or more (at least two of Prometheus's scrape intervals)", p)
		} else if rng, err := time.ParseDuration(cmp.Or(c.PromQL.Range, "1m")); err == nil && p > rng {
			at("sources.promql.period", "%v: want at most the range, %v", p, rng)
		}
		for k, q := range c.PromQL.Queries {
			if _, err := signals.ParseKey(k); err != nil {
				at("sources.promql.queries."+k, "not a signal")
			} else if strings.TrimSpace(q) == "" {
				at("sources.promql.queries."+k, "an empty query: write the PromQL, or leave the signal out for the default query")
			}
		}
	}
	n := 0
	for _, on := range []bool{c.Push != nil, c.Scrape != nil, c.PromQL != nil} {
		if on {
			n++
		}
	}
	if n > 1 {
		at("sources", "choose one of push, scrape and promql")
	}
	if c.Push != nil {
		if c.Push.MaxInstances < 0 || c.Push.MaxInstances > maxPushInstances {
			at("sources.push.max_instances", "%d: want a number of instances up to %d, or 0 for the default (%d): each holds up to ~300 KB", c.Push.MaxInstances, maxPushInstances, fleet.DefaultMaxInstances)
		}
		window, expire := time.Duration(c.Push.Window), time.Duration(c.Push.Expire)
		checkWindow(window, "sources.push.window", at)
		if expire != 0 && (expire < minPushExpire || expire > maxPushExpire) {
			at("sources.push.expire", "%v: want from %v to %v (about three of the instances' push intervals)", expire, minPushExpire, maxPushExpire)
		}
	}
	c.Dimmer = d
	return c
}

// dimmer.Config's defaults and its fixed cascade threshold, which the
// file's law is checked against (TestLawBoundsAreTheDimmers keeps them
// in step): law.high and law.low are pressures (1 at target); the
// cascade starts at cascadeAt, which a period over target must reach
// first, so law.high must not be above it.
const (
	defaultHigh = 0.85
	defaultLow  = 0.70
	cascadeAt   = 1.5
)

// defaultNote says ", the default" when a setting is left out.
func defaultNote(v float64) string {
	if v == 0 {
		return ", the default"
	}
	return ""
}

// checkControllers builds each service's controller as serve would and
// reports what it refuses, in the file's terms: the parser checks
// everything dimmer.New does (FuzzConfig holds it to that), so this only
// catches a check added to one and not the other.
func checkControllers(c *config, at func(path, format string, a ...any)) {
	for i, s := range c.units() {
		prefix := ""
		if len(c.Services) > 0 {
			prefix = fmt.Sprintf("services[%d].", i)
		}
		d := s.Dimmer
		if d.Tick == 0 {
			d.Tick = c.Dimmer.Tick
		}
		_, err := dimmer.New(d)
		if err == nil {
			continue
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			msg := strings.TrimPrefix(line, "dimmer: ")
			at(prefix+controllerField(msg), "the controller refuses it: %s", msg)
		}
	}
}

// controllerField is the field of the file an error of dimmer.New is
// about.
func controllerField(msg string) string {
	for _, f := range []struct{ prefix, field string }{
		{"tick", "tick"}, {"cascade at", "law.high"}, {"watermarks", "law.low"}, {"setpoint", "law.high"},
		{"quantum", "law.quantum"}, {"stale after", "law.stale_after"}, {"probe", "law.probe"},
		{"max shed", "law.max_shed"}, {"hold", "law.hold"}, {"target", "targets"}, {"no targets", "targets"},
		{"feature", "features"}, {"no features", "features"}, {"segment", "segments"}, {"schedule", "schedule"},
	} {
		if strings.HasPrefix(msg, f.prefix) {
			return f.field
		}
	}
	return "law"
}

// The bounds of the settings that are durations and counts: beyond them
// a daemon starts but cannot work as configured.
const (
	// maxTick bounds tick: the law reacts to an overload a tick after it
	// is measured; a tick over a minute leaves a minute's overload
	// uncorrected (the default is 1 s; the tests run 100 ms to 10 s).
	maxTick = time.Minute
	// minSourceWindow bounds the push and scrape windows below: a window
	// holds two readings of an instance at least — the Pusher's and a
	// scrape's usual 1 s interval, twice — or it has no rates at all.
	minSourceWindow = 2 * time.Second
	// maxSourceWindow bounds the windows and the promql range above: the
	// signals describe the last window, and one over 10 minutes describes
	// an overload long after it ended (the default window is 10 s, the
	// range 1 m).
	maxSourceWindow = 10 * time.Minute
	// minPushExpire and maxPushExpire bound push.expire: under 3 s (three
	// of the Pusher's 1 s pushes) one late push drops a live instance;
	// over 10 minutes a crashed instance's last load counts for as long.
	minPushExpire = 3 * time.Second
	maxPushExpire = 10 * time.Minute
	// minPromRange bounds promql.range below: rate() needs two of
	// Prometheus' samples in the range, 15 s apart by default; 10 s is
	// the least even a 5-s scrape interval fills.
	minPromRange = 10 * time.Second
	// maxPushInstances bounds push.max_instances: each instance holds up
	// to ~300 KB (fleet.PushConfig.MaxInstances), so 10 000 is ~3 GB, more
	// than a daemon beside its service should take; a larger fleet is
	// better read from Prometheus (sources.promql).
	maxPushInstances = 10000
)

// promRange is a range both Prometheus and time.ParseDuration read.
var promRange = regexp.MustCompile(`^([0-9]+(ms|s|m|h))+$`)

// checkWindow checks a source's window (0: its default).
func checkWindow(w time.Duration, path string, at func(path, format string, a ...any)) {
	if w != 0 && (w < minSourceWindow || w > maxSourceWindow) {
		at(path, "%v: want from %v to %v", w, minSourceWindow, maxSourceWindow)
	}
}

// checkTick checks a tick, from the file or --tick.
func checkTick(d time.Duration) error {
	if d < 100*time.Millisecond || d > maxTick {
		return fmt.Errorf("%v: want from 100ms to %v", d, maxTick)
	}
	return nil
}

// checkListen checks a listen address: host:port, the port a number
// from 0 to 65535.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: want host:port with a port from 0 to 65535", addr)
	}
	return nil
}

// serveChecks are what serve checks of a configuration beyond its file's
// fields, each reported to at — check-config runs them too, so that a
// file it accepts is one serve starts with: the token files (read into
// c), the push tokens a non-loopback listener needs, the TLS files, and
// (when the file is otherwise clean) the sources as serve builds them.
// c has inherited its services' settings.
func serveChecks(c *config, clean bool, at func(path, format string, a ...any)) {
	read := map[string]bool{} // each file's error once
	tokens := func(path, file string, dst *map[string]string) {
		var err error
		if *dst, err = readTokens(file); err != nil && !read[file] {
			at(path, "%v", err)
		}
		read[file] = true
	}
	tokens("auth.operator_tokens_file", c.Auth.OperatorTokensFile, &c.OperatorTokens)
	tokens("auth.eval_tokens_file", c.Auth.EvalTokensFile, &c.EvalTokens)
	tokens("auth.push_tokens_file", c.Auth.PushTokensFile, &c.PushTokens)
	for i, s := range c.Services {
		p := fmt.Sprintf("services[%d].", i)
		tokens(p+"auth.operator_tokens_file", s.Auth.OperatorTokensFile, &s.OperatorTokens)
		tokens(p+"auth.eval_tokens_file", s.Auth.EvalTokensFile, &s.EvalTokens)
		tokens(p+"auth.push_tokens_file", s.Auth.PushTokensFile, &s.PushTokens)
	}
	for _, s := range c.units() {
		if s.Push != nil && len(s.PushTokens) == 0 && !loopback(c.Listen) {
			at("listen", "the push source%s on %s, not a loopback address, needs push tokens (--push-tokens, auth.push_tokens_file): without them anyone who reaches the port could push signals and set every level", serviceNote(s), c.Listen)
		}
	}
	for path, f := range map[string]string{"tls.cert": c.TLS.Cert, "tls.key": c.TLS.Key} {
		if f != "" {
			if _, err := os.Stat(f); err != nil {
				at(path, "%v", err)
			}
		}
	}
	if !clean {
		return // the sources' errors are the file's, said already
	}
	for i, s := range c.units() {
		if _, _, err := buildSource(s); err != nil {
			p := "sources"
			if len(c.Services) > 0 {
				p = fmt.Sprintf("services[%d].sources", i)
			}
			at(p, "%v", err)
		}
	}
}

// removedKeys are the search law's settings, removed with it, each with
// what the model law does instead.
var removedKeys = []struct {
	field string
	set   func(lawConfig) removed
	does  string
}{
	{"down_gain", func(l lawConfig) removed { return l.DownGain }, "the law has no gains: it measures the load and sets the levels the load allows"},
	{"up_gain", func(l lawConfig) removed { return l.UpGain }, "the law has no gains: it measures the load and sets the levels the load allows"},
	{"proportional", func(l lawConfig) removed { return l.Proportional }, "the law has no gains: it measures the load and sets the levels the load allows"},
	{"max_rise", func(l lawConfig) removed { return l.MaxRise }, "the law brightens at once as far as the measured load allows"},
	{"evidence", func(l lawConfig) removed { return l.Evidence }, "the law gathers no evidence: it measures the load and sets the levels from it"},
	{"max_step", func(l lawConfig) removed { return l.MaxStep }, "the law takes no trial steps: it measures the load and sets the levels from it"},
	{"probe_after", func(l lawConfig) removed { return l.ProbeAfter }, "the law does not probe upwards: it brightens as far as the measured load allows (law.probe is the share of users a feature's cost is measured on)"},
	{"probe_rise", func(l lawConfig) removed { return l.ProbeRise }, "the law does not probe upwards: it brightens as far as the measured load allows (law.probe is the share of users a feature's cost is measured on)"},
}

// checkLaw reads law.kind — the model law, named or left out — and
// reports the search law and its settings, which were removed: a setting
// that silently did nothing would mislead whoever tunes it.
func checkLaw(l lawConfig, at func(path, format string, a ...any)) {
	switch l.Kind {
	case "", api.LawModel:
	case "search":
		at("law.kind", "%q: the search law was removed: the model law is the only law; remove it", l.Kind)
	default:
		at("law.kind", "%q: want %s, the only law (the default)", l.Kind, api.LawModel)
	}
	for _, s := range removedKeys {
		if s.set(l) {
			at("law."+s.field, "no longer exists: %s; remove it", s.does)
		}
	}
}

// corsOrigin checks an origin that may evaluate from a browser
// (api.ParseOrigin), its error said without the package's prefix.
func corsOrigin(s string) (string, error) {
	o, err := api.ParseOrigin(s)
	if err != nil {
		return "", errors.New(strings.TrimPrefix(err.Error(), "api: cors origin "))
	}
	return o, nil
}

// perClient reads a cap of connections per client (server.Limits'
// PerClient): a number of connections, 0 for none.
func perClient(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%d: want a number of connections, or 0 for no cap", n)
	case n == 0:
		return -1, nil
	}
	return n, nil
}

// minConns and maxConns bound max_conns: fewer than minConns leave no
// room for the operators, OFREP and the pushes beside a few streams;
// more than maxConns is no machine's (each connection a file descriptor,
// a goroutine and its buffers, ~16 KiB).
const (
	minConns = 64
	maxConns = 1 << 20
)

// connsCap reads max_conns.
func connsCap(n int) (int, error) {
	if n < minConns || n > maxConns {
		return 0, fmt.Errorf("%d: want a number of connections from %d to %d", n, minConns, maxConns)
	}
	return n, nil
}

// streamsCap reads max_streams.
func streamsCap(n int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("%d: want a number of streams, at least 1", n)
	}
	return n, nil
}

// maxConns is the listener's cap of connections.
func (c *config) maxConns() int {
	if c.Conns.MaxConns > 0 {
		return c.Conns.MaxConns
	}
	return server.MaxConns
}

// maxStreams is the daemon's cap of streams: max_streams, else half of
// its connections (api.DefaultMaxStreams under the default max_conns).
func (c *config) maxStreams() int {
	if c.MaxStreams > 0 {
		return c.MaxStreams
	}
	return c.maxConns() / 2
}

// streamRoom is the most streams max_conns of conns takes: every stream
// holds a connection, and an eighth of them stay for everything else —
// the listener closes idle connections from an eighth under its cap on.
func streamRoom(conns int) int { return conns - conns/8 }

// checkStreams checks max_streams against max_conns.
func (c *config) checkStreams() error {
	if c.MaxStreams > streamRoom(c.maxConns()) {
		return fmt.Errorf("%d streams: at most %d with max_conns %d — every stream holds a connection, and an eighth of them stay for the operators, OFREP and pushes (raise max_conns)", c.MaxStreams, streamRoom(c.maxConns()), c.maxConns())
	}
	return nil
}

// targetValue reads a target: a duration for latency and sojourn signals
// (in seconds for the controller), a number otherwise.
func targetValue(k signals.Key, s string) (float64, error) {
	name := k.String()
	if strings.HasPrefix(name, "latency.") || strings.HasPrefix(name, "sojourn.") {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q: want a positive duration such as 300ms for %s", s, name)
		}
		return d.Seconds(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a positive number for %s", s, name)
	}
	return v, nil
}

// readTokens reads a tokens file: "name token" or "name: token" per line,
// # comments and blank lines ignored; a regular file of at most
// maxTokensFile bytes.
func readTokens(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := readFile(path, maxTokensFile)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	owner := map[string]string{} // token → name
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(strings.Replace(line, ":", " ", 1))
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"name token\"", path, i+1)
		}
		if len(f[1]) < 16 {
			return nil, fmt.Errorf("%s:%d: token of %s: at least 16 characters", path, i+1, f[0])
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("%s:%d: %s named twice", path, i+1, f[0])
		}
		if other, ok := owner[f[1]]; ok {
			return nil, fmt.Errorf("%s:%d: %s has %s's token: each name needs its own (the audit's \"who\")", path, i+1, f[0], other)
		}
		out[f[0]], owner[f[1]] = f[1], f[0]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no tokens (an empty file would turn the check off: remove the setting instead)", path)
	}
	return out, nil
}

// runCheckConfig is `brownoutd check-config FILE`.
func runCheckConfig(args []string, stdout, stderr io.Writer) error {
	const checkUsage = "Usage: brownoutd check-config FILE\n\nReports every error in a YAML configuration with its line and field path; unknown fields are errors."
	if len(args) == 1 && cli.IsHelp(args[0]) {
		fmt.Fprintln(stdout, checkUsage)
		return nil
	}
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, checkUsage)
		return usagef("check-config: want one file")
	}
	b, err := readFile(args[0], maxConfigFile)
	if err != nil {
		return err
	}
	c, err := parseConfigWith(args[0], b, func(c *config, clean bool, at func(path, format string, a ...any)) {
		c.inherit()
		serveChecks(c, clean, at)
	})
	if err != nil {
		return err
	}
	if len(c.Services) > 0 {
		var l []string
		for _, s := range c.Services {
			l = append(l, s.Name+": features "+featureNames(s.Dimmer))
		}
		fmt.Fprintf(stdout, "%s: ok (%d services: %s%s%s)\n", args[0], len(c.Services), strings.Join(l, "; "), corsNote(c.CORSOrigins), capsNote(c))
		return nil
	}
	fmt.Fprintf(stdout, "%s: ok (features %s%s%s)\n", args[0], featureNames(c.Dimmer), corsNote(c.CORSOrigins), capsNote(c))
	return nil
}

// capsNote says the caps of connections and streams, for a summary line,
// when the file sets either: nothing otherwise.
func capsNote(c *config) string {
	if c.Conns.MaxConns == 0 && c.MaxStreams == 0 {
		return ""
	}
	of := ""
	if len(c.Services) > 0 {
		of = " of every service together"
	}
	return fmt.Sprintf("; at most %d connections, %d streams%s (each connection a file descriptor: ulimit -n above %d)", c.maxConns(), c.maxStreams(), of, c.maxConns())
}

// corsNote says which origins' pages may evaluate, for a summary line:
// nothing when none may.
func corsNote(origins []string) string {
	if len(origins) == 0 {
		return ""
	}
	return "; pages of " + strings.Join(origins, ", ") + " may evaluate"
}

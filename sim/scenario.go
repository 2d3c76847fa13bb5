package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Case is one run of a scenario: a policy at a load.
type Case struct {
	Policy string  `json:"policy"`
	Load   float64 `json:"load"` // nominal new requests per second
	Result Result  `json:"result"`
}

// Options tune a scenario run. Zero values take the scenario's defaults.
type Options struct {
	Seed     uint32
	Duration time.Duration
}

// Scenario is a named experiment: a set of cases run with the same seed.
type Scenario struct {
	Name  string
	About string
	// Duration is the default run length.
	Duration time.Duration
	cases    func(o Options) []caseSpec
}

type caseSpec struct {
	policy string
	load   float64
	cfg    Config
}

// Run runs every case of the scenario.
func (s Scenario) Run(o Options) []Case {
	if o.Duration <= 0 {
		o.Duration = s.Duration
	}
	var out []Case
	for _, c := range s.cases(o) {
		c.cfg.Seed = o.Seed
		if c.cfg.Duration == 0 {
			c.cfg.Duration = o.Duration
		}
		out = append(out, Case{Policy: c.policy, Load: c.load, Result: Run(c.cfg)})
	}
	return out
}

// scenarios is the registry, filled by this package's init and read-only
// afterwards: Lookup returns copies.
var scenarios = map[string]Scenario{}

// register adds a scenario. It panics on a duplicate name.
func register(s Scenario) {
	if _, dup := scenarios[s.Name]; dup {
		panic("sim: scenario " + s.Name + " registered twice")
	}
	scenarios[s.Name] = s
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, error) {
	s, ok := scenarios[name]
	if !ok {
		return Scenario{}, fmt.Errorf("sim: unknown scenario %q (known: %v)", name, ScenarioNames())
	}
	return s, nil
}

// ScenarioNames lists the scenarios, sorted.
func ScenarioNames() []string {
	var n []string
	for k := range scenarios {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// sweepLoads are the sources' loads against capacity 100.
var sweepLoads = []float64{50, 80, 100, 120, 150, 200}

// seedPolicies are the sources' three server policies.
var seedPolicies = []struct {
	Name string
	New  func() Admission
}{
	{"unbounded queue", func() Admission { return Unbounded() }},
	{"bounded queue, fail fast", func() Admission { return FailFast(50) }},
	{"priority shedding", func() Admission { return PriorityLimits(50, 20) }},
}

// SaleMix returns the 11.11 shop's traffic: checkout and payment are
// critical and have no optional parts; product pages (default) and the feed
// (sheddable) spend 40 % of their cost on optional parts (recommendations,
// reviews). Each call returns a new slice.
func SaleMix() []ClassMix {
	return []ClassMix{
		{Class: signals.Critical, Share: 0.3, Cost: 1},
		{Class: signals.Default, Share: 0.5, Cost: 0.6, Optional: 0.4},
		{Class: signals.Sheddable, Share: 0.2, Cost: 0.6, Optional: 0.4},
	}
}

// SaleLoad returns the 11.11 midnight spike: 60 req/s before midnight
// (t = 60 s), 250 req/s at the stroke, decaying with a half-life of a minute
// towards 120 req/s.
func SaleLoad() Midnight {
	return Midnight{Base: 60, Peak: 250, After: 120, At: 60 * time.Second, HalfLife: 60 * time.Second}
}

func init() {
	register(Scenario{
		Name: "overload-sweep", About: "load 50..200 req/s against capacity 100: the sources' three server policies and package shed",
		Duration: 30 * time.Second,
		cases: func(o Options) []caseSpec {
			var cs []caseSpec
			for _, p := range seedPolicies {
				for _, load := range sweepLoads {
					cs = append(cs, caseSpec{p.Name, load, Config{Load: Constant(load), Admission: p.New()}})
				}
			}
			for _, load := range sweepLoads {
				cs = append(cs, caseSpec{"shed (package shed)", load, Config{Load: Constant(load), Admission: NewShed(shed.GateConfig{})}})
			}
			return cs
		},
	})
	register(Scenario{
		Name: "burst", About: "80 req/s with a burst to 200 from 2 s to 5 s: tail drop vs CoDel (target 50 ms, interval 100 ms) vs package shed",
		Duration: 12 * time.Second,
		cases: func(o Options) []caseSpec {
			load := Burst{Base: 80, Peak: 200, Start: 2 * time.Second, For: 3 * time.Second}
			mk := func(on bool) Config {
				return Config{Load: load, Client: Client{Timeout: 10 * time.Second},
					Admission: &CoDel{Enabled: on, Limit: 300, Target: 50 * time.Millisecond, Interval: 100 * time.Millisecond}}
			}
			withShed := Config{Load: load, Client: Client{Timeout: 10 * time.Second}, Admission: NewShed(shed.GateConfig{})}
			return []caseSpec{{"tail-drop", 80, mk(false)}, {"CoDel-like", 80, mk(true)}, {"shed (package shed)", 80, withShed}}
		},
	})
	register(Scenario{
		Name: "capacity-dip", About: "70 req/s, capacity halved from 30 s to 60 s: client retry policies and the retry storm",
		Duration: 240 * time.Second,
		cases: func(o Options) []caseSpec {
			mk := func(rp RetryPolicy, drop bool) Config {
				return Config{Load: Constant(70), Client: Client{Retry: rp}, RecoverFrom: 60 * time.Second,
					Server:    Server{Capacity: Dip(30*time.Second, 30*time.Second, 0.5)},
					Admission: &Limits{Limit: Unbounded().Limit, DropExpired: drop}}
			}
			half := 500 * time.Millisecond
			return []caseSpec{
				{"immediate retry", 70, mk(RetryPolicy{MaxRetries: 3}, false)},
				{"backoff + jitter", 70, mk(RetryPolicy{MaxRetries: 3, Backoff: half}, false)},
				{"backoff + jitter + budget", 70, mk(RetryPolicy{MaxRetries: 3, Backoff: half, Budget: 0.1}, false)},
				{"  + server drops expired", 70, mk(RetryPolicy{MaxRetries: 3, Backoff: half, Budget: 0.1}, true)},
			}
		},
	})
	register(Scenario{
		Name: "sale", About: "the 11.11 midnight spike (60 → 250 req/s, decaying to 120) with optional page sections",
		Duration: 300 * time.Second,
		cases: func(o Options) []caseSpec {
			mk := func(d Dimmer) Config {
				return Config{Load: SaleLoad(), Mix: SaleMix(), Dimmer: d,
					Admission: &Limits{Limit: [signals.NumClasses]float64{50, 25, 25}, CountCost: true},
					Signals:   signals.Config{Latency: signals.WindowConfig{Slices: 5}}}
			}
			return []caseSpec{
				{"priority shedding, optional on", 0, mk(Static(1))},
				{"priority shedding, optional off", 0, mk(Static(0))},
				{"brownout + priority shedding", 0, mk(NewController(BrownoutConfig(BrownoutTarget)))},
			}
		},
	})
	register(Scenario{
		Name: "dependency-slowdown", About: "checkout calls an SMS provider that goes from 200 ms to 30 s for 30 s: no timeout vs timeout vs timeout + breaker",
		Duration: 90 * time.Second,
		cases: func(o Options) []caseSpec {
			mk := func(timeout time.Duration, breakAfter int) Config {
				sms := &Dependency{Latency: Slowdown(200*time.Millisecond, 30*time.Second, 20*time.Second, 30*time.Second),
					Timeout: timeout, BreakAfter: breakAfter, OpenFor: 30 * time.Second}
				return Config{Load: Constant(60), Server: Server{Workers: 20},
					Mix:       []ClassMix{{Class: signals.Critical, Share: 1, Dependency: sms}},
					Admission: &Limits{Limit: [signals.NumClasses]float64{200, 200, 200}}, Client: Client{Timeout: 2 * time.Second},
					RecoverFrom: 50 * time.Second}
			}
			return []caseSpec{
				{"no timeout", 60, mk(0, 0)},
				{"timeout 300 ms", 60, mk(300*time.Millisecond, 0)},
				{"timeout 300 ms + breaker", 60, mk(300*time.Millisecond, 10)},
			}
		},
	})
	register(Scenario{
		Name: "brownout", About: "capacity 100 (optional parts on), optional 40 % of cost, 30 % critical, p99 target 300 ms: shedding alone vs brownout + shedding at 150, 200 and a step 80→150→80",
		Duration: 90 * time.Second,
		cases: func(o Options) []caseSpec {
			var cs []caseSpec
			for _, l := range []struct {
				name string
				load float64
				p    Profile
			}{
				{"", 150, Constant(150)},
				{"", 200, Constant(200)},
				{"step 80→150→80: ", 0, BrownoutStep()},
			} {
				cs = append(cs,
					caseSpec{l.name + "priority shedding", l.load, BrownoutLab(l.p, Static(1))},
					caseSpec{l.name + "brownout + priority shedding", l.load, BrownoutLab(l.p, NewController(BrownoutConfig(BrownoutTarget)))})
			}
			return cs
		},
	})
}

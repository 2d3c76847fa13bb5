// Package dimmer is the brownout controller: a control loop that turns
// signals (p99 latency, queue sojourn) into levels — the share of requests
// that still get each optional feature — and, as a last resort, a shed
// level for whole classes of requests.
//
// # Model
//
// Each period (Tick, default 1 s) [Controller.Step] reads a
// signals.Snapshot. The pressure is the largest value/target over the
// configured [Target]s whose signals are present (a missing signal is
// ignored; all missing means no signal this period):
//
//	p = max_i value_i / target_i        (1 = at target)
//
// One number, the brightness b, drives everything. The features form a
// ladder in shed order (Rank, then Value/Cost): each feature owns a stretch
// of [0, 1] proportional to its Cost, the first to dim at the top, so one
// brightness dims the first feature fully before the next begins. A
// feature's level is its position in its stretch, never below its Floor. A
// [Segment] reads the ladder at b + Offset, so VIP or checkout-stage users
// keep features longer. Below 0 the ladder continues into the cascade: the
// shed level is −b, up to 1 the share of sheddable requests refused at the
// door, from 1 to 2 all sheddable and −b−1 of the default ones (see
// [ShedShare]); critical requests are never shed. Going up, shedding ends
// before any feature brightens.
//
// # Control law
//
// The law is a model of the service (model.go; docs/model.md has its
// derivations and its figures). A request at brightness b costs
//
//	w(b) = w₀ + Σᵢ ℓᵢ(b)·rᵢ·ĉᵢ
//
// of work: w₀ is the all-off request's, measured from the work of every
// request (signals.Snapshot.Work); ℓᵢ(b) feature i's level on the ladder;
// ĉᵢ its cost to a request that renders it; rᵢ its reach, the share of the
// requests that evaluate it. The service carries K of work a second
// within its targets. At the offered load λ (LoadSignal, measured each
// period) the levels are the brightest with
//
//	λ·w(b) ≤ K
//
// so a measured change of the load moves them at once, and by the amount
// it calls for (feedforward). The rest of the law estimates the unknowns:
//
//   - λ: a Kalman tracker of the load (track.go) that grows more precise
//     while the load holds and restarts on a jump; a load that moves is
//     served for a trend's prediction of the period the levels will serve
//     (load.go, trend.go), and a load that went back after as long down
//     before is served for the level it returns to (returns.go) — as one
//     that fell back after as long up before is served for its low from
//     the fall's first interval, not its second. Within
//     the estimates' noise (but for a move the way a load more likely
//     moving on its trend goes), or for a move under 0.05 of the
//     brightness (minMove), the levels hold.
//   - ĉᵢ: each feature's cost, from the dimmer's own randomisation.
//     While a level is fractional some users get the feature and some do
//     not: the per-request tallies (signals.WithTally) contrast the two
//     within one tick and segment (estimate.go). Config's Feature.Cost is
//     the prior until then, scaled by what the levels' moves teach
//     (work.go). So that every cost stays measured, a level all on or all
//     off is probed: up to Probe of its users (5 %) get the other side
//     (probe.go).
//   - K: measured while the admission gate is saturated (its completions,
//     Ĉ; K is set to 0.9·Ĉ) and corrected every Hold at least by the
//     targets' mean distance from the Setpoint, in bands of High − Low,
//     with Kesten's rule (each reversal halves the step and doubles the
//     wait); a period carried well within target (under Low) raises K to
//     what it carried; a service that got slower or faster (w₀ jumped)
//     moves K by the idle its queue's wait calls for (capacity.go,
//     feedback.go).
//
// Shedding: with every feature at its floor and the pressure at or over
// CascadeAt for CascadeHold while the gate is full (RoomSignal at or over
// SaturatedAt), b goes below 0 (b ← b − CascadeGain·(p − 1)·dt, down to
// −MaxShed); it ends as soon as the floors' work fits the measured load,
// and unwinds at UnshedRate once refusing no longer helps (under target,
// or room at the gate: latency over target with room at the gate is the
// service's own, which shedding does not lower).
//
// Cold start and missing estimates. Until K is known the levels stay at
// the ceiling; an overload (over High for a few periods) takes K to the
// work it carried (scaled down by the latency's excess where the gate has
// room), and the levels fall at once. A source that gives no load (the
// latency alone) makes the law feedback only: K is then the work a
// request may take, the same equations at a nominal load of one request
// a second, corrected by the pressure and by a change detector (Page's
// CUSUM) on it; the reason says "no load measured: feedback only".
//
// The reason speaks the model, e.g. "reject.ratio 0.03 > 0.01 target:
// load 412/s, carries 3.6 s of service a second (measured while
// saturated), recommendations costs 0.31±0.03 of an all-off request
// (learned: 3ms±291µs) → brightness 0.35: dimming recommendations";
// before any overload, "full brightness (load 80/s, capacity unknown
// until an overload measures it)". [Controller.Model] and
// [Controller.Costs] give the same estimates as numbers, with their
// uncertainty.
//
// Brightness is clamped to [−MaxShed, 1], and nothing moves while the
// controller is frozen or stale.
//
// Parameters and defaults (see [Config]):
//
//	Tick          1 s      control period (≥ 100 ms)
//	High          0.85     a period at or over this is over target
//	Low           0.70     a period under this was carried well within target
//	Setpoint      0.775    the pressure K's corrections aim at
//	Hold          5 s      the shortest wait between two corrections of K
//	Probe         0.05     the most users a feature all on or off is probed for
//	CascadeAt     1.5      pressure that starts shedding at the floor…
//	CascadeHold   3 s      …held this long
//	CascadeGain   0.2      shed level per second per unit of error
//	MaxShed       2        sheddable, then default
//	RoomBelow     0.05     gate.busy under this: the gate has room
//	SaturatedAt   0.25     gate.busy at or over this: the gate is full
//	UnshedRate    1/s      how fast the cascade unwinds
//	Quantum       0.01     published levels are rounded to 1 %
//	StaleAfter    3        periods without a signal before "stale"
//
// An admission layer holds latency at its own bounds by refusing, so
// latency alone under-reports overload: give the controller the refusal
// ratio too (signals.RejectRatio, target 0.01), marked DimOnly so that
// those refusals dim features but never drive the cascade. With a gate,
// overload shows as refusals, and its saturated periods measure K.
//
// CascadeAt sits above target on purpose: an admission layer whose queue is
// bounded in time under the latency target (package shed) holds p99 near
// target by refusing the excess itself, and shedding whole classes on top of
// it only loses goodput. The cascade is for latency running away, and only
// while refusing helps: package shed reports gate.busy, the share of
// arrivals that found no room at its gate since the last period. Without
// gate.busy (no gate to ask) the cascade works on latency alone.
//
// Feed the controller a latency window of about five periods (5 × 1 s): a
// windowed p99 forgets a slow burst only when the burst leaves the window,
// and the corrections of K do not count a window that began before the
// levels last moved.
//
// # Proven in the lab
//
// The tests run the controller in package sim's labs: sim.BrownoutLab
// (capacity 100 req/s with every optional part on, optional parts 40 % of
// the cost, 30 % critical, timeout 1 s, p99 target 300 ms, package shed's
// gate; the controller reads latency.p99 and reject.ratio against 1 %, the
// latter DimOnly) and sim.BrownoutPartsLab (a part per feature with its
// own true cost). Among them: at 150 req/s ≥ 97 % in time; at 200 req/s
// goodput ≥ 95 % of every optional part off; at constant loads of 0.9–1.5
// times the capacity the optional content the best fixed level θ* serves
// (testdata/oracle.csv), calm after the first minute; through a capacity
// dip, back within 0.1 of θ* seconds after it; costs learned within 20 %
// from priors three times off; on loads that swing around the capacity,
// against a reference dimmer told the load and the costs. docs/model.md
// and docs/measurements.md hold the figures and the commands.
//
// # Scheduled caps
//
// A load known in advance — the 11.11 midnight sale — need not wait for
// feedback. Config.Schedule holds [Cap]s: a feature (every feature when
// Feature is empty), a Max level, a window that opens at From (a
// time.Time, so the caller chooses the zone: 23:59:30 on 11 November in
// Asia/Dhaka) and lasts For, and a Reason. Step evaluates them at its
// now, never at the clock; the window is [From, From+For). While a window
// is open:
//
//	published level = min(the law's level, Max)   for every segment; the lowest open cap wins
//
// Feedback still works under the cap: pressure dims the feature, and the
// next ones, further. The law's brightness does not wind up against the
// cap: it is kept at the cap's ceiling, the highest brightness at which a
// capped level would still move (for the first feature of the ladder
// capped at c, lo + c·(hi − lo) of its stretch; a feature capped at or
// under its floor hands the ceiling to the next). So dimming acts at
// once, from the cap; when the window closes, the law sets the levels the
// measured load allows at K, as at any other period.
//
// Precedence: an operator's pin, then shadow mode (nothing applied), a
// freeze (levels held as published), then the schedule, then the law.
// While the signals are stale a cap still applies (it only lowers levels),
// and a window that closes while stale does not brighten blind. A feature
// that a cap holds down (the law, or the level held while stale, would
// publish more) has the mode [Scheduled], "scheduled" in flag metadata;
// FeatureState.Cap and State.CapReason give the entry, and the state's
// Reason names the cap and its reason. A cap that is open but not binding
// (the law is lower) leaves the feature's mode to the law and is called
// "not binding" in the reason. A window that opens or closes publishes a
// new state at the next Step, even if the signals did not change.
//
// In the lab (TestLabScheduledCap; go test ./dimmer -run LabScheduledCap
// -v): the sale's spike (sim.SaleLoad, 60 → 250 req/s at t = 60 s,
// decaying towards 120) in sim.BrownoutLab, with and without
// recommendations capped at 50 % from 30 s before the spike for three
// minutes; sums and means over ten seeds, runs of 240 s:
//
//	                                      without     with the cap
//	optional level at the spike            1.00          0.69
//	in time, arrivals of the first 1 s     43.1 %        48.4 %
//	in time, first 3 s                     56.4 %        58.0 %
//	in time, first 10 s                    64.2 %        64.9 %
//	p99 of the first 10 s                  253 ms        263 ms
//	largest one-second p99 in them         289 ms        293 ms
//	whole run: in time                     90.0 %        90.0 %
//	whole run: optional parts served       11.9 %        10.1 %
//
// The spike is 2.5 times the capacity, and the law dims every feature to
// its floor at its first tick after it (its refusal ratio, 34 % against
// 1 %, confirms the overload at once), so the cap helps in that first
// second only: 48 % instead of 43 % of its arrivals served in time, and
// 3 s after the spike the two runs are alike.
// The p99 is bounded by the admission gate either way, under the 300 ms
// target; its difference is within the seeds' noise. The price is
// optional content: 30 s of it before the spike, and after the spike
// wherever the law would have brightened past the cap before the window
// closed. A cap pays most where the law is slower than the load: a longer
// Tick, a windowed p99 that takes seconds to show a spike, a spike too
// short for feedback.
//
// # Reconfiguration
//
// [Controller.Reconfigure] replaces the configuration (brownoutd calls it
// on SIGHUP), checked as New checks it: on error nothing changes. The
// brightness (and with it the shed level), the law's estimates (K, the
// learned costs of features that still exist), the freeze, shadow mode and the pins on features that still exist stay; pins on
// removed features are dropped with a warning in the log. Levels come
// from the new ladder at the kept brightness, so a new feature starts at
// full level unless the controller is dimmed so far that its place in the
// ladder says less. A new state is published.
//
// # Publishing
//
// Levels are quantized (Quantum) and a new immutable [State] is published
// only when something a reader acts on changes — a level, the shed level,
// a mode, what the law does ([Action]: dim, hold, brighten, shed) and
// which signal drives it (Cause), or the set of open scheduled caps —
// never for the numbers in the reason alone, so that generations, ETags and change events stay meaningful. It
// carries a growing Generation and a readable Reason such as
// "latency.p99 1.3s > 1s target: dimming recommendations". Request paths
// read it with [Controller.State], one atomic load. [Controller.Subscribe]
// delivers the newest state to each subscriber through a one-slot channel:
// coalesced, and never blocking the controller. [Controller.Status] gives
// operators the latest readings and reason even when nothing changed.
//
// # Operators
//
// [Controller.Pin] overrides one feature's level for a TTL, with a reason;
// [Controller.Freeze] holds every level; shadow mode ([Controller.SetShadow])
// computes and reports levels (FeatureState.Computed) but publishes full
// brightness and no shedding. Each has an …At(now, …) form for tests. After
// StaleAfter periods without a signal the mode is Stale: levels hold and the
// controller never brightens blind.
//
// # Usage
//
//	c, err := dimmer.New(dimmer.Config{
//		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 0.3}},
//		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
//	})
//	go c.Run(ctx, dimmer.Local(recorder)) // or a fleet.ScrapeSource
//	...
//	if lvl, _ := c.State().Level("recommendations", ""); lvl > 0 { … }
//
// Every exported method is safe for concurrent use.
package dimmer

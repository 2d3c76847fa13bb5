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
// A velocity-form PI controller on the pressure error e = p − Setpoint,
// with hysteresis zones and anti-windup. Per period of dt seconds:
//
//	p ≥ High (dim):       b ← b − DownGain·e·dt − Proportional·max(e − e_prev, 0)
//	                      stopping at 0 (every feature at its floor); but
//	                      hold while p < 1 within Settle of a brightening
//	                      step, or at a load well under the load mark
//	at the floor:         only while p ≥ CascadeAt for CascadeHold and the
//	                      admission gate is full (RoomSignal ≥ SaturatedAt):
//	                      b ← b − CascadeGain·e·dt, down to −MaxShed
//	shedding:             load below the load mark: b ← 0 at once;
//	                      room at the gate, or p < 1: b ← b + UnshedRate·dt
//	Low ≤ p < High:       hold (the integrator is frozen: no windup)
//	p < Low for Hold:     b ← b + min(UpGain·(−e)·dt, MaxRise·dt), up to 1;
//	                      while shedding, CascadeGain instead of UpGain
//
// Fast down, slow up: dimming reacts within one period, grows with the
// overshoot and adds a proportional kick while pressure is still rising;
// brightening waits for Hold under the low watermark and is rate-capped.
// Brightness is clamped to [−MaxShed, 1], and the integrator does not move
// while the controller holds, is frozen or is stale, so it never winds up.
//
// Latency alone cannot tell "near capacity at full brightness" from "near
// capacity with every feature off": near saturation a queue's p99 is low
// until it is suddenly not. So brightening is also load-aware: while dimmed
// the controller keeps an average of the offered load (LoadSignal,
// rate.arrival; the load mark). While the load stays within LoadMargin of
// the mark, the cause of the dimming is still there: the controller holds,
// and after ProbeAfter it probes upwards at ProbeRise (capacity may have
// come back); a load that rises further while dimmed restarts that
// wait. When the load falls below the margin it brightens at full
// speed. Without a load signal, brightening follows pressure alone.
//
// Parameters and defaults (see [Config]):
//
//	Tick          1 s      control period (≥ 100 ms)
//	High          0.85     dim at or above this pressure
//	Low           0.70     brighten only under this pressure…
//	Hold          5 s      …held this long
//	Setpoint      0.775    the pressure the integral term aims at
//	DownGain      1        brightness per second per unit of error, dimming
//	Proportional  0.5      kick per unit of rising error, dimming only
//	UpGain        1        brightness per second per unit of error, brightening
//	MaxRise       0.25/s   cap on brightening
//	LoadMargin    0.2      load drop that counts as "the cause is gone"
//	ProbeAfter    30 s     then probe although the load stayed
//	ProbeRise     0.05/s   cap on probing
//	Settle        5 s      near target after brightening: hold this long
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
// ratio too (signals.RejectRatio, e.g. target 0.05), marked DimOnly so that
// those refusals dim features but never drive the cascade.
//
// CascadeAt sits above target on purpose: an admission layer whose queue is
// bounded in time under the latency target (package shed) holds p99 near
// target by refusing the excess itself, and shedding whole classes on top of
// it only loses goodput. The cascade is for latency running away, and only
// while refusing helps: package shed reports gate.busy, the share of
// arrivals that found no room at its gate since the last period. With room
// at the gate, latency over target is the app's own service time (slow
// pages, a slow dependency): dimming features lowers it, refusing users at
// the door does not, so the cascade does not start and, if running,
// unwinds — and the reason says so. The windowed refusal ratio of DimOnly
// targets is not counted either while the gate has room: those refusals
// belong to an overload that is over. Without gate.busy (no gate to ask)
// the cascade works on latency alone.
//
// Feed the controller a latency window of about five periods (5 × 1 s): a
// windowed p99 forgets a slow burst only when the burst leaves the window,
// and a 10 s window delays brightening by up to 10 s.
//
// Near the target but not over it (High ≤ p < 1), a windowed p99 is
// noisy: at 80 % load with every feature on it wanders around 85 % of the
// target on its own. So the controller does not dim there within Settle
// of its own brightening (the window is still taking the step in), nor at
// a load well below the load mark (the overload's cause is gone; this is
// the new load's operating point). Over the target it dims at once.
//
// # Proven in the lab
//
// The tests run the controller in package sim's lab (sim.BrownoutLab:
// capacity 100 req/s with every optional part on, optional parts 40 % of
// the cost, 30 % critical, timeout 1 s, p99 target 300 ms, package shed's
// gate as the admission layer; the controller reads latency.p99 and
// reject.ratio, the latter DimOnly) and require, for
// each of ten seeds: at 150 req/s ≥ 97 % of requests served in time with
// 100 % critical and p99 ≤ target; at 200 req/s goodput ≥ 95 % of the
// capacity with optional parts off and ≥ 99.9 % critical; on a step
// 80 → 150 → 80, p99 under target from 5 s after the step, at most two
// changes of direction, and full brightness within 15 s of the load's
// return. Golden traces of these runs are under testdata/.
//
// Serving optional content is the other half of the goal, and there the
// controller leaves a lot on the table. testdata/oracle.csv holds the best
// fixed level θ* per constant load: the highest level on a 0.05 grid that
// keeps ≥ 99 % in time (p99 stays under target at every level: the gate
// holds it), over seeds 1000–1019, 300 s runs, the first minute not
// counted (TestLabOracle re-checks it; -update-oracle sweeps it again).
// Beside it, this controller on the same runs:
//
//	load  θ*    θ* in time  controller in time  controller optional
//	  90  0.80  99.10 %     99.40 %             0.466
//	 100  0.60  99.08 %     99.33 %             0.304
//	 110  0.40  99.23 %     99.30 %             0.203
//	 120  0.25  99.33 %     99.22 %             0.129
//	 130  0.15  99.24 %     99.12 %             0.082
//	 140  0.05  99.26 %     98.94 %             0.047
//	 150  none  98.91 % (θ = 0)  98.28 %        0.024
//
// At constant load the level cycles (9–12 reversals in 240 s, from full
// to off): a probe up, a burst of refusals, a fall to 0, a wait. A fixed
// level serves up to twice the optional content at the same in-time share.
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
// once, from the cap, and when the window closes the law goes on from the
// cap as from any dimmed state — it brightens only when it would
// (pressure under Low for Hold), at most MaxRise a second, and load-aware
// if it dimmed during the window — instead of jumping to where it was. A
// cap that takes a law at full brightness down is not a dimming of the
// law's: it sets no load mark.
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
//	in time, arrivals of the first 1 s     43.3 %        49.1 %
//	in time, first 3 s                     57.3 %        59.7 %
//	in time, first 10 s                    64.6 %        65.4 %
//	p99 of the first 10 s                  254 ms        267 ms
//	largest one-second p99 in them         289 ms        295 ms
//	whole run: in time                     89.7 %        89.8 %
//	whole run: optional parts served       13.3 %        11.1 %
//
// The spike is 2.5 times the capacity, and the law dims every feature to
// its floor at its first tick after it, so the cap helps in that first
// second only: 49 % instead of 43 % of its arrivals served in time
// (better for each seed), and 3 s after the spike the two runs are alike.
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
// brightness (and with it the shed level), the load mark, the freeze,
// shadow mode and the pins on features that still exist stay; pins on
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
//	go c.Run(ctx, dimmer.Local(recorder)) // or a signals.ScrapeSource
//	...
//	if lvl, _ := c.State().Level("recommendations", ""); lvl > 0 { … }
//
// Every exported method is safe for concurrent use.
package dimmer

// Package sim is a deterministic discrete-event lab: open-loop load against
// a simulated server in virtual time, driven through the same small
// interfaces the production admission middleware and brownout controller
// implement, so that the code under test is the code that runs.
//
// # The sources' simulators
//
// [Seeds] returns ports of the three JavaScript simulators the sources quote
// (overload policies, CoDel vs tail drop, the retry storm). They print byte
// for byte what the JavaScript prints: the same Mulberry32 generator, the
// same order of draws, V8's logarithm (fdlibm's, [jsLog]; Go's math.Log
// differs in the last bit on about 1 % of inputs) and JavaScript's toFixed
// rounding (ties away from zero on the exact binary value).
//
// # The lab
//
// A [Config] describes one run:
//
//   - load: an open-loop [Profile] of new requests per second ([Constant],
//     [Steps], [Ramp], [Burst], the 11.11 [Midnight] spike, the periodic
//     [Sine] and [Square]); Poisson arrivals at the current rate;
//   - traffic: a [ClassMix] per priority class, each with a cost and the
//     extra cost of its optional parts;
//   - server: workers, a mean service time per cost unit (exponential), and
//     a capacity that can dip ([Dip]); work for clients that already left
//     is done anyway, and wasted, as in a real server;
//   - dependencies: a [Dependency] that a kind of request calls while it
//     holds its worker, whose latency can slow down ([Slowdown]), bounded
//     by a timeout and skipped while a breaker is open;
//   - clients: a timeout and a [RetryPolicy] (immediate, backoff with full
//     jitter, a retry budget);
//   - policies: an [Admission] (admission control and queue discipline: the
//     sources' [Limits] and [CoDel], and package shed's gate, [NewShed],
//     whose adaptive limit is told nothing about the server's workers;
//     [NewShedFixed] is the fixed-limit reference) and a [Dimmer] (the
//     brownout controller: package dimmer's, through [NewController], or
//     fixed levels with [Static]) that steps every Tick on a real
//     signals.Recorder fed in virtual time.
//
// [Run] returns a per-second series ([Second]: arrivals, good answers,
// refusals by class, drops, p99, sojourn, dimmer level, optional share) and
// a [Summary] in the sources' terms (good/s, p99, refused, critical ok,
// optional served, load amplification, recovery time). Every attempt ends
// served, refused, dropped or still in the system: the tests check that
// conservation for every policy.
//
// Runs are deterministic: separate Mulberry32 streams for arrivals, service
// times and client jitter, seeded from Config.Seed, so two policies given
// the same seed see the same users arrive at the same moments (common
// random numbers), and event ties break by scheduling order.
//
// # Parts with true costs
//
// With Config.Parts a request has one optional [Part] per dimmer feature
// instead of one block, each with its own TRUE cost (in units of the
// mandatory cost) and its own level (Dim.Levels, passed by feature name by
// [Controller]), decided per user by the provider's sticky bucketing
// (provider.On, the part's name as flag key). Each tick the Dimmer's
// snapshot carries a signals.Tally per part: the on/off service times of
// the requests completed in the tick, as production tallies them. The
// dimmer's configured costs are then only what it believes, so that a
// learned cost can be tested against the lab's truth. [Reference] is the
// Dimmer told the truth (load, true costs, capacity): it holds the
// predicted utilisation at a set point ([SweepRho] picks one), and
// [NewOracle] the per-second best fixed level θ*(λ(t)) at each second's
// arrival rate; [Sine] and [Square] are the periodic loads they are run
// on ([BrownoutPartsLab]).
//
// Named experiments are [Scenario]s (overload-sweep, burst, capacity-dip,
// sale, brownout, dependency-slowdown), run by
// `brownout-lab run --scenario NAME`.
//
// Nothing in the package is safe for concurrent use except running
// independent Configs in parallel; Admission and Dimmer values hold state,
// so give each run its own.
package sim

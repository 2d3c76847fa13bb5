// Package provider exposes the brownout controller to applications through
// OpenFeature (github.com/open-feature/go-sdk): apps ask ordinary
// feature-flag questions — "show recommendations to this user?" — and get
// answers driven by the dimmer.
//
// # Flags
//
// For every feature of the controller's ladder:
//
//   - "<feature>" (boolean): on or off for this evaluation, sticky per
//     targeting key. The user is on when
//     bucket = (uint64(murmur3(flagKey+targetingKey)) × 10000) >> 32 is
//     below round(level × 10000): flagd's fractional bucketing (flagd core
//     ≥ v0.15), so a user lands in the same bucket as under flagd, and
//     raising the level only ever adds users. Reason SPLIT, variant "on" or
//     "off".
//   - "<feature>.level" (float): the level itself, for graded degradation
//     (show 10 × level items). Reason TARGETING_MATCH.
//
// And one for all of them: "brownout.features" (FeaturesFlag, object): a
// map of every feature's name to its boolean answer for this user, the
// same answers and counters as the boolean flags. A page that shows
// several optional parts asks once: each SDK evaluation costs about
// 1.5 µs of context merging and copying before the provider is reached
// (BenchmarkSDKClient, also for the SDK's own in-memory provider), twenty
// times the provider's own work.
//
// Neither is ever STATIC: caching providers and SDKs would cache it, and a
// brownout level changes by the second.
//
// Without a targeting key the boolean flag takes a fresh random draw per
// evaluation (on with probability level; metadata sticky=false), so the
// share of users served still follows the level; with
// Options.RequireTargetingKey it fails with TARGETING_KEY_MISSING instead.
// An unknown key is FLAG_NOT_FOUND, a known key asked as the wrong type
// TYPE_MISMATCH.
//
// The evaluation-context attribute "segment" (Options.SegmentAttribute)
// selects the controller's per-segment levels (VIP users, users in
// checkout).
//
// Flag metadata carries level, generation, mode (auto, override, shadow,
// stale, frozen, scheduled), reason (e.g. "latency.p99 1.3s > 1s target:
// dimming recommendations", an operator's pin reason, or the reason of the
// scheduled cap that holds the feature down) and sticky. The metadata
// maps are built once per published state and shared, read-only, by every
// evaluation of it, so evaluating does not allocate.
//
// # Events
//
// After Init the provider follows the controller: each published change
// becomes PROVIDER_CONFIGURATION_CHANGED with FlagChanges naming the flags
// whose answers may differ; stale signals become PROVIDER_STALE and their
// return PROVIDER_READY. The controller is never blocked: its subscription
// keeps only the newest state, so a slow event reader sees coalesced
// changes. EventChannel returns the same channel on every call.
//
// # Metrics
//
// Evaluations are counted by flag and variant (per-processor counters on
// the request path) and exported as brownout_flag_evaluations_total when
// Options.Registerer is set: "optional content served" is the on share.
//
// # Feature tallies
//
// When the context of a boolean evaluation (or of FeaturesFlag's) carries
// a request's feature tally — the middlewares of packages signals and shed
// put one in each request's context while features are registered on
// their Recorder (signals.Recorder.Features) — the answer is marked in it
// (signals.Evaluated), and the request's service time then counts as the
// feature's on or off: a per-request contrast the controller reads as the
// feature's cost (signals.Tally). Evaluate with the request's context (or
// one derived from it). An evaluation without a tally counts as
// unattributed, never as off, when Options.Recorder is set. An app that
// evaluates a flag but does not render the feature says so with
// signals.Skipped, one that renders without asking with signals.Rendered;
// the app's word wins over the provider's marks.
//
// # Remote
//
// For apps that follow brownoutd instead of running a controller,
// NewRemote returns a Source that follows the daemon's /v1/stream; a
// Provider over it (New(remote, …)) evaluates locally with the same code —
// no round trip per evaluation, never a blocked one. While the daemon is
// away the last-known levels hold, marked stale (PROVIDER_STALE); after
// RemoteOptions.StaleTTL every feature takes its default (fail open or
// closed, as the daemon publishes or the options say); the daemon's return
// is PROVIDER_READY, also after a restart (another boot epoch). Reconnects
// back off exponentially with full jitter; a stalled or garbled stream is
// dropped. RemoteOptions.StateFile keeps the last-known levels across app
// restarts. Before the daemon was ever heard, the features
// RemoteOptions.Features lists (and those Defaults names) answer with
// their defaults — on unless Defaults says off — marked stale. Remote.ShedSeed is the seed the daemon publishes in its
// stream for the cascade's choice of clients (dimmer.ShedSeed): give it
// to shed.Config.ShedSeed, and every instance sheds the same users.
//
// On a daemon of several services (brownoutd's services:), a Remote
// follows one: RemoteOptions.Service names it (or the URL is the
// service's, http://brownoutd:8080/services/{name}). An app of several
// services runs a Remote and a Provider for each and registers each
// under an OpenFeature domain (openfeature.SetNamedProvider(name, p));
// openfeature.NewClient(name) then asks that service's flags.
//
// # Replicas
//
// RemoteOptions.URLs lists the replicas of one daemon (brownoutd in HA:
// one leads the control loop, every one answers reads from the leader's
// published state, with one boot epoch for the cluster). The Remote
// follows one replica at a time:
//
//   - At start it picks one at random, so that a fleet's streams spread
//     over the replicas and no replica's death moves them all.
//   - When its stream fails to connect, is refused (5xx, 401/403), ends,
//     stalls (ReadTimeout) or lags, it tries the next replica in the
//     order given whose last connection did not fail (else the next),
//     after the same full-jitter backoff as with one URL, reset by a
//     connection that followed: leaving a dead replica costs at most
//     2 × MinBackoff and a connection, and a fleet's streams reach the
//     next replica spread over that window, not at once. With every
//     replica down they are tried in turn, one attempt per wait, the
//     waits growing to MaxBackoff.
//   - Every replica's stream carries, besides the states, a tick event
//     per control tick (the leader's, relayed by every replica) and a
//     replica event per tick, sent by the replica's own API loop, which
//     says whether it is current — it leads, or the lease it last read
//     from the store holds — and the lease (api.ReplicaJSON).
//   - A replica lags when, for the lease it announces (3 s by default;
//     LagTimeout when set; 10 s for a daemon that announces none), it
//     gives no news: no state at least as new as the one held, no tick
//     event of at least that generation, no replica event saying it is
//     current. A stopped process (SIGSTOP, a frozen VM: its connection
//     open, nothing sent) is so left a lease after its last word, which
//     is about when the replicas replace a stopped leader: an app is
//     never in the dark much longer than the failover. A change of leader
//     moves no stream: the other replicas stay current until the dead
//     leader's lease ends, and the new one commits a few milliseconds
//     later. With one URL — replicas behind a load balancer — the rule
//     holds once the daemon sends replica events: the reconnection
//     reaches another replica.
//   - While the replica followed says it is not current (a change of
//     leader under way, or it lost its store), the levels held are
//     marked stale (PROVIDER_STALE); its next word that it is current,
//     or a tick relayed from a leader, makes them fresh again. Left for
//     another at the lease if that does not come; with every replica in
//     that state (the store out of reach of all), they are tried in turn,
//     the waits growing, the levels held stale.
//   - Generations never go back: a state of the boot epoch held with a
//     lower generation (a replica behind) is never taken, and the replica
//     is left at the lease if it does not catch up. A state of another
//     epoch is a restart (or another daemon), followed as with one URL.
//   - Every stream starts with the full state, so a switch costs one
//     state event — the stream's refetch — and never a wrong answer. The
//     reconnection's Last-Event-ID ("<epoch>-<generation>") is sent to
//     whichever replica, since in HA the epoch is the cluster's. This
//     package keeps no OFREP ETag cache: the stream is its cache.
//
// Health reports the link whichever replica it is with (OK while one is
// followed; Name lists every URL); HealthByURL reports each replica's
// (OK for the one followed); Following names the one followed now. The
// evaluation path does not change: it reads the state held, whichever
// replica it came from (BenchmarkRemoteEvaluation: urls=1 and urls=3 run
// alike, no allocation).
//
// Remote.Health reports the link (a signals.SourceHealth, as the daemon's
// sources report theirs). A daemon that refuses the token (401 or 403) is
// ErrUnauthorized: said once in the log, at WARN, with the URL and what
// to fix, and shown in Health until a state arrives again; the log has a
// line for each change of the link, never one per reconnection attempt.
//
// # Usage
//
//	p, _ := provider.New(controller, provider.Options{Registerer: reg})
//	openfeature.SetProviderAndWait(p)
//	client := openfeature.NewClient("shop")
//	ec := openfeature.NewEvaluationContext(userID, map[string]any{"segment": "vip"})
//	if on, _ := client.BooleanValue(ctx, "recommendations", true, ec); on { … }
//
// The default value passed to the SDK decides failure behaviour: true fails
// open (features stay when no answer comes), false fails closed.
//
// A Provider is safe for concurrent use.
package provider

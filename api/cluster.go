package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Replicas. Several brownoutd processes may serve one service from a
// store they share (brownoutd serve --store, package internal/cluster):
// one of them leads the control loop, and every one serves this API from
// the state the leader published, adopted into its own controller. For
// them the API takes from Config:
//
//   - Epoch and Secret, the cluster's rather than the process's, so that
//     the ETags, stream ids and stream tokens one replica gave are good at
//     another (a failover is not a restart to clients);
//   - Store, which keeps the operators' state and the events in place of
//     the state file: a write is recorded there (503 when it cannot be),
//     and the leader applies it within a tick; the write's answer waits
//     for this replica to serve it (Store.Applied), and says so;
//   - Cluster, what /v1/state says of the replicas (the dial shows it).
//
// The replica runs Mirror in place of Run, and feeds the API what the
// leader recorded: AddPoint (history), AddEvents (events, numbered by the
// store), SetOperators (the freeze and shadow flags).

// Store keeps the operators' state and the events where several replicas
// share them. Its methods are called from request handlers, concurrently.
type Store interface {
	// Change records c with its audit event, durably, and returns the
	// version of the operators' state it made (and an override's end).
	// It fails with ErrStoreDown when the store cannot be reached, and
	// with dimmer.ErrNotPinned for a release of no override.
	Change(ctx context.Context, c Change) (ChangeResult, error)
	// Applied waits until this replica serves a state that includes
	// version v of the operators' state, and returns that state's
	// generation; it returns ctx's error when ctx ends first.
	Applied(ctx context.Context, v uint64) (uint64, error)
	// Note records an event that is not an operator's write (a reload).
	Note(ctx context.Context, e Event) error
}

// Change is an operator's write as a Store records it.
type Change struct {
	// Kind is "override", "release", "freeze", "unfreeze" or "shadow".
	Kind    string
	Feature string        // override, release
	Level   float64       // override
	TTL     time.Duration // override
	On      bool          // shadow
	// Who, What and Reason are the audit's: the token's name, what was
	// done, and the operator's words.
	Who, What, Reason string
}

// ChangeResult is what a Store says of a recorded Change.
type ChangeResult struct {
	Version uint64
	// Until is an override's end, on the store's clock.
	Until time.Time
}

// ErrStoreDown: the store cannot be reached; the write was not recorded.
var ErrStoreDown = errors.New("api: the store cannot be reached")

// ClusterJSON is what /v1/state says of the replicas ("cluster", absent
// for a lone daemon).
type ClusterJSON struct {
	// Replica is this process's name; Role "leader", "follower", or
	// "stale": no leader known (the store is unreachable and this
	// replica's lease, if it led, ran out): the levels are held.
	Replica string `json:"replica"`
	Role    string `json:"role"`
	// Leader is the replica that leads, its term and since when.
	Leader      string    `json:"leader,omitempty"`
	Term        uint64    `json:"term"`
	LeaderSince time.Time `json:"leader_since,omitzero"`
	// Store is "ok" or why the store cannot be reached.
	Store string `json:"store"`
	// ConfigMismatch names the replicas whose configuration differs from
	// the leader's (the leader's wins; see docs/brownoutd.md).
	ConfigMismatch []string `json:"config_mismatch,omitempty"`
	// Current says that this replica knows of a leader whose lease
	// holds: it leads, or the lease it last read from the store has not
	// ended. A current replica serves the newest committed state, or
	// one a tick behind it; one that cannot reach the store, that was
	// paused, or that waits out a dead leader's lease is not current.
	Current bool `json:"current"`
	// LeaseSeconds is the lease's length: how long the replicas wait for
	// a silent leader before one takes over, and so how long an app
	// waits for a silent replica before it follows another.
	LeaseSeconds float64 `json:"lease_seconds"`
}

// A replica's /v1/stream carries, besides the states and the ticks, a
// "replica" event every tick: its ClusterJSON and the generation it
// serves. It is sent by the replica's own API loop (Mirror), whatever its
// control loop is doing, and before the state on connect: an app that
// follows the replica knows that it is alive — a stopped process sends
// nothing — and whether what it serves is current (ClusterJSON.Current).
// The remote provider leaves a replica that gives no such news for a
// lease, and marks its levels stale while the replica says it is not
// current (provider.RemoteOptions.URLs).

// ReplicaJSON is a "replica" event's data.
type ReplicaJSON struct {
	V int `json:"v"`
	*ClusterJSON
	// Generation is the generation this replica serves.
	Generation uint64 `json:"generation"`
}

// replicaEvent encodes this replica's "replica" event; nil for a lone
// daemon.
func (a *API) replicaEvent() []byte {
	if a.cfg.Cluster == nil {
		return nil
	}
	c := a.cfg.Cluster()
	if c == nil {
		return nil
	}
	return sse("", "replica", marshal(ReplicaJSON{V: Version, ClusterJSON: c, Generation: a.ctl.State().Generation}))
}

// storeTimeout bounds a write's round trip to the store: past it the
// write answers 503 (a store that hangs must not hang the operator).
const storeTimeout = 3 * time.Second

// applyWait is how many ticks a write's answer waits for this replica to
// serve it: the leader applies a write at its next commit (at once when
// the store tells it, else at its next tick), and a follower adopts it as
// soon as the leader committed.
const applyWait = 3

// stored records an operator's change in the store and answers: 503 when
// the store cannot be reached; else 200 once this replica serves it, or
// 202 when it does not yet (no leader at the moment: it will apply it
// when there is one). answer gives the body's own fields.
func (a *API) stored(w http.ResponseWriter, r *http.Request, c Change, answer func(ChangeResult) map[string]any) {
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	res, err := a.cfg.Store.Change(ctx, c)
	cancel()
	if err != nil {
		a.storeFailed(w, err)
		return
	}
	a.log.Info("brownout: operator change", "who", c.Who, "what", c.Kind, "feature", c.Feature, "detail", c.What, "reason", c.Reason, "version", res.Version)
	ctx, cancel = context.WithTimeout(r.Context(), applyWait*a.ctl.Config().Tick)
	gen, err := a.cfg.Store.Applied(ctx, res.Version)
	cancel()
	body := answer(res)
	body["v"], body["saved"], body["applied"] = Version, true, err == nil
	status := http.StatusOK
	if err != nil {
		gen, status = a.ctl.State().Generation, http.StatusAccepted
		body["detail"] = "recorded in the store; the leader applies it when one leads (none did within " + (applyWait * a.ctl.Config().Tick).String() + ")"
	}
	body["generation"] = gen
	writeJSON(w, status, body)
}

// storeFailed answers a write the store did not record.
func (a *API) storeFailed(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrStoreDown), errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusServiceUnavailable, "store-unavailable",
			"the store that keeps the operators' state cannot be reached: nothing was changed; the levels hold and reads still answer; retry when it is back ("+err.Error()+")")
	default:
		pinStatus(w, err)
	}
}

// Mirror is Run for a replica whose controller another process steps
// (package internal/cluster adopts the leader's states into it): it sends
// the controller's published states to the streams and, with
// Config.Cluster, a "replica" event every tick, until ctx ends. Record
// the leader's ticks with AddPoint.
func (a *API) Mirror(ctx context.Context) error {
	var ticks <-chan time.Time
	if a.cfg.Cluster != nil {
		t := time.NewTicker(a.ctl.Config().Tick)
		defer t.Stop()
		ticks = t.C
	}
	return a.loop(ctx, ticks, nil, func(time.Time) {
		if a.streams.count() > 0 {
			if b := a.replicaEvent(); b != nil {
				a.streams.send(kindReplica, b)
			}
		}
	})
}

// AddPoint keeps a tick recorded elsewhere (the leader's) for
// /v1/history and sends it to the streams; lag is this process's own.
func (a *API) AddPoint(p Point, lag time.Duration) {
	a.hist.add(p, lag)
	a.ticked(p)
}

// LastPoint returns the time of the newest tick kept (zero: none).
func (a *API) LastPoint() time.Time {
	a.hist.mu.Lock()
	defer a.hist.mu.Unlock()
	i := a.hist.next - 1
	if i < 0 {
		if !a.hist.full {
			return time.Time{}
		}
		i = len(a.hist.ring) - 1
	}
	return a.hist.ring[i].t
}

// AddEvents keeps events numbered by a store, in order of Seq; those at
// or below the last Seq kept are dropped.
func (a *API) AddEvents(es []Event) { a.events.put(es) }

// LastEvent returns the Seq of the newest event kept.
func (a *API) LastEvent() uint64 {
	a.events.mu.Lock()
	defer a.events.mu.Unlock()
	return a.events.seq
}

// SetOperators sets the operators' freeze and shadow flags as /v1/state
// shows them (a replica: as the leader applied them).
func (a *API) SetOperators(frozen bool, freezeReason string, shadow bool) {
	a.mu.Lock()
	a.mu.frozen, a.mu.freezeReason, a.mu.shadow = frozen, freezeReason, shadow
	a.mu.Unlock()
}

// OperatorState is the operators' state as a state file keeps it
// (StateDir/operator.json), for an import into a store.
type OperatorState struct {
	Frozen       bool
	FreezeReason string
	Shadow       bool
	Overrides    []OperatorOverride
}

// OperatorOverride is an override in an OperatorState.
type OperatorOverride struct {
	Feature string
	Level   float64
	Until   time.Time
	Reason  string
}

// ReadStateFile reads a state file (operator.json) of this version.
func ReadStateFile(path string) (OperatorState, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return OperatorState{}, fmt.Errorf("api: state file: %w", err)
	}
	var f opFile
	if err := json.Unmarshal(b, &f); err != nil {
		return OperatorState{}, fmt.Errorf("api: state file %s: %w", path, err)
	}
	if f.V != Version {
		return OperatorState{}, fmt.Errorf("api: state file %s: version %d, want %d", path, f.V, Version)
	}
	out := OperatorState{Frozen: f.Frozen, FreezeReason: f.FreezeReason, Shadow: f.Shadow}
	for _, o := range f.Overrides {
		out.Overrides = append(out.Overrides, OperatorOverride{Feature: o.Feature, Level: o.Level, Until: o.Until, Reason: o.Reason})
	}
	return out, nil
}

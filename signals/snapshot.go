package signals

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Key names one scalar signal of a Snapshot. Durations are in seconds and
// rates in events per second (base units).
type Key uint8

const (
	LatencyP50      Key = iota // latency.p50: median request latency
	LatencyP90                 // latency.p90
	LatencyP99                 // latency.p99
	LatencyP999                // latency.p999
	LatencyMean                // latency.mean
	LatencyMax                 // latency.max
	SojournMin                 // sojourn.min: worst class's minimum sojourn over the last CoDel interval
	SojournP99                 // sojourn.p99: worst class's p99 sojourn
	SojournMax                 // sojourn.max
	InFlight                   // inflight: requests being worked on
	ArrivalRate                // rate.arrival: arrivals per second
	Throughput                 // rate.throughput: completions per second
	Goodput                    // rate.goodput: good completions (in time, not failed) per second
	RejectRate                 // rate.reject: rejections per second
	ErrorRatio                 // error.ratio: failed / completed
	RejectRatio                // reject.ratio: refusals for overload (max wait, CoDel, deadline, concurrency) / arrivals
	GateBusy                   // gate.busy: share of the arrivals at the admission gate since the last snapshot that found no room (waited or were refused); only with a gate
	GateUtilization            // gate.utilization: cost in flight ÷ the gate's concurrency limit
	GateQueued                 // gate.queued: requests waiting at the gate
	GateLimit                  // gate.limit: the gate's concurrency limit, in cost units
	NumKeys
)

var keyNames = [NumKeys]string{
	"latency.p50", "latency.p90", "latency.p99", "latency.p999", "latency.mean", "latency.max",
	"sojourn.min", "sojourn.p99", "sojourn.max", "inflight",
	"rate.arrival", "rate.throughput", "rate.goodput", "rate.reject", "error.ratio", "reject.ratio",
	"gate.busy", "gate.utilization", "gate.queued", "gate.limit",
}

func (k Key) String() string {
	if k < NumKeys {
		return keyNames[k]
	}
	return fmt.Sprintf("key(%d)", uint8(k))
}

// Unit is what a signal's values measure.
type Unit uint8

const (
	UnitSeconds   Unit = iota // durations
	UnitRatio                 // shares from 0 to 1
	UnitPerSecond             // rates
	UnitCount                 // counts, and the gate's limit in cost units
)

// Unit returns the unit of k's values.
func (k Key) Unit() Unit {
	switch k {
	case InFlight, GateQueued, GateLimit:
		return UnitCount
	case ArrivalRate, Throughput, Goodput, RejectRate:
		return UnitPerSecond
	case ErrorRatio, RejectRatio, GateBusy, GateUtilization:
		return UnitRatio
	}
	return UnitSeconds
}

// IsDuration reports whether the key's values are durations in seconds.
func (k Key) IsDuration() bool { return k <= SojournMax }

// ParseKey parses a key name such as "latency.p99".
func ParseKey(s string) (Key, error) {
	for i, n := range keyNames {
		if s == n {
			return Key(i), nil
		}
	}
	return 0, fmt.Errorf("signals: unknown signal %q (known: %s)", truncate(s), strings.Join(keyNames[:], ", "))
}

// Snapshot is everything the controller reads at one moment: scalar signals
// by Key, each present or missing, and the per-class counts of the window.
// A signal that could not be measured (an empty window, a source that
// failed) is missing, never zero.
//
// The zero value has every signal missing. Snapshot is a value type; copy it
// freely.
type Snapshot struct {
	// Time is when the snapshot was taken, Window how far back it looks.
	Time   time.Time
	Window time.Duration
	// Source names where the snapshot came from ("local", a scrape target
	// list, a Prometheus URL) for messages.
	Source string
	// Classes holds the counts of the window by class; ClassesOK is false
	// when the source does not provide them.
	Classes   [NumClasses]ClassCounts
	ClassesOK bool
	// Standing reports a standing queue (CoDel) in any class.
	Standing bool
	// Tallies holds each feature's on/off contrast since the source's
	// previous snapshot (a Recorder's; the fleet's push and scrape
	// sources: each instance's latest interval, as Recent), when the
	// source provides them (see Tally). The slice may be shared with
	// the source: it is valid until the source's next snapshot.
	Tallies []Tally
	// Work holds the service times of every request the source tallied
	// (once a feature is registered, every request through the
	// middlewares), whether it evaluated a feature or not, over the same
	// time as Tallies: with the arrivals, the work the load brings. A
	// feature's tally counts only the requests that evaluated it. Zero
	// when the source does not provide it.
	Work Moments
	// Recent holds the counts of every class since the source's previous
	// snapshot, RecentSpan ago: what a period brought, where the window's
	// rates average several. RecentSpan is zero when the source does not
	// provide them (the first snapshot). The fleet's push and scrape
	// sources give each instance's latest interval (between its last two
	// readings), summed, the PromQL source the fleet's latest whole
	// period: two snapshots taken within one interval report it twice.
	Recent     ClassCounts
	RecentSpan time.Duration
	// RecentAt is when the interval in Recent ended, as the source timed
	// it (its latest reading): two snapshots with the same RecentAt report
	// the same interval, as a daemon that ticks faster than its instances
	// push sees it. Where instances push at different times, RecentAt
	// moves at each push while each instance's interval stays in Recent
	// until its next: a whole new interval of the fleet has come once
	// RecentAt moved by about RecentSpan. Zero when the source does not
	// say.
	RecentAt time.Time
	// Instances is how many instances, each with a queue of its own, the
	// snapshot sums, weighted by their shares of the window's arrivals:
	// (Σλᵢ)²/Σλᵢ², N for a fleet of N instances that share the load
	// evenly, near 1 where one takes nearly all of it. A queue's wait
	// calls for idle servers in each instance that carries load, so a
	// fleet of N needs N times one's (dimmer's model law). Set by the
	// fleet's push, scrape and PromQL sources (PromQL's over its latest
	// period, by instance and job); 0 where the source does not say, taken
	// as one queue: a process's own Recorder.
	Instances float64

	values  [NumKeys]float64
	present uint32
}

// Get returns the value of k and whether it is present.
func (s Snapshot) Get(k Key) (float64, bool) {
	if k >= NumKeys || s.present&(1<<k) == 0 {
		return 0, false
	}
	return s.values[k], true
}

// Duration returns the value of a duration key.
func (s Snapshot) Duration(k Key) (time.Duration, bool) {
	v, ok := s.Get(k)
	if !ok || !k.IsDuration() {
		return 0, false
	}
	return time.Duration(v * float64(time.Second)), true
}

// Has reports whether k is present.
func (s Snapshot) Has(k Key) bool { return k < NumKeys && s.present&(1<<k) != 0 }

// Set stores v under k. NaN and ±Inf are refused (the key stays missing)
// and Set returns false.
func (s *Snapshot) Set(k Key, v float64) bool {
	if k >= NumKeys || math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	s.values[k] = v
	s.present |= 1 << k
	return true
}

// SetDuration stores d, in seconds, under k.
func (s *Snapshot) SetDuration(k Key, d time.Duration) bool { return s.Set(k, d.Seconds()) }

// Clear marks k missing.
func (s *Snapshot) Clear(k Key) {
	if k < NumKeys {
		s.present &^= 1 << k
		s.values[k] = 0
	}
}

// Missing returns the keys that are not present.
func (s Snapshot) Missing() []Key {
	var out []Key
	for k := range NumKeys {
		if !s.Has(k) {
			out = append(out, k)
		}
	}
	return out
}

// Empty reports whether no key is present.
func (s Snapshot) Empty() bool { return s.present == 0 }

// String renders the present signals, e.g. for logs.
func (s Snapshot) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s window=%s", s.Source, s.Time.Format(time.RFC3339Nano), s.Window)
	for k := range NumKeys {
		v, ok := s.Get(k)
		switch {
		case !ok:
			fmt.Fprintf(&b, " %s=missing", k)
		case k.IsDuration():
			fmt.Fprintf(&b, " %s=%s", k, time.Duration(v*float64(time.Second)).Round(time.Microsecond))
		default:
			fmt.Fprintf(&b, " %s=%.4g", k, v)
		}
	}
	return b.String()
}

package signals

import "time"

// SourceHealth is how a signal source is doing, for a status page or a
// metric: package fleet's ScrapeSource, PromQLSource and PushSource
// report it with their Health method, and so do an app's links to its
// daemon in fleet mode (fleet.Pusher, provider.Remote). Times are by the
// source's clock (the now of its last Snapshot for the sources that read
// on demand; arrival for pushes).
//
// SourceHealth is a plain value; its zero value is a source that never
// got signals.
type SourceHealth struct {
	// Name is the source's Name.
	Name string `json:"name"`
	// OK is true when the source's signals are flowing: the last Snapshot
	// had no error (scrape, PromQL), or at least one instance is live
	// (push).
	OK bool `json:"ok"`
	// LastSuccess is when the source last got signals: the last Snapshot
	// without error, or the last accepted push. Zero if never.
	LastSuccess time.Time `json:"last_success,omitzero"`
	// LastError is the most recent failure (kept after recovery; compare
	// LastErrorAt with LastSuccess), and Errors counts them: failed
	// Snapshots, or refused pushes.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Errors      uint64    `json:"errors"`
	// Instances are the scrape targets or the pushing instances, by name.
	// PromQLSource has none.
	Instances []InstanceHealth `json:"instances,omitempty"`
}

// InstanceHealth is one scrape target or pushing instance, a plain value.
type InstanceHealth struct {
	// Name is the target's URL or the instance's id.
	Name string `json:"name"`
	// OK: the last scrape had no error, or the instance is live (it pushed
	// within the source's Expire).
	OK bool `json:"ok"`
	// LastSeen is the last scrape that gave signals, or the last accepted
	// push. Zero if never.
	LastSeen time.Time `json:"last_seen,omitzero"`
	// LastError is the target's last scrape error, or the instance's last
	// refused push since its last accepted one; empty when there is none.
	LastError string `json:"last_error,omitempty"`
}

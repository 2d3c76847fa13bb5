package provider

import (
	"testing"

	"github.com/brownout/brownout/dimmer"
)

// FuzzRemoteState: whatever a daemon sends as a state event, the
// follower never panics, and a state it takes is within a valid daemon's
// bounds and evaluates.
func FuzzRemoteState(f *testing.F) {
	f.Add(`{"v":1,"boot":1,"generation":5,"mode":"auto","reason":"r","segment_names":["vip"],"features":[{"name":"a","level":0.5,"segments":{"vip":0.7},"override":{"level":0.5,"reason":"x"}}]}`)
	f.Add(`{"v":1,"features":null,"segment_names":null}`)
	f.Add(`{"v":1,"features":[{"name":"a","level":1,"segments":{"a":1,"a":0}}]}`)
	f.Add(`{"v":1,"features":{"name":"a"}}`)
	f.Fuzz(func(t *testing.T, data string) {
		r, err := NewRemote(RemoteOptions{URL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.apply(0, "", data); err != nil {
			return
		}
		st := r.State()
		if st.NumFeatures() > dimmer.MaxFeatures || st.NumSegments() > dimmer.MaxSegments {
			t.Fatalf("took %d features, %d segments", st.NumFeatures(), st.NumSegments())
		}
		p, err := New(r, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range st.NumFeatures() {
			p.metadata(st, i, st.NumSegments()-1, true)
		}
	})
}

// FuzzReplicaEvent: whatever a replica event says, the follower never
// panics, takes a lease within its bounds, and never changes the levels
// held: a replica's word marks them stale or fresh, nothing more.
func FuzzReplicaEvent(f *testing.F) {
	f.Add(`{"v":1,"replica":"b","role":"follower","leader":"a","term":3,"current":true,"lease_seconds":3,"generation":5}`)
	f.Add(`{"v":1,"replica":"b","current":false,"lease_seconds":1e308,"generation":0}`)
	f.Add(`{"current":true,"lease_seconds":-1}`)
	f.Add(`{"lease_seconds":"3s"}`)
	f.Fuzz(func(t *testing.T, data string) {
		r, err := NewRemote(RemoteOptions{URL: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.apply(0, "", `{"v":1,"boot":1,"generation":5,"mode":"auto","features":[{"name":"a","level":0.5}]}`); err != nil {
			t.Fatal(err)
		}
		r.replicaSaid(data)
		r.mu.Lock()
		lease := r.mu.lease
		r.mu.Unlock()
		if lease != 0 && (lease < minLease || lease > r.o.ReadTimeout) {
			t.Fatalf("took a lease of %v", lease)
		}
		if l := r.State().LevelAt(0, -1); l != 0.5 {
			t.Fatalf("the level held changed to %v", l)
		}
	})
}

package api

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/brownout/brownout/dimmer"
)

// Event is an entry of /v1/events: an operator's change, a mode change,
// a stale period, a big level move.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Feature string    `json:"feature,omitempty"`
	Who     string    `json:"who,omitempty"`
	What    string    `json:"what"`
	Reason  string    `json:"reason,omitempty"`
}

type eventLog struct {
	mu   sync.Mutex
	ring []Event
	seq  uint64
}

func newEventLog(n int) *eventLog { return &eventLog{ring: make([]Event, 0, n)} }

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	e.Seq = l.seq
	if len(l.ring) == cap(l.ring) {
		copy(l.ring, l.ring[1:])
		l.ring = l.ring[:len(l.ring)-1]
	}
	l.ring = append(l.ring, e)
}

// put adds events numbered elsewhere (a store's), in order; an event
// at or below the last seq kept is dropped.
func (l *eventLog) put(es []Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range es {
		if e.Seq <= l.seq {
			continue
		}
		l.seq = e.Seq
		if len(l.ring) == cap(l.ring) {
			copy(l.ring, l.ring[1:])
			l.ring = l.ring[:len(l.ring)-1]
		}
		l.ring = append(l.ring, e)
	}
}

func (l *eventLog) since(seq uint64) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []Event{}
	for _, e := range l.ring {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out
}

// BigMove is the level change that makes an event.
const BigMove = 0.2

// noteChange records the events between two published states (Changes).
func (a *API) noteChange(prev, st *dimmer.State) {
	for _, e := range Changes(prev, st) {
		a.events.add(e)
	}
}

// Changes returns the events between two published states: mode changes
// (stale periods among them) and big level moves. Their Seq is 0.
func Changes(prev, st *dimmer.State) []Event {
	var out []Event
	if st.Mode != prev.Mode {
		kind := "mode"
		switch {
		case st.Mode == dimmer.Stale:
			kind = "stale"
		case prev.Mode == dimmer.Stale && st.Mode == dimmer.Auto:
			// The law runs again: the signals are fresh. Stale to
			// frozen or shadow is an operator's mode taking over, the
			// signals as stale as they were.
			kind = "fresh"
		}
		out = append(out, Event{Time: st.Time, Kind: kind, What: fmt.Sprintf("mode %s → %s", prev.Mode, st.Mode), Reason: st.Reason})
	}
	for i := range min(st.NumFeatures(), prev.NumFeatures()) {
		if st.FeatureName(i) != prev.FeatureName(i) {
			continue
		}
		from, to := prev.LevelAt(i, -1), st.LevelAt(i, -1)
		if math.Abs(to-from) >= BigMove {
			out = append(out, Event{Time: st.Time, Kind: "move", Feature: st.FeatureName(i),
				What: fmt.Sprintf("%s %.0f%% → %.0f%%", st.FeatureName(i), 100*from, 100*to), Reason: st.Reason})
		}
	}
	return out
}

func (a *API) getEvents(w http.ResponseWriter, r *http.Request) {
	var after uint64
	if s := r.URL.Query().Get("after"); s != "" {
		var err error
		if after, err = strconv.ParseUint(s, 10, 64); err != nil {
			problem(w, http.StatusBadRequest, "bad-after", "after: want an event's seq")
			return
		}
	}
	// seq starts again at 1 with every boot: a client that follows by
	// ?after= compares boot and starts over when it changed.
	writeJSON(w, http.StatusOK, map[string]any{"v": Version, "boot": a.boot, "events": a.events.since(after)})
}

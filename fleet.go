package brownout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/signals"
)

// FleetStateVersion is the version of FleetState's body ("v").
const FleetStateVersion = 1

// FleetState is GET /v1/state's body in fleet mode: the levels this app
// follows, as it evaluates them (the daemon's, marked stale while the
// daemon is away), and how its links to the daemon fare — where an
// operator sees, on the app, that the daemon refuses its token. The
// daemon's own /v1/state has the rest: signals, pressure, the operators'
// pins.
type FleetState struct {
	V int `json:"v"`
	// Daemon is the daemon's URL (Options.Daemon); with several replicas
	// (Options.Daemons), the one followed now, "" while none is.
	Daemon string `json:"daemon"`
	// Daemons lists the replicas' URLs (Options.Daemons); none with one
	// URL.
	Daemons []string `json:"daemons,omitempty"`
	// Service is this app's service on a daemon of several
	// (Options.Service); absent for a daemon of one.
	Service string `json:"service,omitempty"`
	// Generation, Time, Mode, Shed and Reason are the followed state's
	// (dimmer.State); Time is zero before the daemon was ever heard.
	Generation uint64         `json:"generation"`
	Time       time.Time      `json:"time,omitzero"`
	Mode       string         `json:"mode"`
	Shed       float64        `json:"shed"`
	Reason     string         `json:"reason"`
	Features   []FleetFeature `json:"features"`
	// Sources are the links to the daemon, as DaemonHealth reports them.
	Sources []signals.SourceHealth `json:"sources"`
}

// FleetFeature is one feature of FleetState.
type FleetFeature struct {
	Name  string  `json:"name"`
	Level float64 `json:"level"`
	Mode  string  `json:"mode"`
}

// DaemonHealth reports how the links to the daemon fare in fleet mode:
// the stream the levels come from (provider.Remote.HealthByURL: one per
// replica, OK for the one followed), then the pushes of this app's
// signals (fleet.Pusher.HealthByURL: one per replica; none with
// Options.NoPush). With one URL that is two: the stream's and the
// pushes'. A daemon that refuses Options.DaemonToken shows in their
// LastError ("unauthorized (401) — check the token …") with OK false
// until it takes it again. Nil in embedded mode.
func (b *Brownout) DaemonHealth() []signals.SourceHealth {
	if b.remote == nil {
		return nil
	}
	out := b.remote.HealthByURL()
	if b.pusher != nil {
		out = append(out, b.pusher.HealthByURL()...)
	}
	return out
}

// FleetState returns what GET /v1/state shows in fleet mode; the zero
// FleetState in embedded mode (the API's State has it all).
func (b *Brownout) FleetState() FleetState {
	if b.remote == nil {
		return FleetState{}
	}
	st := b.remote.State()
	out := FleetState{V: FleetStateVersion, Daemon: b.opts.Daemon, Service: b.opts.Service, Generation: st.Generation, Time: st.Time,
		Mode: st.Mode.String(), Shed: st.Shed, Reason: st.Reason,
		Features: make([]FleetFeature, 0, len(st.Features)), Sources: b.DaemonHealth()}
	switch {
	case len(b.daemons) > 1:
		out.Daemon, out.Daemons = b.remote.Following(), b.daemons
	case b.opts.Daemon == "": // one URL, in Daemons
		out.Daemon = b.daemons[0]
	}
	for _, f := range st.Features {
		out.Features = append(out.Features, FleetFeature{Name: f.Name, Level: f.Level, Mode: f.Mode.String()})
	}
	return out
}

// fleetHandler is the operator surface in fleet mode: the state this app
// follows; everything else is the daemon's.
func (b *Brownout) fleetHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/state", func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		if err := json.NewEncoder(&body).Encode(b.FleetState()); err != nil {
			httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("brownout", "encoding"), Status: http.StatusInternalServerError,
				Detail: err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store") // the state of this moment
		w.Write(body.Bytes())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("brownout", "fleet-mode"), Status: http.StatusNotFound,
			Detail: fmt.Sprintf("fleet mode: the operator API and the dial are the daemon's, at %s; this app serves GET /v1/state", strings.Join(b.daemons, ", "))})
	})
	return mux
}

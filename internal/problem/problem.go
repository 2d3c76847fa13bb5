// Package problem writes the project's error answers: RFC 9457
// application/problem+json bodies, under one scheme of type URIs,
//
//	urn:brownout:<area>:<kind>
//
// where area is the surface that answered (api, push, shed, shop, deps,
// dial, brownout) and kind what went wrong ("cross-site", "too-large",
// "max_wait"). A URN, not a URL: the types name problems for clients to
// tell apart; there is no page behind them.
package problem

import (
	"encoding/json"
	"net/http"
)

// Prefix begins every type.
const Prefix = "urn:brownout:"

// Type returns the type URI of kind in area.
func Type(area, kind string) string { return Prefix + area + ":" + kind }

// Problem is one answer's body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Reason names the refusal reason (signals.Reason) where the problem
	// is one, so that clients can count refusals by reason.
	Reason string `json:"reason,omitempty"`
}

// Write answers p: Content-Type application/problem+json, Cache-Control
// no-store (an error is about this moment), the status, the body. Title
// defaults to the status's text.
func Write(w http.ResponseWriter, p Problem) {
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

package shop

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/brownout/brownout/internal/jsonbody"
)

// maxBody bounds a request body: a cart or checkout is a few hundred
// bytes; anything past this is refused with 413 before it is parsed.
const maxBody = 16 << 10

// problem writes an application/problem+json answer (RFC 9457).
func problem(w http.ResponseWriter, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Reason string `json:"reason,omitempty"`
	}{Type: "https://brownout.dev/problems/" + typ, Title: http.StatusText(status), Status: status, Detail: detail, Reason: reasonOf(typ)})
}

// decode reads a JSON body into v: at most maxBody bytes, one value, no
// unknown fields, 10 s to send it. The error says what was wrong, for the
// client.
func decode(w http.ResponseWriter, r *http.Request, v any) (status int, err error) {
	return jsonbody.Decode(w, r, v, jsonbody.Options{Max: maxBody, Strict: true, Timeout: 10 * time.Second})
}

// reasonOf names the refusal reasons of signals.Reason that the shop's own
// refusals are, so that clients (and the load generator) can tell them.
func reasonOf(typ string) string {
	if typ == "rate-limited" {
		return "rate_limit"
	}
	return ""
}

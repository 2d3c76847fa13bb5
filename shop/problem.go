package shop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
// unknown fields. The error says what was wrong, for the client.
func decode(w http.ResponseWriter, r *http.Request, v any) (status int, err error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/json", ct)
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", maxBody)
		case errors.Is(err, io.EOF):
			return http.StatusBadRequest, errors.New("empty body: want a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return http.StatusBadRequest, errors.New("malformed JSON: the body ends early")
		}
		return http.StatusBadRequest, fmt.Errorf("malformed JSON: %v", err)
	}
	if dec.More() {
		return http.StatusBadRequest, errors.New("malformed JSON: more than one value")
	}
	return 0, nil
}

// reasonOf names the refusal reasons of signals.Reason that the shop's own
// refusals are, so that clients (and the load generator) can tell them.
func reasonOf(typ string) string {
	if typ == "rate-limited" {
		return "rate_limit"
	}
	return ""
}

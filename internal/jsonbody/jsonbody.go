// Package jsonbody reads a JSON request body the way every API of this
// project does: application/json (the media type parsed, not prefixed),
// at most a given size, one value, within a deadline, and an error that
// tells the client what was wrong with the status to answer it with.
package jsonbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// Options of Decode.
type Options struct {
	// Max bounds the body; a larger one is 413.
	Max int64
	// Strict refuses unknown fields (operator and order bodies: a typo must
	// not pass silently).
	Strict bool
	// Optional accepts an empty body (also an empty chunked one).
	Optional bool
	// Timeout bounds the time the client may take to send the body (a
	// client that sends headers and stalls must not hold the handler).
	// Zero: none.
	Timeout time.Duration
}

// Decode reads r's body into v. On failure it returns the status to answer
// (400, 413 or 415) and an error for the client.
func Decode(w http.ResponseWriter, r *http.Request, v any, o Options) (int, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/json (curl: -H 'Content-Type: application/json')", ct)
		}
	}
	if o.Timeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(o.Timeout)) == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, o.Max))
	if o.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case o.Optional && errors.Is(err, io.EOF):
			return 0, nil
		case errors.As(err, &tooBig):
			return http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", o.Max)
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

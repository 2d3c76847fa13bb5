// Package jsonbody reads a JSON request body the way every API of this
// project does: application/json (the media type parsed, not prefixed),
// at most a given size, one value, within a deadline, each name once and
// in its field's own case, and an error that tells the client what was
// wrong with the status to answer it with.
//
// The deadline is the connection's read deadline, set before reading and
// never cleared here (net/http clears it once the body is read to its
// end): a body that stalls cannot hold the connection past it. After a
// failure the answer closes the connection (server.Abandon) instead of
// letting net/http read what is left of the body.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"time"

	"github.com/brownout/brownout/internal/server"
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
	// Zero: none here (the server's own, see package server).
	Timeout time.Duration
}

// Decode reads r's body into v. On failure it returns the status to answer
// (400, 408, 413 or 415) and an error for the client, and marks the answer
// Connection: close.
func Decode(w http.ResponseWriter, r *http.Request, v any, o Options) (int, error) {
	status, err := decode(w, r, v, o)
	if err != nil {
		server.Abandon(w, r)
	}
	return status, err
}

func decode(w http.ResponseWriter, r *http.Request, v any, o Options) (int, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return http.StatusUnsupportedMediaType, fmt.Errorf("content type %q: want application/json (curl: -H 'Content-Type: application/json')", ct)
		}
	}
	if o.Timeout > 0 {
		server.SetBodyDeadline(w, r, o.Timeout)
	}
	// Read whole (at most Max): its names are checked before it is
	// decoded.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, o.Max))
	if err != nil {
		if status, err := readError(err, o); status != 0 {
			return status, err
		}
		return http.StatusBadRequest, fmt.Errorf("reading the body: %v", err)
	}
	if err := checkNames(body, reflect.TypeOf(v)); err != nil {
		return http.StatusBadRequest, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if o.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if o.Optional && errors.Is(err, io.EOF) {
			return 0, nil
		}
		if status, err := readError(err, o); status != 0 {
			return status, err
		}
		switch {
		case errors.Is(err, io.EOF):
			return http.StatusBadRequest, errors.New("empty body: want a JSON object")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return http.StatusBadRequest, errors.New("malformed JSON: the body ends early")
		}
		return http.StatusBadRequest, fmt.Errorf("malformed JSON: %v", err)
	}
	// The rest of the body must be blank: read it to its end, which also
	// tells net/http that the body is done.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if status, err := readError(err, o); status != 0 {
			return status, err
		}
		return http.StatusBadRequest, errors.New("malformed JSON: more than one value, or something after it")
	}
	return 0, nil
}

// readError maps a failure to read the body (not to parse it) to its
// status: 413 over Max, 408 past the deadline; 0 for anything else.
func readError(err error, o Options) (int, error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("body over %d bytes", o.Max)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, errors.New("the body did not arrive in time")
	}
	return 0, nil
}

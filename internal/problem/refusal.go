package problem

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Refusal is a server's non-2xx answer, as a client's error: where it was
// asked, the status, and the detail of a problem+json body. A 401 or 403
// reads as a refused token with Hint saying what to check, and unwraps to
// Unauthorized, so that callers tell it apart with errors.Is.
type Refusal struct {
	// Where names the request, e.g. "fleet: push to http://…".
	Where string
	// StatusPrefix is written before a status that is not a refusal of
	// the credentials, e.g. "HTTP ".
	StatusPrefix string
	Code         int
	Status       string
	// Detail is the problem's detail, when the body was problem+json.
	Detail string
	// Hint says what to check when the credentials were refused.
	Hint string
	// Unauthorized is what a refusal of the credentials unwraps to.
	Unauthorized error
}

// ReadRefusal makes the Refusal of resp, reading at most limit bytes of its
// body for a problem's detail.
func ReadRefusal(resp *http.Response, limit int64, r Refusal) *Refusal {
	r.Code, r.Status = resp.StatusCode, resp.Status
	var prob struct {
		Detail string `json:"detail"`
	}
	if raw, _ := io.ReadAll(io.LimitReader(resp.Body, limit)); json.Unmarshal(raw, &prob) == nil {
		r.Detail = prob.Detail
	}
	return &r
}

func (e *Refusal) Error() string {
	msg := fmt.Sprintf("%s: %s%s", e.Where, e.StatusPrefix, e.Status)
	if e.Refused() {
		msg = fmt.Sprintf("%s: %s (%d) — %s", e.Where, strings.ToLower(http.StatusText(e.Code)), e.Code, e.Hint)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Refused reports whether the server refused the request's credentials.
func (e *Refusal) Refused() bool {
	return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
}

// Unwrap returns Unauthorized for a refusal of the credentials.
func (e *Refusal) Unwrap() error {
	if e.Refused() {
		return e.Unauthorized
	}
	return nil
}

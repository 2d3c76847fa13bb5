package problem

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, Problem{Type: Type("api", "too-large"), Status: http.StatusRequestEntityTooLarge, Detail: "at most 1 MiB"})
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
	var p map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	assert.Equal(t, map[string]any{"type": "urn:brownout:api:too-large", "title": "Request Entity Too Large", "status": 413.0, "detail": "at most 1 MiB"}, p)
}

// TestRefusal: a server's refusal reads with its status and the problem's
// detail; a refused token says what to check and unwraps to the caller's
// sentinel, other statuses do not.
func TestRefusal(t *testing.T) {
	errToken := errors.New("refused the token")
	read := func(code int, body string) *Refusal {
		rec := httptest.NewRecorder()
		rec.WriteHeader(code)
		rec.WriteString(body)
		return ReadRefusal(rec.Result(), 1<<10, Refusal{Where: "push to x", StatusPrefix: "HTTP ", Hint: "check the push token", Unauthorized: errToken})
	}
	r := read(http.StatusUnauthorized, `{"detail":"no such token"}`)
	assert.Equal(t, "push to x: unauthorized (401) — check the push token: no such token", r.Error())
	assert.ErrorIs(t, r, errToken)
	r = read(http.StatusServiceUnavailable, "not json")
	assert.Equal(t, "push to x: HTTP 503 Service Unavailable", r.Error())
	assert.NotErrorIs(t, r, errToken)
	assert.Equal(t, "forbidden", strings.Fields(read(http.StatusForbidden, "").Error())[3])
}

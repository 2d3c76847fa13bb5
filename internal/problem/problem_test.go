package problem

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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

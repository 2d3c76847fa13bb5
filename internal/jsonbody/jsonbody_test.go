package jsonbody

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/hostile"
)

func TestDecode(t *testing.T) {
	type body struct {
		A int `json:"a"`
	}
	for _, tc := range []struct {
		name, ct, body string
		o              Options
		status         int
		msg            string
	}{
		{"ok", "application/json; charset=utf-8", `{"a":1}`, Options{Max: 64, Strict: true}, 0, ""},
		{"media type parsed", "application/jsonfoo", `{"a":1}`, Options{Max: 64}, 415, "content type"},
		{"unknown field", "", `{"b":1}`, Options{Max: 64, Strict: true}, 400, "unknown field"},
		{"unknown field, lenient", "", `{"b":1}`, Options{Max: 64}, 0, ""},
		{"empty", "", ``, Options{Max: 64}, 400, "empty body"},
		{"empty, optional", "", ``, Options{Max: 64, Optional: true}, 0, ""},
		{"ends early", "", `{"a":`, Options{Max: 64}, 400, "ends early"},
		{"two values", "", `{} {}`, Options{Max: 64}, 400, "more than one"},
		{"too big", "", `{"a":` + strings.Repeat("1", 100) + `}`, Options{Max: 64}, 413, "over 64 bytes"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
		if tc.ct != "" {
			r.Header.Set("Content-Type", tc.ct)
		}
		var v body
		status, err := Decode(httptest.NewRecorder(), r, &v, tc.o)
		assert.Equal(t, tc.status, status, tc.name)
		if tc.msg == "" {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorContains(t, err, tc.msg, tc.name)
		}
	}
}

func TestTrailingData(t *testing.T) {
	for _, body := range []string{`{"a":1}}`, `{"a":1}]`, `{"a":1} x`} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		var v struct {
			A int `json:"a"`
		}
		w := httptest.NewRecorder()
		status, err := Decode(w, r, &v, Options{Max: 64})
		assert.Equal(t, 400, status, body)
		assert.ErrorContains(t, err, "more than one value", body)
		assert.Equal(t, "close", w.Header().Get("Connection"), "a failed read closes the connection: %s", body)
	}
}

// TestStalledBodyClosesTheConnection: a body that stops half-way gets its
// 408 when the deadline passes, and the connection closes then, instead
// of net/http waiting for ever for the rest of it.
func TestStalledBodyClosesTheConnection(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if status, err := Decode(w, r, &v, Options{Max: 1 << 10, Timeout: timeout}); err != nil {
			http.Error(w, err.Error(), status)
		}
	}))
	defer srv.Close()
	c := hostile.StalledBody(t, hostile.Addr(t, srv.URL), "POST", "/", nil, "{", 100)
	resp, err := hostile.ReadResponse(t, c, timeout+hostile.Slack)
	require.NoError(t, err, "an answer when the deadline passes")
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.True(t, resp.Close, "Connection: close")
	hostile.RequireClosed(t, c, hostile.Slack, "after a stalled body")
}

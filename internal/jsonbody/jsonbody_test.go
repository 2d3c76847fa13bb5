package jsonbody

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

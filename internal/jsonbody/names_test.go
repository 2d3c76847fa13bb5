package jsonbody

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// checkout is a request body with a nested list of objects.
type checkout struct {
	Items []struct {
		Product int64 `json:"product"`
		Qty     int64 `json:"qty"`
	} `json:"items"`
	Note  string          `json:"note"`
	Extra map[string]any  `json:"extra"`
	Raw   json.RawMessage `json:"raw"`
	embedded
}

type embedded struct {
	Coupon string `json:"coupon"`
}

func decodeBody(body string, o Options) (int, error) {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	var v checkout
	return Decode(httptest.NewRecorder(), r, &v, o)
}

// TestNamesOnceAndInTheirCase: a key repeated in an object, or a field
// named in another case, is refused (400) wherever it is — encoding/json
// would take the last, or match without case; map keys are the client's
// own, and only their repetition is refused.
func TestNamesOnceAndInTheirCase(t *testing.T) {
	strict := Options{Max: 1 << 10, Strict: true}
	for _, tc := range []struct{ body, msg string }{
		{`{"note":"a","note":"b"}`, `"note" appears twice`},
		{`{"items":[{"product":1,"qty":1,"product":2}]}`, `"items[0].product" appears twice`},
		{`{"Note":"a"}`, `"Note": names are case-sensitive: did you mean "note"?`},
		{`{"items":[{"product":1},{"product":1,"QTY":1}]}`, `"items[1].QTY": names are case-sensitive`},
		{`{"note":"a","NOTE":"b"}`, `"NOTE": names are case-sensitive`},
		{`{"ſ":1,"note":"\u212a"}`, ``}, // an unknown field, refused as such below
		{`{"noTe":1}`, `did you mean "note"`},
		{`{"itemſ":[]}`, `"itemſ": names are case-sensitive: did you mean "items"?`}, // ſ folds to s, for encoding/json too
		{`{"Coupon":"x"}`, `did you mean "coupon"`},
		{`{"extra":{"a":1,"a":2}}`, `"extra.a" appears twice`},
		{`{"raw":{"k":[{"x":1,"x":1}]}}`, `"raw.k[0].x" appears twice`},
	} {
		status, err := decodeBody(tc.body, strict)
		if tc.msg == "" {
			assert.ErrorContains(t, err, "unknown field", tc.body)
			continue
		}
		assert.Equal(t, http.StatusBadRequest, status, tc.body)
		assert.ErrorContains(t, err, tc.msg, tc.body)
	}
	for _, body := range []string{
		`{"items":[{"product":1,"qty":1},{"product":2,"qty":1}],"note":"n","coupon":"c"}`,
		`{"extra":{"A":1,"a":2,"Note":3},"raw":{"Note":1,"note":2}}`,
		`{"items":null,"extra":null}`,
	} {
		status, err := decodeBody(body, strict)
		assert.NoError(t, err, body)
		assert.Zero(t, status, body)
	}
	// Lenient: unknown fields pass, their case variants of known ones do
	// not.
	_, err := decodeBody(`{"other":1,"note":"x"}`, Options{Max: 1 << 10})
	assert.NoError(t, err)
	_, err = decodeBody(`{"Note":"x"}`, Options{Max: 1 << 10})
	assert.ErrorContains(t, err, "case-sensitive")
}

// FuzzDecode: whatever the body, Decode never panics, and a body it takes
// has each top-level name once, each a field's own name.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"product":1,"qty":1}]}`, `{"note":"a","note":"b"}`, `{"Note":1}`,
		`{"extra":{"a":1,"a":2}}`, `{"raw":{"x":1}}`, `[]`, `{`, `{"items":[{"product":1e999}]}`,
		`{"coupon":"\u212a"}`, strings.Repeat("[", 50),
	} {
		f.Add(s)
	}
	names := []string{"items", "note", "extra", "raw", "coupon"}
	f.Fuzz(func(t *testing.T, body string) {
		if _, err := decodeBody(body, Options{Max: 1 << 12, Strict: true}); err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return // null: no names
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("took %q: %v", body, err)
			}
			key := tok.(string)
			if seen[key] || !slices.Contains(names, key) {
				t.Fatalf("took %q: key %q", body, key)
			}
			seen[key] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Fatalf("took %q: %v", body, err)
			}
		}
	})
}

// BenchmarkDecode reads a checkout body of two items (the names walked,
// then decoded).
func BenchmarkDecode(b *testing.B) {
	const body = `{"items":[{"product":7,"qty":1},{"product":12,"qty":2}],"note":"gift"}`
	o := Options{Max: 1 << 10, Strict: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBody(body, o); err != nil {
			b.Fatal(err)
		}
	}
}

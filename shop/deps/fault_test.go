package deps

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminDep is one dependency seen through its admin endpoint and its Go
// accessor.
type adminDep struct {
	name  string
	h     http.Handler
	fault func() any // the knobs in force, from Go
}

func adminDeps() []adminDep {
	p, s, e := NewPaymentGateway(Options{}), NewSMSProvider(Options{}), NewRecsEngine(Options{}, nil)
	return []adminDep{
		{"payment", p, func() any { return p.Fault() }},
		{"sms", s, func() any { return s.Fault() }},
		{"recs", e, func() any { return e.Fault() }},
	}
}

func TestFaultJSON(t *testing.T) {
	b, err := json.Marshal(DefaultSMSFault())
	require.NoError(t, err)
	assert.JSONEq(t, `{"latency":"200ms","slow_latency":"30s","slow":false,"error_rate":0,"rate":500,"burst":50}`, string(b))
	b, err = json.Marshal(DefaultPaymentFault())
	require.NoError(t, err)
	assert.JSONEq(t, `{"latency":"30ms","slow_latency":"2s","slow":false,"error_rate":0}`, string(b))

	// Unmarshal merges: absent fields (and nulls) keep their values.
	f := DefaultRecsFault()
	require.NoError(t, json.Unmarshal([]byte(`{"slow":true,"error_rate":0.25,"latency":null}`), &f))
	assert.Equal(t, Fault{Latency: 50 * time.Millisecond, SlowLatency: 600 * time.Millisecond, Slow: true, ErrorRate: 0.25}, f)
	assert.Equal(t, 600*time.Millisecond, f.Delay())

	s := DefaultSMSFault()
	require.NoError(t, json.Unmarshal([]byte(`{"rate":10,"slow_latency":"1m"}`), &s))
	assert.Equal(t, 10.0, s.Rate)
	assert.Equal(t, time.Minute, s.SlowLatency)
	assert.Equal(t, 50, s.Burst)

	// On error nothing changes.
	before := s
	require.Error(t, json.Unmarshal([]byte(`{"rate":20,"burst":0}`), &s))
	assert.Equal(t, before, s)
}

func TestAdminFaultRoundTrip(t *testing.T) {
	for _, d := range adminDeps() {
		t.Run(d.name, func(t *testing.T) {
			asJSON := func() string { b, _ := json.Marshal(d.fault()); return string(b) }

			w := serveRecorded(d.h, "GET", "/admin/fault", "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
			assert.JSONEq(t, asJSON(), w.Body.String())
			defaults := w.Body.String()

			w = serveRecorded(d.h, "PUT", "/admin/fault",
				`{"slow":true,"slow_latency":"1.5s","error_rate":0.1}`, "Content-Type", "application/json; charset=utf-8")
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			var got map[string]any
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
			assert.Equal(t, true, got["slow"])
			assert.Equal(t, "1.5s", got["slow_latency"])
			assert.Equal(t, 0.1, got["error_rate"])
			var def map[string]any
			require.NoError(t, json.Unmarshal([]byte(defaults), &def))
			assert.Equal(t, def["latency"], got["latency"], "an absent knob keeps its value")
			assert.JSONEq(t, asJSON(), w.Body.String(), "Go sees what HTTP set")

			w = serveRecorded(d.h, "GET", "/admin/fault", "")
			assert.JSONEq(t, asJSON(), w.Body.String())

			w = serveRecorded(d.h, "DELETE", "/admin/fault", "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.JSONEq(t, defaults, w.Body.String())
			assert.JSONEq(t, defaults, asJSON())

			w = serveRecorded(d.h, "GET", "/admin/stats", "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.Contains(t, w.Body.String(), `"requests":0`)
		})
	}

	// From Go: SetFault and UpdateFault show on GET.
	p := NewPaymentGateway(Options{})
	require.NoError(t, p.SetFault(Fault{Latency: time.Second, SlowLatency: time.Minute}))
	require.NoError(t, p.UpdateFault(func(f *Fault) { f.ErrorRate = 0.5 }))
	w := serveRecorded(p, "GET", "/admin/fault", "")
	assert.JSONEq(t, `{"latency":"1s","slow_latency":"1m0s","slow":false,"error_rate":0.5}`, w.Body.String())
	require.ErrorContains(t, p.SetFault(Fault{Latency: -time.Second}), "latency: must be between 0s and 10m0s, got -1s")
	require.ErrorContains(t, p.UpdateFault(func(f *Fault) { f.ErrorRate = 2 }), "error_rate")
	assert.Equal(t, 0.5, p.Fault().ErrorRate, "a refused change changes nothing")
	p.ResetFault()
	assert.Equal(t, DefaultPaymentFault(), p.Fault())

	s := NewSMSProvider(Options{})
	require.ErrorContains(t, s.UpdateFault(func(f *SMSFault) { f.Rate = 0 }), "rate: must be more than 0")
}

func TestAdminFaultBadInput(t *testing.T) {
	cases := []struct {
		name, body, contentType string
		sms                     bool
		status                  int
		detail                  string
	}{
		{"unknown field", `{"slow":true,"sloww":true}`, "", false, 400, `unknown field "sloww" (the knobs are latency, slow_latency, slow, error_rate)`},
		{"sms field on payment", `{"rate":10}`, "", false, 400, `unknown field "rate"`},
		{"error rate too high", `{"error_rate":1.5}`, "", false, 400, "error_rate: must be between 0 and 1, got 1.5"},
		{"negative latency", `{"latency":"-5ms"}`, "", false, 400, "latency: must be between 0s and 10m0s, got -5ms"},
		{"latency too long", `{"slow_latency":"11m"}`, "", false, 400, "slow_latency: must be between 0s and 10m0s"},
		{"latency not a duration", `{"latency":"fast"}`, "", false, 400, `latency: "fast" is not a duration`},
		{"latency a number", `{"latency":200}`, "", false, 400, `latency: want a duration string such as "200ms", got number`},
		{"slow a string", `{"slow":"yes"}`, "", false, 400, "slow: want true or false, got string"},
		{"two errors", `{"error_rate":-1,"latency":"-1s"}`, "", false, 400, "latency: must be between 0s and 10m0s, got -1s; error_rate"},
		{"malformed", `{"slow":tru}`, "", false, 400, "malformed JSON at byte"},
		{"unclosed", `{"slow":true`, "", false, 400, "malformed JSON"},
		{"trailing data", `{"slow":true} {}`, "", false, 400, "trailing data after the JSON object"},
		{"array", `[{"slow":true}]`, "", false, 400, "want a JSON object such as {\"slow\":true}, got an array"},
		{"null", `null`, "", false, 400, "got null"},
		{"empty", ``, "", false, 400, "empty body"},
		{"rate zero", `{"rate":0}`, "", true, 400, "rate: must be more than 0"},
		{"burst fraction", `{"burst":1.5}`, "", true, 400, "burst: want an integer, got number 1.5"},
		{"burst zero", `{"burst":0}`, "", true, 400, "burst: must be between 1 and 1000000, got 0"},
		// A write that is not JSON is refused before the knobs read it
		// (internal/local): a page of another site could send a form.
		{"form", `slow=true`, "application/x-www-form-urlencoded", false, 403, `Content-Type "application/x-www-form-urlencoded": a write must be Content-Type: application/json`},
		{"xml", `<slow>true</slow>`, "application/xml", false, 403, `Content-Type "application/xml": a write must be Content-Type: application/json`},
		{"bad media type", `{}`, "json;;", false, 403, "application/json"},
		{"too large", `{"latency":"` + strings.Repeat("1", MaxAdminBody) + `ms"}`, "", false, 413, "4 KiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h http.Handler = NewPaymentGateway(Options{})
			if c.sms {
				h = NewSMSProvider(Options{})
			}
			before := serveRecorded(h, "GET", "/admin/fault", "").Body.String()
			hdr := []string{}
			if c.contentType != "" {
				hdr = []string{"Content-Type", c.contentType}
			}
			w := serveRecorded(h, "PUT", "/admin/fault", c.body, hdr...)
			require.Equal(t, c.status, w.Code, w.Body.String())
			assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			var p problem
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
			assert.Equal(t, c.status, p.Status)
			assert.Contains(t, p.Detail, c.detail)
			assert.Equal(t, before, serveRecorded(h, "GET", "/admin/fault", "").Body.String(), "nothing changed")
		})
	}
}

func FuzzAdminFault(f *testing.F) {
	for _, s := range []string{
		`{"slow":true}`, `{"latency":"30ms","slow_latency":"2s","slow":false,"error_rate":0}`,
		`{"latency":"1h"}`, `{"error_rate":0.5,"rate":1,"burst":1}`, `{"rate":1e6}`, `{"burst":1e3}`,
		`{"latency":null}`, `{"latency":"1.000000001s"}`, `{"error_rate":-0}`, ` {"slow":false} `,
		`{"sloww":1}`, `[]`, `null`, `"x"`, `{`, `{"slow":true}x`, `{"latency":"-1ns"}`, "",
		`{"latency":"\u0031s"}`, `{"Slow":true}`, `{"slow":true,"slow":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The parser: an error changes nothing; a success is valid and
		// round-trips through its own JSON, whatever the base.
		base := DefaultPaymentFault()
		got, err := decodeFault(base, data)
		if err != nil {
			require.Equal(t, base, got)
			require.NotEmpty(t, err.Error())
		} else {
			require.NoError(t, got.Validate())
			b, err := json.Marshal(got)
			require.NoError(t, err)
			again, err := decodeFault(Fault{Slow: true, ErrorRate: 1}, b)
			require.NoError(t, err, "%s", b)
			require.Equal(t, got, again)
		}
		sbase := DefaultSMSFault()
		sgot, serr := decodeSMSFault(sbase, data)
		if serr != nil {
			require.Equal(t, sbase, sgot)
		} else {
			require.NoError(t, sgot.Validate())
			b, err := json.Marshal(sgot)
			require.NoError(t, err)
			again, err := decodeSMSFault(SMSFault{Rate: 1, Burst: 1}, b)
			require.NoError(t, err, "%s", b)
			require.Equal(t, sgot, again)
		}
		if err == nil {
			require.NoError(t, serr, "what the payment knobs accept, the SMS knobs accept")
		}

		// The endpoint: 200 with the new knobs, or a problem and no change.
		s := NewSMSProvider(Options{})
		w := serveRecorded(s, "PUT", "/admin/fault", string(data))
		switch w.Code {
		case http.StatusOK:
			require.NoError(t, serr)
			require.Equal(t, sgot, s.Fault())
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			require.Equal(t, DefaultSMSFault(), s.Fault())
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

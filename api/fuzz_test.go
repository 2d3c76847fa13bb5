package api

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/brownout/brownout/internal/local"
)

// FuzzOFREPBody: whatever the body, an evaluation answers 200, 400, 404
// or 413 with OFREP's shape, and never panics.
func FuzzOFREPBody(f *testing.F) {
	for _, s := range []string{`{"context":{"targetingKey":"u1"}}`, `{"context":{"targetingKey":7}}`, `{"context":null}`, `[]`, `{"context":{"segment":"vip"}}`, "\x00"} {
		f.Add("recommendations", s)
	}
	a, err := New(Config{Controller: newController(f)})
	if err != nil {
		f.Fatal(err)
	}
	h := a.Handler()
	f.Fuzz(func(t *testing.T, key, body string) {
		for _, path := range []string{"/ofrep/v1/evaluate/flags/" + strings.ReplaceAll(key, "/", "_"), "/ofrep/v1/evaluate/flags"} {
			req, err := http.NewRequest(http.MethodPost, "http://x"+path, strings.NewReader(body))
			if err != nil {
				return // not a URL: the server would not route it either
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			switch rec.Code {
			case 200, 400, 404, 413, 301, 307, 308:
			default:
				t.Fatalf("%s %q: status %d: %s", path, body, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzOverrideBody: a rejected override changes nothing.
func FuzzOverrideBody(f *testing.F) {
	for _, s := range []string{`{"level":0.5,"ttl":"10m","reason":"x"}`, `{"level":2}`, `{"level":-0}`, `{"ttl":"1ns","level":0}`, `null`, `{"level":0.57}`, `{"level":0.5,"ttl":"59s"}`, `{"level":-0.0,"ttl":"1m"}`} {
		f.Add(s)
	}
	ctl := newController(f)
	a, err := New(Config{Controller: ctl, Loopback: true})
	if err != nil {
		f.Fatal(err)
	}
	h := a.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		gen := ctl.State().Generation
		req := httptest.NewRequest(http.MethodPut, "/v1/features/reviews/override", strings.NewReader(body))
		req.Host = "127.0.0.1:8080" // the local operator's curl
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			// What is pinned lasts MinTTL at least, and its level reads
			// as written to the quantum: no −0, no 0.5700000000000001.
			o := a.State().Features
			for _, ft := range o {
				if ft.Name != "reviews" {
					continue
				}
				if ft.Override == nil || ft.Override.Until.Sub(ctl.State().Time) < MinTTL && !ctl.State().Time.IsZero() {
					t.Fatalf("%q: pinned %+v", body, ft.Override)
				}
				if l := ft.Override.Level; math.Signbit(l) || l != math.Round(l*100)/100 {
					t.Fatalf("%q: pinned at %v", body, l)
				}
			}
			ctl.Unpin("reviews")
		case 400, 413, 415:
			if ctl.State().Generation != gen {
				t.Fatalf("%q refused (%d) but the state changed", body, rec.Code)
			}
		default:
			t.Fatalf("%q: status %d", body, rec.Code)
		}
	})
}

// FuzzLocalRefusal: whatever a client puts in Origin, Sec-Fetch-Site,
// Host and Content-Type, a request the check lets pass is typed JSON,
// names a local Host, and comes from no other origin.
func FuzzLocalRefusal(f *testing.F) {
	f.Add("http://127.0.0.1:8080", "same-origin", "127.0.0.1:8080", "application/json")
	f.Add("https://evil.example", "cross-site", "evil.example", "text/plain")
	f.Add("null", "", "[::1]:80", "application/json; charset=utf-8")
	f.Add("", "none", "localhost", "")
	f.Add("http://[::1]", "same-site", "[::1]", "application/json")
	f.Fuzz(func(t *testing.T, origin, site, host, ct string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/freeze", strings.NewReader("{}"))
		r.Host = host
		for k, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, "Content-Type": ct} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		typ, detail := localRefusal(r)
		if typ != "" {
			if detail == "" || !utf8.ValidString(detail) {
				t.Fatalf("refused (%s) without a readable detail: %q", typ, detail)
			}
			return
		}
		if !local.IsJSON(r) || !local.Host(r) {
			t.Fatalf("passed: Content-Type %q, Host %q", ct, host)
		}
		if origin != "" && !local.SameOrigin(r, origin) {
			t.Fatalf("passed from Origin %q to Host %q", origin, host)
		}
		if site != "" && site != "same-origin" && site != "none" {
			t.Fatalf("passed with Sec-Fetch-Site %q", site)
		}
	})
}

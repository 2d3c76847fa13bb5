package signals

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestWorkConcurrent: under concurrent requests and snapshots, every
// request's work is counted once over the snapshots, and no snapshot's
// cumulative count of a feature's requests exceeds the work's (a Pusher
// reads the tallies, then the work: the decoders and the law may rely on
// it).
func TestWorkConcurrent(t *testing.T) {
	rec := NewRecorder(Config{})
	if err := rec.Features("a"); err != nil {
		t.Fatal(err)
	}
	h := Middleware(rec, MiddlewareConfig{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			Evaluated(r.Context(), "a", true)
		}
	}))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 250 {
				p := "/"
				if (i+g)%2 == 0 {
					p = "/a"
				}
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
			}
		})
	}
	var total int64
	wg.Go(func() {
		for i := range 50 {
			total += rec.Snapshot(t0.Add(time.Duration(i) * time.Millisecond)).Work.N
		}
	})
	wg.Go(func() {
		for range 200 {
			tl := rec.Tallies()
			w := rec.Work()
			if n := tl[0].On.N + tl[0].Off.N; n > w.N {
				t.Errorf("cumulative tally %d over the work's %d", n, w.N)
				return
			}
		}
	})
	wg.Wait()
	total += rec.Snapshot(t0.Add(time.Second)).Work.N
	if total != 1000 {
		t.Errorf("work counted %d requests over the snapshots, want 1000", total)
	}
}

package shed_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/brownout/brownout/shed"
	"github.com/brownout/brownout/signals"
)

// Admission control in front of a handler: while the brownout cascade
// sheds the sheddable class, those requests get a pre-built 503
// problem+json before any work; critical ones pass. The routes give the
// classes: a client's X-Priority may lower its class, never raise it.
func ExampleShedder_Middleware() {
	routes, _ := shed.NewRoutes(
		shed.Route{Pattern: "GET /recommendations", Class: signals.Sheddable},
		shed.Route{Pattern: "POST /checkout", Class: signals.Critical},
	)
	s, _ := shed.New(shed.Config{ShedLevel: func() float64 { return 1 }, Classify: routes.Classify})
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := shed.ClassFrom(r.Context())
		fmt.Fprintf(w, "served %s", c)
	}))
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/recommendations", nil),
		httptest.NewRequest(http.MethodPost, "/checkout", nil),
	} {
		req.Header.Set(signals.PriorityHeader, "critical") // believed on no route but a critical one
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		fmt.Printf("%d %s retry-after=%q\n", rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Retry-After"))
		fmt.Println(string(body))
	}
	// Output:
	// 503 application/problem+json retry-after="1"
	// {"type":"urn:brownout:shed:shed_level","title":"Service overloaded","status":503,"detail":"The server is shedding this class of requests to protect critical ones.","reason":"shed_level"}
	// 200 text/plain; charset=utf-8 retry-after=""
	// served critical
}

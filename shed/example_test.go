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
// problem+json before any work; critical ones pass.
func ExampleShedder_Middleware() {
	s, _ := shed.New(shed.Config{ShedLevel: func() float64 { return 1 }})
	h := s.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := shed.ClassFrom(r.Context())
		fmt.Fprintf(w, "served %s", c)
	}))
	for _, prio := range []string{"sheddable", "critical"} {
		req := httptest.NewRequest(http.MethodGet, "/recommendations", nil)
		req.Header.Set(signals.PriorityHeader, prio)
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

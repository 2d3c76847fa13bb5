package provider_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/provider"
	"github.com/brownout/brownout/signals"
)

// overloaded returns a controller that has run for 4 s under p99 1.5 s
// against a 1 s target, with no load measured: the model law, on feedback
// alone, allows a request 1.55 of an all-off request's work (what its
// pressure says the first overload carried) and sets the levels for it —
// recommendations off, reviews at 0.55.
func overloaded() *dimmer.Controller {
	c, _ := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: []dimmer.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
	})
	for i := range 4 {
		now := time.Date(2026, 11, 11, 0, 0, 1+i, 0, time.UTC)
		var s signals.Snapshot
		s.Time = now
		s.Set(signals.LatencyP99, 1.5)
		c.Step(now, s)
	}
	return c
}

// An net/http app asks, per request and per user, whether to render the
// optional section.
func Example_httpApp() {
	api := isolated.NewAPI() // or the global openfeature API
	p, _ := provider.New(overloaded(), provider.Options{})
	_ = api.SetProviderAndWait(context.Background(), p)
	defer api.Shutdown(context.Background())
	flags := api.NewClient()

	product := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("X-User")
		ec := openfeature.NewEvaluationContext(user, nil)
		fmt.Fprintln(w, "product page")
		// Fail open: when in doubt (no provider yet), show the section.
		if ok, _ := flags.BooleanValue(r.Context(), "reviews", true, ec); ok {
			fmt.Fprintln(w, "reviews")
		}
		if ok, _ := flags.BooleanValue(r.Context(), "recommendations", true, ec); ok {
			fmt.Fprintln(w, "recommendations")
		}
	})
	// reviews is at 55 %: user-4 is in that share, user-2 is not; nobody
	// gets recommendations (level 0). Each user always gets the same answer.
	for _, user := range []string{"user-4", "user-2"} {
		req := httptest.NewRequest(http.MethodGet, "/product/42", nil)
		req.Header.Set("X-User", user)
		rec := httptest.NewRecorder()
		product.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		fmt.Printf("%s:\n%s", user, body)
	}
	// Output:
	// user-4:
	// product page
	// reviews
	// user-2:
	// product page
}

// The default value is what an app gets when the flag cannot be evaluated
// (no provider, unknown flag): fail open (true) keeps a feature when the
// controller is unreachable, fail closed (false) drops it.
func Example_failOpenOrClosed() {
	api := isolated.NewAPI() // no provider set: every evaluation falls back
	flags := api.NewClient()
	ctx := context.Background()
	ec := openfeature.NewEvaluationContext("user-7", nil)

	open, _ := flags.BooleanValue(ctx, "recommendations", true, ec)
	closed, _ := flags.BooleanValue(ctx, "payment-upsell", false, ec)
	fmt.Println("recommendations (fail open):", open)
	fmt.Println("payment-upsell (fail closed):", closed)
	// Output:
	// recommendations (fail open): true
	// payment-upsell (fail closed): false
}

// Graded degradation: instead of all or nothing, read the level and show
// fewer items when the service is under pressure.
func Example_gradedDegradation() {
	api := isolated.NewAPI()
	p, _ := provider.New(overloaded(), provider.Options{})
	_ = api.SetProviderAndWait(context.Background(), p)
	defer api.Shutdown(context.Background())
	flags := api.NewClient()

	ec := openfeature.NewEvaluationContext("user-7", nil)
	level, _ := flags.FloatValue(context.Background(), "reviews.level", 1, ec)
	n := int(10*level + 0.5)
	fmt.Printf("reviews level %.2f: show %d of 10 reviews\n", level, n)
	// Output:
	// reviews level 0.55: show 6 of 10 reviews
}

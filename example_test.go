package brownout_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"
	"github.com/open-feature/go-sdk/openfeature"

	"github.com/brownout/brownout"
)

// A net/http handler behind the stack: the app asks the flags per user and
// renders the optional sections they allow.
func ExampleNew() {
	b, err := brownout.New(brownout.Options{
		Features: []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Domain:   "example-new", // "" registers the default provider
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	if err := b.RegisterProvider(); err != nil {
		log.Fatal(err)
	}
	flags := b.Client()

	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := openfeature.NewEvaluationContext(r.URL.Query().Get("user"), nil)
		fmt.Fprint(w, "page")
		if on, _ := flags.BooleanValue(r.Context(), "recommendations", false, user); on {
			fmt.Fprint(w, " + recommendations")
		}
	})
	srv := httptest.NewServer(b.Middleware(app)) // http.ListenAndServe(addr, b.Middleware(app))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/?user=alice")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output: page + recommendations
}

// With echo, the stack is one middleware.
func ExampleBrownout_Middleware_echo() {
	b, err := brownout.New(brownout.Options{Features: []brownout.Feature{{Name: "recommendations"}}})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	e := echo.New()
	e.Use(echo.WrapMiddleware(b.Middleware))
	// e.GET(…); go b.Run(ctx); e.Start(addr)
}

// Fleet mode: the levels come from a brownoutd, and the app pushes its
// signals to it.
func ExampleOptions_fleet() {
	b, err := brownout.New(brownout.Options{
		Daemon:      "http://brownoutd.internal:8090",
		DaemonToken: "the daemon's eval and push token",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// go b.Run(ctx); b.RegisterProvider(); http.ListenAndServe(addr, b.Middleware(app))
}

// Fleet mode on a brownoutd in HA: the replicas' URLs. The levels come
// from one replica at a time (another when it fails or lags), and the
// signals are pushed to each.
func ExampleOptions_replicas() {
	b, err := brownout.New(brownout.Options{
		Daemons:     []string{"http://brownoutd-1.internal:8090", "http://brownoutd-2.internal:8090"},
		DaemonToken: "the daemon's eval and push token",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// go b.Run(ctx); b.RegisterProvider(); http.ListenAndServe(addr, b.Middleware(app))
}

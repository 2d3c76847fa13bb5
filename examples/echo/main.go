// Command echo protects an echo app with brownout: the same product page
// as examples/nethttp, with the stack as echo middleware — one line,
// e.Use(echo.WrapMiddleware(b.Middleware)).
//
//	go run ./examples/echo
//	curl 'http://127.0.0.1:8080/?user=alice'
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/open-feature/go-sdk/openfeature"

	"github.com/brownout/brownout"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "the app's listen address")
	ops := flag.String("ops", "127.0.0.1:8081", "the operator dial's listen address (keep it internal)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	dial, err := net.Listen("tcp", *ops)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("app on http://%s/?user=alice, dial on http://%s/", app.Addr(), dial.Addr())
	if err := run(ctx, app, dial); err != nil {
		log.Fatal(err)
	}
}

// run serves the protected echo app on app and the operator surface on
// dial until ctx ends.
func run(ctx context.Context, app, dial net.Listener) error {
	t, _ := dial.Addr().(*net.TCPAddr)
	b, err := brownout.New(brownout.Options{
		Features: []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Loopback: t != nil && t.IP.IsLoopback(),
	})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.RegisterProvider(); err != nil {
		return err
	}
	flags := b.Client()

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(echo.WrapMiddleware(b.Middleware))
	e.GET("/", func(c echo.Context) error {
		user := openfeature.NewEvaluationContext(c.QueryParam("user"), nil)
		var page strings.Builder
		page.WriteString("product page\n")
		for _, f := range []string{"recommendations", "reviews"} {
			if on, _ := flags.BooleanValue(c.Request().Context(), f, false, user); on {
				page.WriteString(f + ": …\n")
			}
		}
		return c.String(http.StatusOK, page.String())
	})
	e.Listener = app

	ops := &http.Server{Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errs := make(chan error, 3)
	go func() { errs <- b.Run(ctx) }()
	go func() { errs <- e.Start("") }()
	go func() { errs <- ops.Serve(dial) }()
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.Shutdown(shut)
	_ = ops.Shutdown(shut)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

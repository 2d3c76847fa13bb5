// Command nethttp protects a net/http handler with brownout: a product
// page whose recommendations and reviews are optional, dimmed under
// overload; the operator dial and API on a second, loopback listener.
//
//	go run ./examples/nethttp
//	curl 'http://127.0.0.1:8080/?user=alice'
//	open http://127.0.0.1:8081/   # the dial
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

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

// run serves the protected app on app and the operator surface on dial
// until ctx ends.
func run(ctx context.Context, app, dial net.Listener) error {
	b, err := brownout.New(brownout.Options{
		Features: []brownout.Feature{{Name: "recommendations"}, {Name: "reviews", Rank: 1}},
		Target:   300 * time.Millisecond,
		// The dial's listener below is loopback only: writes from this
		// machine need no token (never on another site's behalf).
		Loopback: isLoopback(dial.Addr()),
	})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.RegisterProvider(); err != nil {
		return err
	}
	flags := b.Client()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		user := openfeature.NewEvaluationContext(r.URL.Query().Get("user"), nil)
		fmt.Fprintln(w, "product page")
		if on, _ := flags.BooleanValue(r.Context(), "recommendations", false, user); on {
			fmt.Fprintln(w, "recommendations: …")
		}
		if on, _ := flags.BooleanValue(r.Context(), "reviews", false, user); on {
			fmt.Fprintln(w, "reviews: …")
		}
	})

	servers := []*http.Server{
		{Handler: b.Middleware(mux), ReadHeaderTimeout: 5 * time.Second},
		{Handler: b.Handler(), ReadHeaderTimeout: 5 * time.Second},
	}
	errs := make(chan error, 3)
	go func() { errs <- b.Run(ctx) }()
	for i, l := range []net.Listener{app, dial} {
		go func() { errs <- servers[i].Serve(l) }()
	}
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shut)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func isLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

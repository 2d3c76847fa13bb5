package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/brownout/brownout/api"
	httpproblem "github.com/brownout/brownout/internal/problem"
	"github.com/brownout/brownout/internal/server"
	"github.com/brownout/brownout/web"
)

// dialFront is the operator dial at a fixed address during a sale of our
// own shops (make demo): the page at /dial/, and /v1/ passed to the shop
// of the brownout run while it runs. Before and after, /v1/ answers 503
// with what is running, which the page shows while it waits. A nil
// *dialFront does nothing.
type dialFront struct {
	url string
	srv *http.Server

	mu struct {
		sync.Mutex
		proxy *httputil.ReverseProxy // nil: no brownout shop right now
		doing string                 // what runs now, for the 503
	}
}

func startDialFront(addr string) (*dialFront, error) {
	ln, err := server.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("sale: --dial %s: %w", addr, err)
	}
	f := &dialFront{url: "http://" + ln.Addr().String() + "/dial/?label=" + url.QueryEscape("11.11 sale, brownout run")}
	f.mu.doing = "the sale is starting"
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", http.RedirectHandler("/dial/", http.StatusFound))
	mux.Handle("GET /dial/", http.StripPrefix("/dial", web.Handler()))
	mux.HandleFunc("/v1/", f.api)
	var h http.Handler = mux
	if loopback(addr) {
		// The shop behind it takes every Host (a sale's shop is not told it
		// listens on loopback): this front refuses, as a loopback daemon
		// does, a page whose name was re-pointed at it.
		h = api.LocalOnly(mux)
	}
	f.srv = server.New(h)
	go f.srv.Serve(ln)
	return f, nil
}

// api passes /v1/ to the brownout run's shop, or says what runs instead.
func (f *dialFront) api(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	p, doing := f.mu.proxy, f.mu.doing
	f.mu.Unlock()
	if p != nil {
		p.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "2")
	httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("dial", "waiting"), Status: http.StatusServiceUnavailable,
		Detail: "this dial follows the brownout run; now " + doing})
}

// running notes which run goes now.
func (f *dialFront) running(name string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.mu.doing = fmt.Sprintf("running the %s run", name)
	f.mu.Unlock()
}

// follow points /v1/ at a shop ("" stops: the run is over).
func (f *dialFront) follow(base string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if base == "" {
		f.mu.proxy, f.mu.doing = nil, "the brownout run is over: see the report"
		return
	}
	u, _ := url.Parse(base)
	f.mu.proxy = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		// The Host the browser sent to this front, not the shop's own
		// (SetURL's): a tokenless write is checked against its Origin,
		// which names this front, and against a rebound name in it. The
		// shop of a sale takes no tokenless write anyway (it is not told
		// it listens on loopback), but the dial must find the same checks
		// as without the front.
		pr.Out.Host = pr.In.Host
		// A client that is not on this machine (a front on a non-loopback
		// address) is named, so that the shop takes its write for a
		// proxied one, not the local operator's. A local client's own
		// X-Forwarded-* are dropped (Rewrite does): this front is the proxy.
		if host, _, err := net.SplitHostPort(pr.In.RemoteAddr); err != nil || !loopback(net.JoinHostPort(host, "0")) {
			pr.SetXForwarded()
		}
	}} // event streams are flushed as they come (text/event-stream)
}

func (f *dialFront) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	f.srv.Shutdown(ctx) // the page's stream to a finished run has ended already
}

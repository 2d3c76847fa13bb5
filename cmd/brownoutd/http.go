package main

import (
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brownout/brownout/api"
	"github.com/brownout/brownout/web"
)

// echoServer is brownoutd's echo server over the API package.
type echoServer struct {
	*echo.Echo
	ready atomic.Bool
	// loaded, when set (replicas), says whether every service's replica
	// has read the store's state: until then /readyz says 503.
	loaded func() bool
}

func newEcho(a *api.API, reg *prometheus.Registry) *echoServer {
	return newEchoOf(oneService(a.Handler()), a.Local, reg, "/ofrep/*", "/v1/*", "/services/*")
}

// newEchoOf is the daemon's echo server: h at the given routes; the dial
// at /, metrics, health and readiness beside, each behind guard.
func newEchoOf(h http.Handler, guard func(http.Handler) http.Handler, reg prometheus.Gatherer, routes ...string) *echoServer {
	s := &echoServer{Echo: echo.New()}
	e := s.Echo
	e.HideBanner, e.HidePort = true, true
	eh := echo.WrapHandler(h)
	for _, r := range routes {
		e.Any(r, eh)
	}
	// The routes beside the API's are refused, as its reads are, to a
	// page whose name was re-pointed at a loopback daemon (api.Local).
	local := echo.WrapMiddleware(guard)
	// The operator dial at / (its files at /dial.js, /vendor/…); the
	// routes above and below are longer and win.
	dial := echo.WrapHandler(web.Handler())
	e.GET("/*", dial, local)
	e.HEAD("/*", dial, local)
	metrics := echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	healthz := func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }
	readyz := func(c echo.Context) error {
		if !s.ready.Load() {
			return c.String(http.StatusServiceUnavailable, "starting\n")
		}
		if s.loaded != nil && !s.loaded() {
			return c.String(http.StatusServiceUnavailable, "loading the store's state\n")
		}
		return c.String(http.StatusOK, "ready\n")
	}
	// GET and HEAD both: load balancers' health checks use either.
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		e.Add(m, "/metrics", metrics, local)
		e.Add(m, "/healthz", healthz, local)
		e.Add(m, "/readyz", readyz, local)
	}
	return s
}

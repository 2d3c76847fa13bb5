// Package web is the operator dial: one page, plain HTML, CSS and a small
// script over the controller's HTTP API (package api), embedded in the
// binary and served by brownoutd at / and by shop-demo serve at /dial.
//
// # What the page shows
//
//   - One dial per feature: its level (0–100 %, an element with
//     role="meter"), the law's computed level and the floor, its mode
//     (auto, override, shadow, stale, frozen, scheduled), an operator's
//     override or a scheduled cap with its reason; beside them the
//     pressure gauge with the hysteresis band (state.law: dim at or above
//     high, brighten under low, hold between) and the cascade's shed level.
//   - The controller's reason in words, its action and cause.
//   - A chart of the last 5 or 15 minutes: p99 and queue sojourn against
//     their targets, pressure and each feature's level, goodput beside
//     throughput and the shed rate (uPlot, vendored in vendor/ with its
//     licence; nothing is loaded from elsewhere).
//   - Recent events (/v1/events): overrides, freezes, mode changes, stale
//     periods, big level moves.
//   - Controls: override (slider, TTL, reason), release, freeze and
//     unfreeze, shadow. A write goes without a token first (a loopback
//     daemon without tokens takes it); on 401 the page says so and asks
//     for the operator token once, keeping it in the tab's sessionStorage.
//
// # Data flow
//
// On open: /v1/state, /v1/history?since=15m and /v1/events. Then live over
// EventSource("/v1/stream"): "state" events redraw the dials (and fetch
// new events), "tick" events append a point to the chart. When the stream
// drops the page says so, polls /v1/state and /v1/history every two
// seconds, and reconnects by itself; a new boot epoch in the state means
// the daemon restarted, and the page reloads history and events. The
// API is at /v1/ on the page's origin (under /services/{name}/ for a
// service's page, below). A ?label= in the page's URL is
// shown in its header (shop-demo sale --dial names the run it follows).
//
// Everything an operator typed (reasons) is set with textContent, never
// as HTML, and the handler sends a Content-Security-Policy that allows
// scripts, styles and connections to the page's own origin only.
//
// # A daemon of several services
//
// brownoutd with services: serves each service's routes under
// /services/{name}/, and the page there: it takes its API from its own
// path (/services/{name}/v1/…), names the service in its header with a
// link back to the list, and is otherwise the page above, for that
// service alone. At / the page finds GET /v1/state listing the services
// (no single service's state) and shows the list instead: each service
// with its mode, reason, pressure, shed level and tick lag, a bar per
// feature at its level (role="meter"), and a link to its own page;
// updated every two seconds from the same GET /v1/state (a daemon of
// several services has no stream at its root).
//
// The page keeps at most 15 minutes of points and 100 events, so its
// memory stays flat however long it runs. window.__dial exposes the
// chart's data and a way to feed updates without the network, for the
// browser test (cmd/brownoutd/dial_test.go) and the curious.
//
// Handler is safe for concurrent use; its files are fixed at build time.
package web

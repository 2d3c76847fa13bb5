// Package api is the HTTP surface of a brownout controller, plain
// net/http, mounted by brownoutd and by the shop's embedded mode alike:
//
//   - OFREP evaluation (POST /ofrep/v1/evaluate/flags/{key} and the bulk
//     POST /ofrep/v1/evaluate/flags), answered by the in-process
//     provider's code (provider.Evaluate), with an ETag on the bulk answer
//     over the boot epoch, the state's generation and the evaluation
//     context, and 304 on If-None-Match.
//   - CORS for the pages of Config.CORSOrigins (none by default) on
//     OFREP's evaluations and event stream only, so that OpenFeature's
//     web SDK evaluates from a page of another origin; never on the
//     operators' writes or the other reads (cors.go).
//   - The state (GET /v1/state), a per-tick history of at least 15
//     minutes (GET /v1/history) and events (GET /v1/events). On a
//     loopback listener, every read without a token (these, OFREP's, the
//     streams; API.Local for the server's other routes) must name the
//     listener in its Host and come from no other site's page: a page
//     whose name is re-pointed at 127.0.0.1 reads nothing (origin.go).
//   - The operators' writes: overrides (PUT/DELETE
//     /v1/features/{name}/override), freeze (POST /v1/freeze,
//     /v1/unfreeze), shadow (PUT /v1/shadow); named bearer tokens (or a
//     loopback-only listener without any, for writes that no browser sent
//     on another site's behalf: origin.go), an audit line and an event
//     per accepted change, and a state file that survives restarts. A
//     change, its audit and the file's write happen under one lock.
//   - The push source's endpoint (POST /v1/signals) behind its own tokens,
//     or on a loopback listener the writes' checks.
//
// An API is one service's. A daemon of several (brownoutd's services:)
// makes one per service, each with its own controller, tokens and state
// directory, names it in Config.Service (shown in the state), and mounts
// its routes under /services/{name}/ with Config.EventStreams pointing
// there; the routes themselves are the same.
//
// Versions and unknown fields. The /v1 bodies this package writes
// (problems aside) carry "v": 1; a client reading one must ignore fields it does not know, so
// that fields can be added within version 1 and a rolling upgrade mixes
// versions safely. The request decoders of the operators' writes are
// strict: an unknown field is a 400 (a typo must not pass silently), and
// "v" may be left out or be 1 (any other is a 400 saying so). OFREP
// request bodies follow OFREP (fields other than "context" are ignored).
// /v1 is described in openapi.yaml.
//
// Bounds. Every request body has bodyTimeout to arrive, also where the
// API is mounted in a server that package server did not build; a body
// is at most maxBody bytes (a push: the push source's own cap); at most
// Config.MaxStreams streams are open at once (Config.StreamCap: of every
// API that shares it). A stream holds no backlog — the newest pending
// event of each kind, its bytes encoded once and shared by every
// stream, none kept once written — and ends once a write to a client
// that stopped reading has waited streamWriteTimeout (10–15 s);
// Config.OwnStreamConns lets a stream over HTTP/1.1 write on its
// connection itself (streamout.go).
// API.Run is the control loop with its record (history, events, the
// tick's lag); use it in place of Controller.Run.
package api

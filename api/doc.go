// Package api is the HTTP surface of a brownout controller, plain
// net/http, mounted by brownoutd and by the shop's embedded mode alike:
//
//   - OFREP evaluation (POST /ofrep/v1/evaluate/flags/{key} and the bulk
//     POST /ofrep/v1/evaluate/flags), answered by the in-process
//     provider's code (provider.Evaluate), with an ETag on the bulk answer
//     over the boot epoch, the state's generation and the evaluation
//     context, and 304 on If-None-Match.
//   - The state (GET /v1/state), a per-tick history of at least 15
//     minutes (GET /v1/history) and events (GET /v1/events).
//   - The operators' writes: overrides (PUT/DELETE
//     /v1/features/{name}/override), freeze (POST /v1/freeze,
//     /v1/unfreeze), shadow (PUT /v1/shadow); named bearer tokens (or a
//     loopback-only listener without any), an audit line and an event per
//     accepted change, and a state file that survives restarts.
//   - The push source's endpoint (POST /v1/signals) behind its own tokens.
//
// Bodies carry "v": 1; decoders ignore fields they do not know, so a
// rolling upgrade mixes versions safely. /v1 is described in openapi.yaml.
// API.Run is the control loop with its record (history, events, the
// tick's lag); use it in place of Controller.Run.
package api

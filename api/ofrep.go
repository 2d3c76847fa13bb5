package api

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"

	"github.com/open-feature/go-sdk/openfeature"
)

// OFREP (../shared/reference/ofrep/openapi.yaml): single and bulk
// evaluation with dynamic context, answered by the same provider code as
// in-process evaluation.

// ofrepRequest is an OFREP evaluation request body.
type ofrepRequest struct {
	Context json.RawMessage `json:"context"`
}

type ofrepSuccess struct {
	Key      string         `json:"key"`
	Value    any            `json:"value"`
	Reason   string         `json:"reason"`
	Variant  string         `json:"variant,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

type ofrepFailure struct {
	Key          string `json:"key,omitempty"`
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails,omitempty"`
}

type ofrepBulk struct {
	Flags        []any          `json:"flags"`
	Metadata     map[string]any `json:"metadata,omitempty"`
	EventStreams []EventStream  `json:"eventStreams,omitempty"`
}

// ofrepError is a request-level failure: status and OFREP error code.
type ofrepError struct {
	status int
	code   string
	detail string
}

func (e *ofrepError) Error() string { return e.detail }

// parseContext reads an OFREP request body into a flattened evaluation
// context: PARSE_ERROR for a body that is not the request's JSON,
// INVALID_CONTEXT for a context that is not an object or whose
// targetingKey is not a string.
func parseContext(w http.ResponseWriter, r *http.Request) (openfeature.FlattenedContext, *ofrepError) {
	var req ofrepRequest
	if status, err := decode(w, r, &req, false); err != nil {
		if status == http.StatusBadRequest {
			return nil, &ofrepError{http.StatusBadRequest, "PARSE_ERROR", err.Error()}
		}
		return nil, &ofrepError{status, "PARSE_ERROR", err.Error()}
	}
	return contextOf(req.Context)
}

func contextOf(raw json.RawMessage) (openfeature.FlattenedContext, *ofrepError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, &ofrepError{http.StatusBadRequest, "INVALID_CONTEXT", "the request has no context object"}
	}
	fc := openfeature.FlattenedContext{}
	if err := json.Unmarshal(raw, &fc); err != nil {
		return nil, &ofrepError{http.StatusBadRequest, "INVALID_CONTEXT", "context: want a JSON object: " + err.Error()}
	}
	if k, ok := fc[openfeature.TargetingKey]; ok {
		if _, isString := k.(string); !isString {
			return nil, &ofrepError{http.StatusBadRequest, "INVALID_CONTEXT", "context: targetingKey must be a string"}
		}
	}
	return fc, nil
}

func (a *API) evalAuth(w http.ResponseWriter, r *http.Request) bool {
	toks := a.tokens.Load().eval
	if len(toks) == 0 {
		return true
	}
	if _, ok := token(r, toks); ok {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="brownout ofrep"`)
	writeJSON(w, http.StatusUnauthorized, ofrepFailure{ErrorCode: "GENERAL", ErrorDetails: "an evaluation token is required (Authorization: Bearer or X-API-Key)"})
	return false
}

// evalOne is POST /ofrep/v1/evaluate/flags/{key}.
func (a *API) evalOne(w http.ResponseWriter, r *http.Request) int {
	if !a.evalAuth(w, r) {
		return http.StatusUnauthorized
	}
	key := r.PathValue("key")
	fc, perr := parseContext(w, r)
	if perr != nil {
		writeJSON(w, perr.status, ofrepFailure{Key: key, ErrorCode: perr.code, ErrorDetails: perr.detail})
		return perr.status
	}
	res, status := a.evaluate(r, key, fc)
	writeJSON(w, status, res)
	return status
}

// evaluate answers one flag: a success, or a failure and its status.
func (a *API) evaluate(r *http.Request, key string, fc openfeature.FlattenedContext) (any, int) {
	v, d := a.prov.Evaluate(r.Context(), key, fc)
	if err := d.Error(); err != nil {
		code, detail := splitResolution(err.Error())
		status := http.StatusBadRequest
		switch code {
		case string(openfeature.FlagNotFoundCode):
			status = http.StatusNotFound
		case string(openfeature.GeneralCode):
			status = http.StatusInternalServerError
		}
		return ofrepFailure{Key: key, ErrorCode: code, ErrorDetails: detail}, status
	}
	return ofrepSuccess{Key: key, Value: v, Reason: string(d.Reason), Variant: d.Variant, Metadata: d.FlagMetadata}, http.StatusOK
}

// splitResolution splits a ResolutionError's text, "CODE: detail".
func splitResolution(s string) (code, detail string) {
	code, detail, ok := strings.Cut(s, ": ")
	if !ok {
		return "GENERAL", s
	}
	return code, detail
}

// evalBulk is POST /ofrep/v1/evaluate/flags: every flag for one context,
// with an ETag over the boot epoch, the state's generation and the
// context, and 304 on If-None-Match.
func (a *API) evalBulk(w http.ResponseWriter, r *http.Request) int {
	if !a.evalAuth(w, r) {
		return http.StatusUnauthorized
	}
	fc, perr := parseContext(w, r)
	if perr != nil {
		writeJSON(w, perr.status, ofrepFailure{ErrorCode: perr.code, ErrorDetails: perr.detail})
		return perr.status
	}
	st := a.ctl.State()
	etag := a.etag(st.Seq(), fc)
	w.Header().Set("ETag", etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	out := ofrepBulk{Metadata: map[string]any{"generation": int64(st.Seq()), "version": etag, "flagConfigEtag": a.BulkETag(st.Seq())}, EventStreams: a.cfg.EventStreams}
	for _, key := range a.prov.Flags() {
		res, _ := a.evaluate(r, key, fc)
		out.Flags = append(out.Flags, res)
	}
	writeJSON(w, http.StatusOK, out)
	return http.StatusOK
}

// etag covers the boot epoch (a restarted daemon never matches an old
// tag), the state's generation and the evaluation context.
func (a *API) etag(gen uint64, fc openfeature.FlattenedContext) string {
	h := fnv.New64a()
	b, _ := json.Marshal(fc) // maps marshal with sorted keys: canonical
	h.Write(b)
	return `"` + strconv.FormatInt(a.boot, 36) + "-" + strconv.FormatUint(gen, 10) + "-" + strconv.FormatUint(h.Sum64(), 36) + `"`
}

// BulkETag returns the flag configuration's etag at generation gen:
// what OFREP's event stream (/ofrep/v1/events) announces in a
// refetchEvaluation's "etag", and the bulk evaluation's metadata names as
// "flagConfigEtag". It is not the bulk answer's HTTP ETag, which also
// covers the evaluation context ("<boot>-<gen>-<context hash>", see etag):
// one stream serves every context, and OFREP's ADR 0008 makes the event's
// etag SSE metadata for the refetch (its flagConfigEtag query parameter),
// not a validator for If-None-Match. The HTTP ETag of a bulk answer
// begins with this one, without its closing quote.
func (a *API) BulkETag(gen uint64) string {
	return `"` + strconv.FormatInt(a.boot, 36) + "-" + strconv.FormatUint(gen, 10) + `"`
}

func etagMatch(header, etag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}

// counted counts an OFREP handler's answers by endpoint and status.
func (a *API) counted(endpoint string, h func(w http.ResponseWriter, r *http.Request) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		status := h(w, r)
		a.metrics.ofrep(endpoint, status)
	}
}

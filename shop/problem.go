package shop

import (
	"net/http"
	"time"

	"github.com/brownout/brownout/internal/jsonbody"
	httpproblem "github.com/brownout/brownout/internal/problem"
)

// maxBody bounds a request body: a cart or checkout is a few hundred
// bytes; anything past this is refused with 413 before it is parsed.
const maxBody = 16 << 10

// problem writes an application/problem+json answer (RFC 9457) of type
// urn:brownout:shop:<typ>.
func problem(w http.ResponseWriter, status int, typ, detail string) {
	httpproblem.Write(w, httpproblem.Problem{Type: httpproblem.Type("shop", typ), Status: status, Detail: detail, Reason: reasonOf(typ)})
}

// decode reads a JSON body into v: at most maxBody bytes, one value, no
// unknown fields, 10 s to send it. The error says what was wrong, for the
// client.
func decode(w http.ResponseWriter, r *http.Request, v any) (status int, err error) {
	return jsonbody.Decode(w, r, v, jsonbody.Options{Max: maxBody, Strict: true, Timeout: 10 * time.Second})
}

// reasonOf names the refusal reasons of signals.Reason that the shop's own
// refusals are, so that clients (and the load generator) can tell them.
func reasonOf(typ string) string {
	if typ == "rate-limited" {
		return "rate_limit"
	}
	return ""
}

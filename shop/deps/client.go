package deps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/brownout/brownout/fallback"
)

// Errors a StatusError matches with errors.Is.
var (
	// ErrRateLimited matches a 429.
	ErrRateLimited = errors.New("deps: rate limited")
	// ErrUnavailable matches a 5xx.
	ErrUnavailable = errors.New("deps: dependency unavailable")
	// ErrVoided matches the payment gateway's refusal to charge under a
	// key whose charge was voided or whose key was cancelled (409,
	// charge-voided): nothing is charged under that key.
	ErrVoided = errors.New("deps: the charge under this key was voided")
)

// StatusError is a dependency's answer that is not a success.
//
// It unwraps to a *fallback.StatusError, so that fallback.Retryable and a
// fallback.Guard judge it (429 and 502–504 retried, Retry-After honoured;
// 4xx never), and it matches ErrRateLimited (429) and ErrUnavailable (5xx)
// with errors.Is. Transport errors (timeouts, refused connections, the
// context's errors) are returned wrapped as they are, not as StatusError.
type StatusError struct {
	// Op is the call: "payment charge", "sms send" or "recs get".
	Op string
	// Code is the HTTP status.
	Code int
	// RetryAfter is the server's Retry-After (at most a minute), if any.
	RetryAfter time.Duration
	// Detail is the problem's detail, or the start of a body that is not
	// a problem.
	Detail string
	// Type is the problem's type ("urn:brownout:deps:…"), if the body was
	// one.
	Type string
}

// Error describes the answer.
func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deps: %s: %d %s", e.Op, e.Code, http.StatusText(e.Code))
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// Unwrap returns the fallback package's view of the answer.
func (e *StatusError) Unwrap() error {
	return &fallback.StatusError{Status: e.Code, RetryAfter: e.RetryAfter}
}

// Is matches ErrRateLimited for a 429, ErrUnavailable for a 5xx and
// ErrVoided for the gateway's charge-voided refusal.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return e.Code == http.StatusTooManyRequests
	case ErrUnavailable:
		return e.Code >= 500
	case ErrVoided:
		return e.Code == http.StatusConflict && e.Type == problemType(voidedSlug)
	}
	return false
}

// PaymentClient calls a PaymentGateway.
type PaymentClient struct {
	// BaseURL is the gateway's, e.g. Server.URL.
	BaseURL string
	// HTTP is the client to use; nil: http.DefaultClient.
	HTTP *http.Client
}

// Charge charges amountCents for an order and returns the charge id. With
// a key (sent as the Idempotency-Key header and in the body), a retry of
// the same charge gets the same id and is not charged twice; reusing a
// key for another order or amount is a 409, and so is a key whose charge
// was voided or that was cancelled (matching ErrVoided).
func (c PaymentClient) Charge(ctx context.Context, order string, amountCents int64, key string) (string, error) {
	body, _ := json.Marshal(ChargeRequest{Order: order, AmountCents: amountCents, IdempotencyKey: key})
	var out Charge
	if err := call(ctx, c.HTTP, http.MethodPost, c.BaseURL+"/v1/charges", body, key, "payment charge", &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("deps: payment charge: the answer has no charge id")
	}
	return out.ID, nil
}

// Void gives charge id back (idempotent: voiding twice is fine).
func (c PaymentClient) Void(ctx context.Context, id string) error {
	// A write is JSON, an empty object at least (internal/local).
	return call(ctx, c.HTTP, http.MethodPost, c.BaseURL+"/v1/charges/"+url.PathEscape(id)+"/void", []byte("{}"), "", "payment void", nil)
}

// Cancel voids whatever was charged under key, and makes sure nothing
// will be: for a caller that does not know whether its charge was made
// (idempotent). It returns the voided charge's id, or "" if none was
// made.
func (c PaymentClient) Cancel(ctx context.Context, key string) (string, error) {
	body, _ := json.Marshal(CancelRequest{IdempotencyKey: key})
	var out Cancellation
	if err := call(ctx, c.HTTP, http.MethodPost, c.BaseURL+"/v1/cancels", body, "", "payment cancel", &out); err != nil {
		return "", err
	}
	return out.Charge, nil
}

// Charges lists the charges the gateway made (its GET /admin/charges).
func (c PaymentClient) Charges(ctx context.Context) ([]ChargeRecord, error) {
	var out []ChargeRecord
	if err := callN(ctx, c.HTTP, http.MethodGet, c.BaseURL+"/admin/charges", nil, "", "payment charges", &out, maxListing); err != nil {
		return nil, err
	}
	return out, nil
}

// SMSClient calls an SMSProvider.
type SMSClient struct {
	// BaseURL is the provider's, e.g. Server.URL.
	BaseURL string
	// HTTP is the client to use; nil: http.DefaultClient.
	HTTP *http.Client
}

// Send sends body to the number to. The key is required: the provider
// delivers each key once, so retries must reuse it (a duplicate is
// answered 200 and Send returns nil). Past the contract rate it returns a
// *StatusError with Code 429 and RetryAfter; a 5xx is a *StatusError too.
func (c SMSClient) Send(ctx context.Context, to, body, key string) error {
	if key == "" {
		return errors.New("deps: sms send: an idempotency key is required")
	}
	b, _ := json.Marshal(SMSRequest{To: to, Body: body})
	return call(ctx, c.HTTP, http.MethodPost, c.BaseURL+"/v1/messages", b, key, "sms send", nil)
}

// Deliveries returns how many times each key's message reached the
// handset (the provider's GET /admin/deliveries).
func (c SMSClient) Deliveries(ctx context.Context) (map[string]int, error) {
	var out map[string]int
	if err := callN(ctx, c.HTTP, http.MethodGet, c.BaseURL+"/admin/deliveries", nil, "", "sms deliveries", &out, maxListing); err != nil {
		return nil, err
	}
	return out, nil
}

// RecsClient calls a RecsEngine.
type RecsClient struct {
	// BaseURL is the engine's, e.g. Server.URL.
	BaseURL string
	// HTTP is the client to use; nil: http.DefaultClient.
	HTTP *http.Client
}

// Get returns the product ids recommended with product for user (user may
// be empty).
func (c RecsClient) Get(ctx context.Context, product, user string) ([]string, error) {
	q := url.Values{"product": {product}}
	if user != "" {
		q.Set("user", user)
	}
	var out []string
	if err := call(ctx, c.HTTP, http.MethodGet, c.BaseURL+"/v1/recommendations?"+q.Encode(), nil, "", "recs get", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// maxResponse bounds the answers the clients read; maxListing the admin
// listings (a charge or a delivery is about 150 bytes: a million of them).
const (
	maxResponse = 1 << 20
	maxListing  = 256 << 20
)

// call makes one request and decodes a 2xx answer's JSON into out (if not
// nil); other answers become a *StatusError.
func call(ctx context.Context, hc *http.Client, method, u string, body []byte, key, op string, out any) error {
	return callN(ctx, hc, method, u, body, key, op, out, maxResponse)
}

// callN is call with an answer of at most limit bytes.
func callN(ctx context.Context, hc *http.Client, method, u string, body []byte, key, op string, out any, limit int64) error {
	if hc == nil {
		hc = http.DefaultClient
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("deps: %s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("deps: %s: %w", op, err)
	}
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
		resp.Body.Close()
	}()
	if err := fallback.CheckResponse(resp); err != nil {
		se := &StatusError{Op: op, Code: resp.StatusCode}
		if fe, ok := errors.AsType[*fallback.StatusError](err); ok {
			se.RetryAfter = fe.RetryAfter
		}
		se.Type, se.Detail = detail(resp)
		return se
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(out); err != nil {
		return fmt.Errorf("deps: %s: reading the answer: %w", op, err)
	}
	return nil
}

// detail reads a problem's type and detail, or the start of another body.
func detail(resp *http.Response) (typ, detail string) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var p problem
	if json.Unmarshal(b, &p) == nil && p.Detail != "" {
		return p.Type, p.Detail
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return "", s
}

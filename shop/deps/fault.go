package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// Bounds of the knobs: Validate refuses values outside them.
const (
	// MaxLatency bounds Latency and SlowLatency.
	MaxLatency = 10 * time.Minute
	// MaxRate bounds SMSFault.Rate, in messages per second.
	MaxRate = 1e6
	// MaxBurst bounds SMSFault.Burst.
	MaxBurst = 1_000_000
)

// Fault is the fault knobs of the payment gateway and the recommendation
// engine, and the common part of the SMS provider's ([SMSFault]).
//
// In JSON (GET and PUT /admin/fault) the durations are Go duration
// strings:
//
//	{"latency":"30ms","slow_latency":"2s","slow":false,"error_rate":0}
type Fault struct {
	// Latency is how long every request takes in normal mode.
	Latency time.Duration
	// SlowLatency replaces Latency while Slow is set.
	SlowLatency time.Duration
	// Slow switches the dependency to SlowLatency.
	Slow bool
	// ErrorRate is the share of requests, in [0, 1], that fail with 503
	// (after the latency, like a dependency whose upstream failed).
	ErrorRate float64
}

// Delay is the latency in force: SlowLatency while Slow, else Latency.
func (f Fault) Delay() time.Duration {
	if f.Slow {
		return f.SlowLatency
	}
	return f.Latency
}

// Validate reports every knob out of its bounds: durations in
// [0, MaxLatency], ErrorRate in [0, 1].
func (f Fault) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"latency", f.Latency}, {"slow_latency", f.SlowLatency}} {
		if d.v < 0 || d.v > MaxLatency {
			errs = append(errs, fmt.Errorf("%s: must be between 0s and %v, got %v", d.name, MaxLatency, d.v))
		}
	}
	if !(f.ErrorRate >= 0 && f.ErrorRate <= 1) {
		errs = append(errs, fmt.Errorf("error_rate: must be between 0 and 1, got %v", f.ErrorRate))
	}
	return errors.Join(errs...)
}

// MarshalJSON writes the knobs with duration strings.
func (f Fault) MarshalJSON() ([]byte, error) { return json.Marshal(f.wire()) }

// UnmarshalJSON sets the knobs present in data and keeps the others (a
// JSON null keeps a knob too), so that {"slow":true} changes only Slow.
// It is strict: data must be one JSON object with known fields only, and
// the result must pass Validate; on error f is unchanged.
func (f *Fault) UnmarshalJSON(data []byte) error {
	w := f.wire()
	if err := decodeStrict(data, &w, faultFields); err != nil {
		return err
	}
	g, err := w.fault()
	if err != nil {
		return err
	}
	if err := g.Validate(); err != nil {
		return err
	}
	*f = g
	return nil
}

// SMSFault is the SMS provider's knobs: the common ones and its contract
// rate, a token bucket shared by every client.
//
//	{"latency":"200ms","slow_latency":"30s","slow":false,"error_rate":0,"rate":500,"burst":50}
type SMSFault struct {
	// Fault is the knobs every dependency has.
	Fault
	// Rate is the contract: messages per second across all clients.
	// Past it (and the Burst), requests get 429 with Retry-After.
	Rate float64
	// Burst is the token bucket's size.
	Burst int
}

// Validate reports every knob out of its bounds: those of Fault, Rate in
// (0, MaxRate], Burst in [1, MaxBurst].
func (f SMSFault) Validate() error {
	errs := []error{f.Fault.Validate()}
	if !(f.Rate > 0 && f.Rate <= MaxRate) {
		errs = append(errs, fmt.Errorf("rate: must be more than 0 and at most %g messages per second, got %v", float64(MaxRate), f.Rate))
	}
	if f.Burst < 1 || f.Burst > MaxBurst {
		errs = append(errs, fmt.Errorf("burst: must be between 1 and %d, got %d", MaxBurst, f.Burst))
	}
	return errors.Join(errs...)
}

// MarshalJSON writes the knobs with duration strings.
func (f SMSFault) MarshalJSON() ([]byte, error) {
	return json.Marshal(smsFaultWire{faultWire: f.Fault.wire(), Rate: f.Rate, Burst: f.Burst})
}

// UnmarshalJSON sets the knobs present in data and keeps the others, like
// Fault.UnmarshalJSON.
func (f *SMSFault) UnmarshalJSON(data []byte) error {
	w := smsFaultWire{faultWire: f.Fault.wire(), Rate: f.Rate, Burst: f.Burst}
	if err := decodeStrict(data, &w, smsFaultFields); err != nil {
		return err
	}
	c, err := w.fault()
	if err != nil {
		return err
	}
	g := SMSFault{Fault: c, Rate: w.Rate, Burst: w.Burst}
	if err := g.Validate(); err != nil {
		return err
	}
	*f = g
	return nil
}

// DefaultPaymentFault is the payment gateway's normal behaviour: 30 ms,
// 2 s when slow, no errors.
func DefaultPaymentFault() Fault {
	return Fault{Latency: 30 * time.Millisecond, SlowLatency: 2 * time.Second}
}

// DefaultSMSFault is the SMS provider's normal behaviour: 200 ms, 30 s
// when slow, no errors, 500 messages/s with a burst of 50.
func DefaultSMSFault() SMSFault {
	return SMSFault{
		Fault: Fault{Latency: 200 * time.Millisecond, SlowLatency: 30 * time.Second},
		Rate:  500, Burst: 50,
	}
}

// DefaultRecsFault is the recommendation engine's normal behaviour: 50 ms,
// 600 ms when slow, no errors.
func DefaultRecsFault() Fault {
	return Fault{Latency: 50 * time.Millisecond, SlowLatency: 600 * time.Millisecond}
}

// faultWire is Fault on the wire. Durations are strings, parsed after
// decoding so that their errors can name the field.
type faultWire struct {
	Latency     string  `json:"latency"`
	SlowLatency string  `json:"slow_latency"`
	Slow        bool    `json:"slow"`
	ErrorRate   float64 `json:"error_rate"`
}

type smsFaultWire struct {
	faultWire
	Rate  float64 `json:"rate"`
	Burst int     `json:"burst"`
}

var (
	faultFields    = []string{"latency", "slow_latency", "slow", "error_rate"}
	smsFaultFields = append(faultFields[:len(faultFields):len(faultFields)], "rate", "burst")
)

func (f Fault) wire() faultWire {
	return faultWire{Latency: f.Latency.String(), SlowLatency: f.SlowLatency.String(), Slow: f.Slow, ErrorRate: f.ErrorRate}
}

func (w faultWire) fault() (Fault, error) {
	f := Fault{Slow: w.Slow, ErrorRate: w.ErrorRate}
	var errs []error
	for _, d := range []struct {
		name string
		s    string
		v    *time.Duration
	}{{"latency", w.Latency, &f.Latency}, {"slow_latency", w.SlowLatency, &f.SlowLatency}} {
		v, err := time.ParseDuration(d.s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration (want e.g. \"200ms\" or \"30s\")", d.name, d.s))
			continue
		}
		*d.v = v
	}
	return f, errors.Join(errs...)
}

// decodeStrict decodes one JSON object into v, refusing unknown fields
// and trailing data, and explains errors in terms of the knobs.
func decodeStrict(data []byte, v any, known []string) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return errors.New(`empty body: want a JSON object such as {"slow":true}`)
	}
	if trimmed[0] != '{' {
		return fmt.Errorf(`want a JSON object such as {"slow":true}, got %s`, jsonKind(trimmed[0]))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return explain(err, known)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func jsonKind(c byte) string {
	switch {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return "something that is not JSON"
}

func explain(err error, known []string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errors.New("malformed JSON: the object is not closed")
	case errors.As(err, &typ):
		return fmt.Errorf("%s: want %s, got %s", typ.Field, wantOf(typ.Type), typ.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s (the knobs are %s)", name, strings.Join(known, ", "))
	}
	return err
}

func wantOf(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return `a duration string such as "200ms"`
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	case reflect.Int:
		return "an integer"
	}
	return t.String()
}

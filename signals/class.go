package signals

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class is a request's priority class. The zero value is Critical; requests
// that carry no class are Default (see ClassOf).
type Class uint8

// The three classes of the sources: A (cart, checkout, payment), B (product
// pages, reviews), C (recommendations, analytics).
const (
	Critical Class = iota
	Default
	Sheddable
	NumClasses = 3
)

// PriorityHeader carries a request's class downstream so that a dependency
// sheds the same requests its caller would (no priority inversion). Any
// client can set it, so a server believes it only from its own services
// (MiddlewareConfig.TrustPriority, shed.Config.TrustPriority); from anyone
// else it may lower a request's class, never raise it (LowerClass).
const PriorityHeader = "X-Priority"

var classNames = [NumClasses]string{"critical", "default", "sheddable"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// ParseClass parses "critical", "default" or "sheddable" (case-insensitive,
// surrounding space ignored; the letters A, B and C are accepted as well).
func ParseClass(s string) (Class, error) {
	s = strings.TrimSpace(s)
	for i, n := range classNames {
		if strings.EqualFold(s, n) {
			return Class(i), nil
		}
	}
	switch s {
	case "A", "a":
		return Critical, nil
	case "B", "b":
		return Default, nil
	case "C", "c":
		return Sheddable, nil
	}
	return Default, fmt.Errorf("signals: unknown priority class %q (want critical, default or sheddable)", truncate(s))
}

// ClassOf returns the class named by r's X-Priority header, or Default when
// the header is absent or unknown. It trusts the header, critical
// included: use it for requests from your own services only, and
// LowerClass for anyone's.
func ClassOf(r *http.Request) Class {
	if c, ok := HeaderClass(r); ok {
		return c
	}
	return Default
}

// HeaderClass returns the class r's X-Priority header names; ok is false
// when the header is absent or names no class.
func HeaderClass(r *http.Request) (c Class, ok bool) {
	v := r.Header.Get(PriorityHeader)
	if v == "" {
		return Default, false
	}
	c, err := ParseClass(v)
	return c, err == nil
}

// LowerClass returns c, lowered by r's X-Priority header when that names a
// lower priority (critical > default > sheddable): a client may give up
// priority, never claim it, so the header needs no trust. An absent or
// unknown header leaves c.
func LowerClass(r *http.Request, c Class) Class {
	if h, ok := HeaderClass(r); ok && h > c {
		return h
	}
	return c
}

// PriorityClassifier returns classify (Default for every request when
// nil) with the X-Priority header applied: when trust is false the header
// may only lower the class (LowerClass); when true, a header that names a
// class is the class, raised or lowered. MiddlewareConfig and
// shed.Config apply it to their Classify and TrustPriority.
func PriorityClassifier(classify func(*http.Request) Class, trust bool) func(*http.Request) Class {
	switch {
	case trust && classify == nil:
		return ClassOf
	case trust:
		return func(r *http.Request) Class {
			if c, ok := HeaderClass(r); ok {
				return c
			}
			return classify(r)
		}
	case classify == nil:
		return func(r *http.Request) Class { return LowerClass(r, Default) }
	}
	return func(r *http.Request) Class { return LowerClass(r, classify(r)) }
}

// Reason says why a request was refused before its work started.
type Reason uint8

const (
	// ReasonMaxWait: the request would have waited longer than its class's
	// maximum queue time.
	ReasonMaxWait Reason = iota
	// ReasonCoDel: the queue has stood above its sojourn target for an
	// interval and CoDel dropped the request.
	ReasonCoDel
	// ReasonDeadline: the request's deadline passed before work started.
	ReasonDeadline
	// ReasonConcurrency: the concurrency limit was reached and the request
	// could not queue.
	ReasonConcurrency
	// ReasonRateLimit: the client exceeded its rate limit.
	ReasonRateLimit
	// ReasonShedLevel: the controller's cascade sheds this class.
	ReasonShedLevel
	// ReasonCanceled: the client went away while the request was queued.
	ReasonCanceled
	NumReasons = 7
)

var reasonNames = [NumReasons]string{"max_wait", "codel", "deadline", "concurrency", "rate_limit", "shed_level", "canceled"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// DeadlineHeader carries an absolute deadline in RFC 3339 with
// milliseconds, e.g. 2026-11-11T00:00:01.250Z.
const DeadlineHeader = "X-Request-Deadline"

// TimeoutHeader carries a relative budget in the grpc-timeout format: an
// integer of at most 8 digits followed by a unit H, M, S, m (ms), u (µs) or
// n (ns), e.g. "250m".
const TimeoutHeader = "Grpc-Timeout"

// ErrBadDeadline is wrapped by the errors of ParseDeadline and ParseTimeout.
var ErrBadDeadline = errors.New("signals: bad deadline")

// ParseDeadline parses an X-Request-Deadline value.
func ParseDeadline(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not RFC 3339", ErrBadDeadline, DeadlineHeader, truncate(s))
	}
	return t, nil
}

// ParseTimeout parses a grpc-timeout value.
func ParseTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || len(s) > 9 {
		return 0, fmt.Errorf("%w: %s %q: want 1 to 8 digits and a unit", ErrBadDeadline, TimeoutHeader, truncate(s))
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %q: want 1 to 8 digits and a unit", ErrBadDeadline, TimeoutHeader, truncate(s))
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("%w: %s %q: unknown unit %q", ErrBadDeadline, TimeoutHeader, truncate(s), s[len(s)-1])
	}
	// 8 digits of hours overflow time.Duration; cap at the largest value.
	if n > uint64(1<<63-1)/uint64(unit) {
		return 1<<63 - 1, nil
	}
	return time.Duration(n) * unit, nil
}

// DeadlineOf returns the earliest of r's context deadline, its
// X-Request-Deadline header and now plus its Grpc-Timeout header. ok is
// false when there is none. Malformed headers are ignored and reported in
// err, so that callers may count them; the other sources still apply.
func DeadlineOf(r *http.Request, now time.Time) (deadline time.Time, ok bool, err error) {
	deadline, ok = r.Context().Deadline()
	if v := r.Header.Get(DeadlineHeader); v != "" {
		t, perr := ParseDeadline(v)
		if perr != nil {
			err = perr
		} else if !ok || t.Before(deadline) {
			deadline, ok = t, true
		}
	}
	if v := r.Header.Get(TimeoutHeader); v != "" {
		d, perr := ParseTimeout(v)
		if perr != nil {
			err = errors.Join(err, perr)
		} else if t := now.Add(d); d < 1<<62 && (!ok || t.Before(deadline)) {
			deadline, ok = t, true
		}
	}
	return deadline, ok, err
}

// FormatDeadline formats t for the X-Request-Deadline header.
func FormatDeadline(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// truncate keeps error messages about hostile input short.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

package fleet

import (
	"unicode/utf8"

	"github.com/brownout/brownout/signals"
)

// Names read from other processes: a class or a reason as Collector
// exports it in a label and a push carries it in a key, and a bound on
// what an error message quotes of them.

// classNamed returns the class whose String is name, exactly: the wire
// carries the names Collector and Pusher write, never a person's
// spelling (signals.ParseClass is for those).
func classNamed(name string) (signals.Class, bool) {
	for c := range signals.Class(signals.NumClasses) {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}

// reasonNamed returns the reason whose String is name, exactly.
func reasonNamed(name string) (signals.Reason, bool) {
	for r := range signals.Reason(signals.NumReasons) {
		if r.String() == name {
			return r, true
		}
	}
	return 0, false
}

// maxQuoted bounds what an error message quotes of a value from outside
// (a URL, a header, a version): enough to recognise it, never a hostile
// megabyte in a log line.
const maxQuoted = 40

// truncate keeps error messages about hostile input short.
func truncate(s string) string {
	if len(s) > maxQuoted {
		n := maxQuoted
		for n > 0 && !utf8.RuneStart(s[n]) { // (not mid-character)
			n--
		}
		return s[:n] + "…"
	}
	return s
}

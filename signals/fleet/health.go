package fleet

import (
	"fmt"
	"strings"
	"time"

	"github.com/brownout/brownout/signals"
)

// health tracks a source's SourceHealth fields; guarded by the source.
type health struct {
	ok                       bool
	lastSuccess, lastErrorAt time.Time
	lastError                string
	errors                   uint64
}

// record notes an attempt at now that ended with err.
func (h *health) record(now time.Time, err error) {
	h.ok = err == nil
	if err == nil {
		h.lastSuccess = now
		return
	}
	h.fail(now, err.Error())
}

// maxHealthError bounds SourceHealth.LastError: a source's error can
// join one part per target or instance (a push source's, per refusing
// instance), and the health is in every state brownoutd publishes.
const maxHealthError = 1 << 10

func (h *health) fail(now time.Time, msg string) {
	if len(msg) > maxHealthError {
		msg = strings.ToValidUTF8(msg[:maxHealthError], "") + fmt.Sprintf("… (%d bytes)", len(msg))
	}
	h.lastError, h.lastErrorAt = msg, now
	h.errors++
}

func (h *health) report(name string) signals.SourceHealth {
	return signals.SourceHealth{Name: name, OK: h.ok, LastSuccess: h.lastSuccess, LastError: h.lastError, LastErrorAt: h.lastErrorAt, Errors: h.errors}
}

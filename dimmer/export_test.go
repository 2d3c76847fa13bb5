package dimmer

import (
	"fmt"
	"time"
)

// DebugTrim renders the trim's state, for the explore harness.
func (c *Controller) DebugTrim() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu
	return fmt.Sprintf("b=%.3f acc=%.0f up=%.2f down=%.2f span=%.2f dir=%d good=%.2f bad=%.2f fails=%d dimmed=%v mark=%.0f landed=%s wait=%s slow=%.0f held=%.0f", m.brightness, m.acc, m.upStep, m.downStep, m.span, m.lastDir, m.good, m.bad, m.fails, m.dimmed, m.loadMark, m.at.Sub(m.landAt).Round(time.Second), m.holdWait, m.slowLoad, m.holdLoad)
}

package dimmer

import (
	"fmt"
	"strings"
	"time"
)

// schedule evaluates the scheduled caps at now into m.caps, m.capBy and
// m.active. It does not allocate. Callers hold the lock (or own c).
func (c *Controller) schedule(now time.Time) {
	m := &c.mu
	for i := range m.caps {
		m.caps[i], m.capBy[i] = 1, -1
	}
	for k, p := range c.cfg.Schedule {
		m.active[k] = p.ActiveAt(now)
		if !m.active[k] {
			continue
		}
		mx := c.quantize(p.Max)
		capped := func(i int) {
			if m.capBy[i] < 0 || mx < m.caps[i] {
				m.caps[i], m.capBy[i] = mx, k
			}
		}
		if i := c.capped[k]; i >= 0 {
			capped(i)
			continue
		}
		for i := range c.cfg.Features {
			capped(i)
		}
	}
}

// capped maps each schedule entry of cfg to the index of the feature it
// caps, −1 for every feature; once per configuration, not per step.
func capped(cfg *Config) []int {
	index := make(map[string]int, len(cfg.Features))
	for i, f := range cfg.Features {
		index[f.Name] = i
	}
	out := make([]int, len(cfg.Schedule))
	for k, p := range cfg.Schedule {
		out[k] = -1
		if p.Feature != "" {
			out[k] = index[p.Feature] // withDefaults checked it exists
		}
	}
	return out
}

// ceiling is the highest brightness the scheduled caps let act: above it
// no published level moves. Going down the ladder, a capped feature's
// stretch is dead above its cap; a feature capped at or under its floor
// is dead throughout, and the next one decides. The law's brightness is
// kept at or under the ceiling (anti-windup). Callers hold the lock.
func (c *Controller) ceiling() float64 {
	m := &c.mu
	top := 1.0
	for i, f := range c.cfg.Features {
		if m.capBy[i] < 0 || m.caps[i] >= 1 {
			break
		}
		lo, hi := c.span(i)
		if cp := m.caps[i]; cp > f.Floor {
			return lo + cp*(hi-lo)
		}
		top = lo
	}
	return top
}

// scheduleReason describes the schedule for the state's reason: the caps
// that bind, those active but not binding, and those that started or
// ended since the last published state. Callers hold the lock.
func (c *Controller) scheduleReason() string {
	m := &c.mu
	if len(c.cfg.Schedule) == 0 {
		return ""
	}
	c.levels() // m.binds
	old := c.state.Load()
	var parts []string
	for k, p := range c.cfg.Schedule {
		was := old != nil && len(old.core.active) == len(m.active) && old.core.active[k]
		if !m.active[k] {
			if was {
				parts = append(parts, fmt.Sprintf("scheduled cap ended (%s)", p.Reason))
			}
			continue
		}
		var bound []string
		for i, f := range c.cfg.Features {
			if m.capBy[i] == k && m.binds[i] {
				bound = append(bound, f.Name)
			}
		}
		until := p.Until().Format("Jan 2 15:04:05 MST")
		if len(bound) > 0 {
			parts = append(parts, fmt.Sprintf("%s capped at %.0f%% until %s by schedule: %s",
				strings.Join(bound, ", "), 100*c.quantize(p.Max), until, p.Reason))
			continue
		}
		parts = append(parts, fmt.Sprintf("scheduled cap of %s at %.0f%% until %s not binding (%s)",
			p.target(), 100*c.quantize(p.Max), until, p.Reason))
	}
	return strings.Join(parts, "; ")
}

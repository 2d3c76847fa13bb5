package dimmer

import (
	"fmt"
	"os"
)

func (c *Controller) DebugTrim() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu
	return fmt.Sprintf("b=%.3f acc=%.0f up=%.2f down=%.2f span=%.2f dir=%d good=%.2f bad=%.2f fails=%d dimmed=%v mark=%.0f", m.brightness, m.acc, m.upStep, m.downStep, m.span, m.lastDir, m.good, m.bad, m.fails, m.dimmed, m.loadMark)
}

func init() {
	if v := os.Getenv("MAXFALL"); v != "" {
		fmt.Sscan(v, &maxFall)
	}
}


func init() {
	if v := os.Getenv("FIRSTAT"); v != "" {
		fmt.Sscan(v, &FirstAt)
	}
}

func init() {
	if v := os.Getenv("FIRSTSETTLE"); v != "" {
		fmt.Sscan(v, &FirstSettle)
	}
}

func init() {
	if v := os.Getenv("FALLLOG"); v != "" {
		fmt.Sscan(v, &FallLog)
	}
}

func init() {
	if v := os.Getenv("FIRSTP"); v != "" {
		fmt.Sscan(v, &FirstP)
	}
	if v := os.Getenv("FIRSTN"); v != "" {
		fmt.Sscan(v, &FirstN)
	}
}

func init() {
	if v := os.Getenv("FULLEV"); v != "" {
		FullEvidence = true
	}
	if v := os.Getenv("FULLCLAMP"); v != "" {
		fmt.Sscan(v, &FullClamp)
	}
}

func init() {
	if v := os.Getenv("LOGEV"); v != "" {
		LogEv = true
	}
}

func init() {
	if v := os.Getenv("FIRSTUP"); v != "" {
		fmt.Sscan(v, &FirstUp)
	}
}

func init() {
	if v := os.Getenv("FLOORLOG"); v != "" {
		FloorLog = true
	}
}

func init() {
	if v := os.Getenv("FULLAT"); v != "" {
		fmt.Sscan(v, &FullAt)
	}
	if v := os.Getenv("FLOORZONE"); v != "" {
		fmt.Sscan(v, &FloorZone)
	}
}

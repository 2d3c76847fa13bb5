package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestShutdownForSaysWhy: the streams' last event gives the reason
// ShutdownFor was given (a daemon that stops serving the service), and
// the default one without it.
func TestShutdownForSaysWhy(t *testing.T) {
	for _, tc := range []struct{ why, says string }{
		{"", "the daemon is stopping"},
		{"the service is no longer served", "the service is no longer served"},
	} {
		f := newFixture(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		ch, _ := follow(t, ctx, f.srv.URL+"/v1/stream")
		och, _ := follow(t, ctx, f.srv.URL+"/ofrep/v1/events")
		next(t, ch, "state", 5*time.Second)
		if tc.why == "" {
			f.api.Shutdown()
		} else {
			f.api.ShutdownFor(tc.why)
		}
		for _, c := range []<-chan sseEvent{ch, och} {
			ev := next(t, c, "shutdown", 5*time.Second)
			assert.Contains(t, ev.data, `"reason":"`+tc.says+`"`)
			for range c {
			}
		}
		cancel()
	}
}

package api

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/internal/testsrv"
	"github.com/brownout/brownout/signals"
	"github.com/brownout/brownout/signals/fleet"
)

// changingSource fails with another long error on every snapshot (as a
// push source joining one error per refusing instance does) while failing
// is set.
type changingSource struct {
	mu      sync.Mutex
	n       int
	failing bool
}

func (s *changingSource) Snapshot(_ context.Context, now time.Time) (signals.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if !s.failing {
		return signals.Snapshot{Time: now}, nil
	}
	return signals.Snapshot{Time: now}, fmt.Errorf("fleet: push: %d: %s", s.n, strings.Repeat("instance x: bucket bounds differ; ", 3000))
}

func (s *changingSource) set(failing bool) {
	s.mu.Lock()
	s.failing = failing
	s.mu.Unlock()
}

// TestAFailingSourceLogsALineAMinute: a source whose error changes on
// every tick is logged at once, then once a minute with how often it
// changed meanwhile, each line bounded; its recovery once.
func TestAFailingSourceLogsALineAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testsrv.Buffer
		a, err := New(Config{Controller: newController(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		src := &changingSource{failing: true}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx, src) }()
		time.Sleep(10*time.Minute + time.Second/2) // 600 ticks, 600 errors
		synctest.Wait()
		src.set(false)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		cancel()
		<-done

		var warns, backs []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			switch {
			case strings.Contains(l, `msg="brownout: signals"`):
				warns = append(warns, l)
			case strings.Contains(l, "signals back"):
				backs = append(backs, l)
			}
		}
		assert.Len(t, warns, 10, "one a minute")
		assert.Len(t, backs, 1)
		for _, l := range warns {
			assert.Less(t, len(l), 2*maxLoggedError, "bounded")
		}
		if assert.NotEmpty(t, warns) {
			assert.Contains(t, warns[0], "changes=1")
			assert.Contains(t, warns[len(warns)-1], "changes=60")
			assert.Contains(t, warns[0], "bytes)")
		}
	})
}

// TestAQuietFleetIsNotWarnedOfAtStart: a push source that no app has
// pushed to yet is not a failure within its first window after the
// daemon starts ("none pushed in the last 15s" came a second after
// start); past it, it is warned of.
func TestAQuietFleetIsNotWarnedOfAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testsrv.Buffer
		a, err := New(Config{Controller: newController(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		require.NoError(t, err)
		src := fleet.NewPushSource(fleet.PushConfig{}) // a 10-s window, 15-s expiry
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); a.Run(ctx, src) }()
		time.Sleep(9*time.Second + time.Second/2)
		synctest.Wait()
		assert.NotContains(t, logs.String(), "none pushed", "within the window after start")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Contains(t, logs.String(), "none pushed", "past it")
		cancel()
		<-done
	})
}

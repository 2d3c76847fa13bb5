//go:build brownout_procpin

package signals

import (
	"runtime"
	"testing"
)

// TestShardHintIsAP: in the pinned build the hint is a P's id.
func TestShardHintIsAP(t *testing.T) {
	if h, n := shardHint(), runtime.GOMAXPROCS(0); h >= n {
		t.Errorf("shardHint() = %d, want < GOMAXPROCS = %d", h, n)
	}
}

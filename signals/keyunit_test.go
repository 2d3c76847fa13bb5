package signals

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeyUnit: every key has one unit, durations exactly the IsDuration
// keys.
func TestKeyUnit(t *testing.T) {
	for k := range NumKeys {
		assert.Equal(t, k.IsDuration(), k.Unit() == UnitSeconds, k.String())
	}
	assert.Equal(t, UnitRatio, RejectRatio.Unit())
	assert.Equal(t, UnitPerSecond, ArrivalRate.Unit())
	assert.Equal(t, UnitCount, GateLimit.Unit())
}

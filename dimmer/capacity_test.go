package dimmer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCapacityReadingOverĈReplacesIt: a saturated period's completions
// are at most what the service can do. The first seconds of a run read
// low (four workers behind a gate whose limit is still opening: 1.7 s of
// work a second), K is raised since to what the service carried within
// target, and a later saturated period reads 4.2 ± 0.1: it shows Ĉ too
// low and replaces it — it must not average with the start-up's into a bound
// under K (the average cut a K of 3.6 to 2.6). A reading under Ĉ still
// moves it by measureWeight, and enough of them bring K down.
func TestCapacityReadingOverĈReplacesIt(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var e capacity
	e.saturated(t0, 1.7, 0, 5*time.Second)
	assert.InDelta(t, setShare*1.7, e.k, 1e-9, "the first reading sets K")
	e.carried(t0.Add(time.Minute), 3.6)
	e.saturated(t0.Add(5*time.Minute), 4.5, 6, 5*time.Second)
	assert.InDelta(t, 3.6+measureWeight*(4.5-3.6), e.c, 1e-9, "a reading over Ĉ within its noise moves it by measureWeight")
	e.saturated(t0.Add(5*time.Minute+time.Second), 4.2, 0.1, 5*time.Second)
	assert.InDelta(t, 4.0, e.c, 1e-9, "one beyond its noise replaces it with its lower bound")
	assert.InDelta(t, 3.6, e.k, 1e-9, "K carried within target stays")

	e.saturated(t0.Add(6*time.Minute), 3.0, 0, 5*time.Second)
	assert.InDelta(t, 4.0+measureWeight*(3.0-4.0), e.c, 1e-9, "a reading under Ĉ moves it by measureWeight")
	assert.InDelta(t, 3.6, e.k, 1e-9)
	for i := range 5 {
		e.saturated(t0.Add(7*time.Minute+time.Duration(i)*time.Second), 3.0, 0, 5*time.Second)
	}
	assert.Less(t, e.k, 3.4, "a service that does less, period after period, bounds K")
	assert.Equal(t, capMeasured, e.src)
}

package gate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestDemandOverloadEndsWithTheSpike: default requests bring three times
// what the server completes for 20 s, then 65 % of it, with a request
// waiting at every other fold (the calm's bursts: the server is not
// saturated, and X holds). The class is over capacity
// through the spike and within it again within 2 s of its end: over the
// 5-s rates alone it stayed over for about 9 s, and CoDel refused the
// calm's bursts meanwhile.
func TestDemandOverloadEndsWithTheSpike(t *testing.T) {
	const tput = 100.0 // cost units a second the server completes
	var d demand
	now := t0
	run := func(arrive float64, dur time.Duration, each func()) {
		for end := now.Add(dur); now.Before(end); {
			now = now.Add(foldEvery)
			d.arrive(signals.Default, micro(arrive*foldEvery.Seconds()), now)
			d.done.Add(micro(min(arrive, tput) * foldEvery.Seconds()))
			d.fold(now, arrive > tput || now.Sub(t0)/foldEvery%2 == 0)
			if each != nil {
				each()
			}
		}
	}
	run(3*tput, 20*time.Second, nil)
	require.True(t, d.over[signals.Default], "three times the throughput: over capacity")
	spikeEnd, last := now, time.Time{}
	run(0.65*tput, 15*time.Second, func() {
		if d.over[signals.Default] {
			last = now
		}
	})
	assert.LessOrEqual(t, last.Sub(spikeEnd), 2*time.Second, "within capacity again within 2 s of the spike's end")

	// A steady overload of 1.3 times the throughput stays over capacity.
	run(1.3*tput, 10*time.Second, nil)
	overFolds := 0
	run(1.3*tput, 10*time.Second, func() {
		if d.over[signals.Default] {
			overFolds++
		}
	})
	assert.Equal(t, int(10*time.Second/foldEvery), overFolds, "1.3 times the throughput: over capacity at every fold")
}

// TestDemandFirstFoldAfterACalm: a server that admitted everything on the
// fast path for 20 s (which counts without folding) queues for the first
// time: its first fold reads the calm's rates over the 20 s they were
// counted in, not over one fold's time.
func TestDemandFirstFoldAfterACalm(t *testing.T) {
	var d demand
	const rate = 150.0 // units a second, arriving and done
	d.arrive(signals.Default, micro(20*rate), t0)
	d.done.Add(micro(20 * rate))
	now := t0.Add(20 * time.Second)
	d.fold(now, true)
	for range 20 {
		now = now.Add(foldEvery)
		d.arrive(signals.Default, micro(rate*foldEvery.Seconds()), now)
		d.done.Add(micro(rate * foldEvery.Seconds()))
		d.fold(now, true)
	}
	assert.InDelta(t, rate, d.rate[signals.Default].v, 1)
	assert.InDelta(t, rate, d.recent[signals.Default].v, 1)
	assert.InDelta(t, rate, d.throughput(), 1)
}

// TestDemandFirstFoldRemembersTheCalm: the first fold of a server that
// queues for the first time at a spike's start keeps the calm before it,
// so the 5-s rate rises as a 5-s mean does: a second into a spike of
// 225 units a second after 20 s at 30, it reads under half the spike,
// while the last second's reads most of it.
func TestDemandFirstFoldRemembersTheCalm(t *testing.T) {
	var d demand
	d.arrive(signals.Critical, micro(20*30), t0)
	now := t0.Add(20 * time.Second)
	d.fold(now, true)
	for range 20 {
		now = now.Add(foldEvery)
		d.arrive(signals.Critical, micro(225*foldEvery.Seconds()), now)
		d.fold(now, true)
	}
	assert.Less(t, d.rate[signals.Critical].v, 0.5*225, "the 5-s rate a second into the spike")
	assert.Greater(t, d.recent[signals.Critical].v, 0.5*225, "the 1-s rate a second into the spike")
}

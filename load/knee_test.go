package load

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestKneeAnalysis(t *testing.T) {
	ms := time.Millisecond
	k := &Knee{At: -1, Steps: []KneeStep{
		{Rate: 100, Goodput: 100, P50: 10 * ms, P99: 20 * ms},
		{Rate: 200, Goodput: 200, P50: 11 * ms, P99: 25 * ms},
		{Rate: 300, Goodput: 300, P50: 14 * ms, P99: 40 * ms},
		{Rate: 400, Goodput: 390, P50: 60 * ms, P99: 400 * ms},
		{Rate: 500, Goodput: 395, P50: 900 * ms, P99: 2000 * ms},
	}}
	k.analyse()
	assert.Equal(t, 3, k.At, "p99 three times the unloaded one")
	assert.Equal(t, 395.0, k.Capacity, "what the saturated steps served")
	assert.Equal(t, 10*ms, k.Base)
	assert.Equal(t, [3]int{40, 119, 316}, k.Suggest.QueueBound)
	assert.InDelta(t, 3.95, k.Suggest.Concurrency, 1e-9, "Little's law: μ × service time")
	transient := &Knee{At: -1, Steps: []KneeStep{
		{Rate: 300, Goodput: 300, P50: 64 * ms, P99: 67 * ms},
		{Rate: 350, Goodput: 350, P50: 439 * ms, P99: 665 * ms}, // the queue still absorbing
		{Rate: 400, Goodput: 316.7, P50: 1532 * ms, P99: 1991 * ms},
	}}
	transient.analyse()
	assert.Equal(t, 1, transient.At)
	assert.Equal(t, 316.7, transient.Capacity, "a step serving its rate while its queue grows is not the capacity")
	assert.Equal(t, 100*ms, k.Suggest.P99Target, "1.5 × 40 ms, rounded up to 50 ms")
	assert.Equal(t, 60*ms, k.Suggest.Timeout)
	var b bytes.Buffer
	assert.NoError(t, k.WriteTable(&b))
	assert.Contains(t, b.String(), "← the knee")

	// An unprotected server that collapses past its knee: the steps after
	// it serve nothing, and say nothing of the capacity.
	collapse := &Knee{Steps: []KneeStep{
		{Rate: 40, Goodput: 40, P50: 5 * ms, P99: 9 * ms},
		{Rate: 120, Goodput: 120, P50: 6 * ms, P99: 15 * ms},
		{Rate: 200, Goodput: 199, P50: 9 * ms, P99: 60 * ms},
		{Rate: 240, Goodput: 0.9, P50: 2000 * ms, P99: 2000 * ms},
		{Rate: 280, Goodput: 0, Errors: 280},
	}}
	collapse.analyse()
	assert.Equal(t, 2, collapse.At)
	assert.Equal(t, 199.0, collapse.Capacity, "not the 0.9/s of the collapsed steps")
	assert.Equal(t, 3, collapse.Collapsed)
	assert.Equal(t, [3]int{20, 60, 160}, collapse.Suggest.QueueBound)
	assert.InDelta(t, 0.995, collapse.Suggest.Concurrency, 1e-9)
	b.Reset()
	assert.NoError(t, collapse.WriteTable(&b))
	assert.Contains(t, b.String(), "collapsed: at 240/s")

	flat := &Knee{At: -1, Steps: []KneeStep{{Rate: 50, Goodput: 50, P50: ms, P99: 2 * ms}, {Rate: 100, Goodput: 100, P50: ms, P99: 3 * ms}}}
	flat.analyse()
	assert.Equal(t, -1, flat.At)
	b.Reset()
	assert.NoError(t, flat.WriteTable(&b))
	assert.Contains(t, b.String(), "no knee within the steps")
}

func TestKneeConfigErrors(t *testing.T) {
	for _, c := range []KneeConfig{{URL: "not a url"}, {URL: "/relative"}, {URL: "http://127.0.0.1:1/", Steps: 500}, {URL: "http://127.0.0.1:1/", From: -1}} {
		_, err := FindKnee(t.Context(), c)
		assert.Error(t, err, "%+v", c)
	}
}

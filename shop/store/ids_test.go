package store

import (
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOrderIDs(t *testing.T) {
	var g idGen
	now := time.Now()
	format := regexp.MustCompile(`^o-[0-9a-f]{14}-[0-9a-f]{12}$`)
	prev := ""
	for i := range 10000 {
		at := now
		if i%3 == 0 {
			at = now.Add(-time.Second) // a clock step back
		}
		id := g.next(at)
		require.Regexp(t, format, id)
		require.Greater(t, id, prev, "ids increase")
		prev = id
	}
	// Concurrent: all distinct.
	seen := sync.Map{}
	var dup atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if _, loaded := seen.LoadOrStore(g.next(time.Now()), true); loaded {
					dup.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, dup.Load())
	// Ids of later times sort later, across generators.
	var h idGen
	assert.Less(t, h.next(now), h.next(now.Add(time.Microsecond)))
}

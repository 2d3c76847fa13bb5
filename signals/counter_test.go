package signals

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCounterConcurrent(t *testing.T) {
	c := NewCounter()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Inc()
			}
		})
	}
	wg.Wait()
	c.Add(5)
	assert.Equal(t, uint64(8005), c.Load())
}

func BenchmarkCounter(b *testing.B) {
	c := NewCounter()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

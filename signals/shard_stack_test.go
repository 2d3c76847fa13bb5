//go:build !brownout_procpin

package signals

import (
	"sync"
	"testing"
)

// TestShardHintSpreadsGoroutines: goroutines alive at once have disjoint
// stacks, so their hints spread over the shards; one goroutine's hint is
// stable between calls from the same place.
func TestShardHintSpreadsGoroutines(t *testing.T) {
	const n = 64
	var (
		wg, started sync.WaitGroup
		mu          sync.Mutex
		seen        [maxShards]int
		release     = make(chan struct{})
	)
	started.Add(n)
	for range n {
		wg.Go(func() {
			a, b := shardHint(), shardHint()
			if a != b {
				t.Errorf("one goroutine: shardHint() = %d then %d, want the same", a, b)
			}
			mu.Lock()
			seen[a&(maxShards-1)]++
			mu.Unlock()
			started.Done()
			<-release // keep every stack alive until all have been hashed
		})
	}
	started.Wait()
	close(release)
	wg.Wait()
	used := 0
	for _, c := range seen {
		if c > 0 {
			used++
		}
		if c > n/2 {
			t.Errorf("one shard got %d of %d goroutines: %v", c, n, seen)
		}
	}
	if used < maxShards/2 {
		t.Errorf("%d goroutines used %d of %d shards, want ≥ %d: %v", n, used, maxShards, maxShards/2, seen)
	}
}

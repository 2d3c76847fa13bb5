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

// TestStackHashSpreadsNeighbours: stacks next to each other, whatever their
// size (2 KiB to 32 KiB apart), share a shard of maxShards about one time
// in maxShards, not more.
func TestStackHashSpreadsNeighbours(t *testing.T) {
	const n = 10000
	base := uintptr(0x2d25adf80000)
	for _, size := range []uintptr{2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10} {
		same := 0
		for i := range uintptr(n) {
			p := base + i*size
			if stackHash(p)&(maxShards-1) == stackHash(p+size)&(maxShards-1) {
				same++
			}
		}
		if got, want := float64(same)/n, 1.0/maxShards; got > 1.5*want {
			t.Errorf("stacks %d KiB apart share a shard %.1f%% of the time, want about %.1f%%", size>>10, 100*got, 100*want)
		}
	}
}

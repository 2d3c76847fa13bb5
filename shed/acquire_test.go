package shed

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// Acquire without a client key draws at random, so that a shed level of
// 0.05 refuses about 5 % of the class, not all of it; with keys, the same
// clients are refused while the level holds.
func TestAcquireShedsAShare(t *testing.T) {
	level := 1.05 // every sheddable and 5 % of default requests
	s, err := New(Config{ShedLevel: func() float64 { return level }})
	require.NoError(t, err)
	refused := func(key func(i int) string) int {
		n := 0
		for i := range 4000 {
			release, err := s.Acquire(context.Background(), Request{Class: signals.Default, Key: key(i)})
			if err != nil {
				require.ErrorIs(t, err, ErrShed)
				n++
				continue
			}
			release(false)
		}
		return n
	}
	anon := refused(func(int) string { return "" })
	assert.InDelta(t, 200, anon, 60, "no key: about 5 %% of 4000 refused, got %d", anon)
	keyed := refused(func(i int) string { return "user-" + strconv.Itoa(i%500) })
	assert.InDelta(t, 200, keyed, 120, "keys: about 5 %% of the clients, got %d", keyed)
	admitted := func(key string) bool {
		release, err := s.Acquire(context.Background(), Request{Class: signals.Default, Key: key})
		if err != nil {
			return false
		}
		release(false)
		return true
	}
	sticky := 0
	for i := range 500 {
		key := "user-" + strconv.Itoa(i)
		first := admitted(key)
		if second := admitted(key); first != second {
			sticky++
		}
	}
	assert.Zero(t, sticky, "the same key gets the same answer")
	release, err := s.Acquire(context.Background(), Request{Class: signals.Critical})
	require.NoError(t, err, "critical is never shed")
	release(false)
	var re *RefusedError
	_, err = s.Acquire(context.Background(), Request{Class: signals.Sheddable, Key: "x"})
	require.True(t, errors.As(err, &re))
	assert.Equal(t, signals.ReasonShedLevel, re.Reason)
}

// Releasing twice — through Acquire's release function or a Permit — is a
// no-op: it must never drive the cost in flight negative, which would let
// a limit of 2 admit 3.
func TestReleaseTwiceIsANoOp(t *testing.T) {
	s, err := New(Config{Gate: GateConfig{Limit: LimitConfig{Initial: 2, Min: 2, Max: 2, Fixed: true}}})
	require.NoError(t, err)
	ctx := context.Background()
	rel, err := s.Acquire(ctx, Request{Class: signals.Critical})
	require.NoError(t, err)
	rel(false)
	rel(false) // again: nothing
	p, ok := s.TryAcquire(t0, signals.Default, 1)
	require.True(t, ok)
	s.Release(t0, p)
	s.Release(t0, p) // again: nothing, even after the ticket went back to the pool
	assert.Zero(t, s.Stats().InFlight)

	// Two in flight fill a limit of 2; a stale Permit's release must not
	// free a slot it does not hold.
	a, ok1 := s.TryAcquire(t0, signals.Default, 1)
	b, ok2 := s.TryAcquire(t0, signals.Default, 1)
	require.True(t, ok1 && ok2)
	s.Release(t0, p) // stale: its ticket may now be a or b
	_, ok3 := s.TryAcquire(t0, signals.Default, 1)
	assert.False(t, ok3, "a limit of 2 admits 2")
	s.Release(t0, a)
	s.Release(t0, b)
	assert.Zero(t, s.Stats().InFlight)

	// Acquire with a deadline already passed is refused at no cost.
	_, err = s.Acquire(ctx, Request{Class: signals.Critical, Deadline: time.Now().Add(-time.Second)})
	assert.ErrorIs(t, err, ErrShed)
}

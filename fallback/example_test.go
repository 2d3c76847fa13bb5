package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/brownout/brownout/fallback"
)

// Recommendations behind a guard, with the last good result as fallback.
func ExampleCall() {
	guard, _ := fallback.New(fallback.Config{Name: "recommendations", MaxAttempts: 1})
	cache := fallback.NewCache[[]string](fallback.CacheConfig{Fresh: time.Minute, MaxStale: time.Hour})
	ctx := context.Background()
	up := func(context.Context) ([]string, error) { return []string{"rice cooker", "kettle"}, nil }
	down := func(context.Context) ([]string, error) { return nil, &fallback.StatusError{Status: 503} }

	load := func(call func(context.Context) ([]string, error)) func(context.Context) ([]string, error) {
		return func(ctx context.Context) ([]string, error) { return fallback.Call(ctx, guard, call) }
	}
	recs, _, _ := cache.Get(ctx, "user-7", load(up))
	fmt.Println(recs)

	// The dependency fails; a cached result is served, marked stale when
	// older than a minute (here it is fresh, so no call is made at all).
	recs, r, err := cache.Get(ctx, "user-7", load(down))
	fmt.Println(recs, r.Stale, err)

	_, err = fallback.Call(ctx, guard, down)
	var se *fallback.StatusError
	fmt.Println(errors.As(err, &se), fallback.Retryable(err))
	// Output:
	// [rice cooker kettle]
	// [rice cooker kettle] false <nil>
	// true true
}

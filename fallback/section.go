package fallback

import "context"

// Section renders an optional part of a response: when on is false (the
// feature is dimmed) or render fails, it returns placeholder instead, so
// that handlers don't branch by hand and an optional part never fails the
// page. The error of a failed render is returned beside the placeholder
// for logging or metrics.
//
//	recs, _ := fallback.Section(ctx, flags.BooleanValue(...), placeholder, renderRecommendations)
func Section[T any](ctx context.Context, on bool, placeholder T, render func(context.Context) (T, error)) (T, error) {
	if !on {
		return placeholder, nil
	}
	v, err := render(ctx)
	if err != nil {
		return placeholder, err
	}
	return v, nil
}

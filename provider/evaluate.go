package provider

import (
	"context"
	"strings"

	"github.com/open-feature/go-sdk/openfeature"
)

// Evaluate answers flag for the flattened context fc whatever its type:
// what a remote protocol (OFREP) needs, where the client does not say
// the type. "<feature>" is a boolean, "<feature>.level" a float,
// FeaturesFlag an object; the answer is the one the typed evaluation
// gives (same bucket, metadata and counters). The value is the default
// of the type (false, 0, nil) when the detail carries an error.
func (p *Provider) Evaluate(ctx context.Context, flag string, fc openfeature.FlattenedContext) (any, openfeature.ProviderResolutionDetail) {
	switch {
	case flag == FeaturesFlag:
		r := p.ObjectEvaluation(ctx, flag, nil, fc)
		return r.Value, r.ProviderResolutionDetail
	case strings.HasSuffix(flag, LevelSuffix):
		r := p.FloatEvaluation(ctx, flag, 0, fc)
		return r.Value, r.ProviderResolutionDetail
	default:
		r := p.BooleanEvaluation(ctx, flag, false, fc)
		return r.Value, r.ProviderResolutionDetail
	}
}

// Flags lists every flag the provider serves now: each feature's boolean
// and level flags, in ladder order, then FeaturesFlag.
func (p *Provider) Flags() []string {
	st := p.src.State()
	out := make([]string, 0, 2*st.NumFeatures()+1)
	for i := range st.NumFeatures() {
		name := st.FeatureName(i)
		out = append(out, name, name+LevelSuffix)
	}
	return append(out, FeaturesFlag)
}

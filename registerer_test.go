package brownout_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout"
)

// services returns the values of the label service on the series of
// metric name in reg ("" for a series without it).
func services(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			out = append(out, serviceOf(m))
		}
	}
	return out
}

func serviceOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "service" {
			return l.GetValue()
		}
	}
	return ""
}

// TestBrownoutsShareARegisterer: the Brownouts of an app of several
// services (fleet mode) or domains (embedded) share one registerer,
// their series told apart by the label service; one Brownout with
// neither adds no label.
func TestBrownoutsShareARegisterer(t *testing.T) {
	t.Run("fleet, two services", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		for _, svc := range []string{"shop", "search"} {
			b, err := brownout.New(brownout.Options{Daemon: "http://127.0.0.1:18090", Service: svc, NoPush: true, Registerer: reg,
				Features: []brownout.Feature{{Name: "recs"}}})
			require.NoError(t, err, svc)
			defer b.Close()
		}
		assert.ElementsMatch(t, []string{"shop", "search"}, services(t, reg, "brownout_requests_in_flight"))
	})
	t.Run("embedded, two domains", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		for _, d := range []string{"shop-flags", "search-flags"} {
			b, err := brownout.New(brownout.Options{Domain: d, Registerer: reg, Features: features()})
			require.NoError(t, err, d)
			defer b.Close()
		}
		assert.ElementsMatch(t, []string{"shop-flags", "search-flags"}, services(t, reg, "brownout_requests_in_flight"))
		assert.ElementsMatch(t, []string{"shop-flags", "search-flags"}, services(t, reg, "brownout_generation"), "the operator API's")
	})
	t.Run("one, no label", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		b, err := brownout.New(brownout.Options{Registerer: reg, Features: features()})
		require.NoError(t, err)
		defer b.Close()
		assert.Equal(t, []string{""}, services(t, reg, "brownout_requests_in_flight"))
		assert.Equal(t, []string{""}, services(t, reg, "brownout_generation"))
	})
}

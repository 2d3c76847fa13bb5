package sim

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/brownout/brownout/internal/race"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestScenarioGolden pins each built-in scenario's summary and series
// (seed 1) so that any change in the lab's behaviour shows up in review.
// Run `go test ./sim -run Golden -update` to accept a deliberate change.
func TestScenarioGolden(t *testing.T) {
	if race.Enabled {
		t.Skip("single-threaded lab: make test runs it without -race")
	}
	for _, name := range []string{"overload-sweep", "burst", "capacity-dip", "sale", "brownout", "dependency-slowdown"} {
		t.Run(name, func(t *testing.T) {
			s, err := Lookup(name)
			require.NoError(t, err)
			var got bytes.Buffer
			require.NoError(t, WriteCases(&got, "table", s.Run(Options{Seed: 1}), true))
			path := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, got.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "missing golden file: run with -update")
			assert.Equal(t, string(want), got.String())
		})
	}
}

func TestFormats(t *testing.T) {
	s, _ := Lookup("burst")
	cases := s.Run(Options{Seed: 2})
	for _, f := range Formats() {
		var b bytes.Buffer
		require.NoError(t, WriteCases(&b, f, cases, false), f)
		assert.NotEmpty(t, b.String(), f)
	}
	assert.ErrorContains(t, WriteCases(&bytes.Buffer{}, "xml", cases, false), `unknown format "xml"`)
	_, err := Lookup("nope")
	assert.ErrorContains(t, err, `unknown scenario "nope"`)
}

func BenchmarkOverloadSweep(b *testing.B) {
	s, _ := Lookup("overload-sweep")
	b.ReportAllocs()
	for b.Loop() {
		s.Run(Options{Seed: 1})
	}
}

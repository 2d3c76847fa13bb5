package sim

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeedsByteIdentical(t *testing.T) {
	for name, file := range map[string]string{
		"overload": "overload-policies.out",
		"codel":    "codel-vs-taildrop.out",
		"retry":    "retry-storm.out",
	} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "seeds", file))
			require.NoError(t, err)
			var got bytes.Buffer
			require.NoError(t, Seeds()[name].Run(&got))
			assert.Equal(t, string(want), got.String(), "output of %s differs from the JavaScript's", file)
		})
	}
}

func BenchmarkSeeds(b *testing.B) {
	for name, s := range Seeds() {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				s.Run(io.Discard)
			}
		})
	}
}

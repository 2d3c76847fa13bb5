package provider

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMurmur3KnownVectors(t *testing.T) {
	for in, want := range map[string]uint32{
		"":      0,
		"a":     0x3c2569b2,
		"ab":    0x9bbfd75f,
		"abc":   0xb3dd93fa,
		"abcd":  0x43ed676a,
		"hello": 0x248bfa47,
		"The quick brown fox jumps over the lazy dog": 0x2e4ff723,
	} {
		assert.Equal(t, want, murmur3(in, ""), "%q", in)
		// Split anywhere: the same as hashing the concatenation.
		for i := 0; i <= len(in); i++ {
			assert.Equal(t, want, murmur3(in[:i], in[i:]), "%q split at %d", in, i)
		}
	}
}

// TestFlagdFractionalVectors: the same users land in the same buckets as
// under flagd (cases from flagd's own tests, shared/reference).
func TestFlagdFractionalVectors(t *testing.T) {
	raw, err := os.ReadFile("../../shared/reference/flagd-fractional-vectors.json")
	if os.IsNotExist(err) {
		raw, err = os.ReadFile("testdata/flagd-fractional-vectors.json")
	}
	require.NoError(t, err)
	var v struct {
		Cases []struct {
			Bucketing string  `json:"bucketing"`
			Variants  [][]any `json:"variants"`
			Want      string  `json:"want"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &v))
	require.NotEmpty(t, v.Cases)
	for _, c := range v.Cases {
		var total uint64
		for _, vr := range c.Variants {
			total += uint64(vr[1].(float64))
		}
		b := bucket(murmur3(c.Bucketing, ""), total)
		var cum uint64
		got := ""
		for _, vr := range c.Variants {
			cum += uint64(vr[1].(float64))
			if b < cum {
				got = vr[0].(string)
				break
			}
		}
		assert.Equal(t, c.Want, got, "%s", c.Bucketing)
	}
}

func TestStickyMonotonicAndAccurate(t *testing.T) {
	const n = 20000
	keys := make([]string, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range keys {
		keys[i] = "user-" + strconv.FormatUint(r.Uint64(), 36)
	}
	prev := make([]bool, n)
	for l := 0; l <= 100; l++ {
		level := float64(l) / 100
		on := 0
		for i, k := range keys {
			got := On("recommendations", k, level)
			if prev[i] && !got {
				t.Fatalf("raising the level to %v removed %s", level, k)
			}
			prev[i] = got
			if got {
				on++
			}
		}
		assert.InDelta(t, level, float64(on)/n, 0.01, "on-share at level %v", level)
	}
	assert.False(t, On("x", "y", 0))
	assert.True(t, On("x", "y", 1))
}

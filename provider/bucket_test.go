package provider

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/dimmer"
	"github.com/brownout/brownout/signals"
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

// refMurmur3 is MurmurHash3 x86_32 with seed 0, written from Austin
// Appleby's reference (MurmurHash3.cpp) over one byte slice, to check the
// provider's streaming two-string version against something it does not
// share code with.
func refMurmur3(data []byte) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	scramble := func(k uint32) uint32 { return bits.RotateLeft32(k*c1, 15) * c2 }
	var h uint32 // seed
	nblocks := len(data) / 4
	for i := range nblocks {
		h ^= scramble(binary.LittleEndian.Uint32(data[4*i:]))
		h = bits.RotateLeft32(h, 13)*5 + 0xe6546b64
	}
	tail := data[4*nblocks:]
	var k uint32
	for i := len(tail) - 1; i >= 0; i-- {
		k = k<<8 | uint32(tail[i])
	}
	if len(tail) > 0 {
		h ^= scramble(k)
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// refBucket is flagd's fractional bucket of flagKey+targetingKey at the
// provider's 10 000-weight resolution: (uint64(hash) × 10000) >> 32.
func refBucket(flagKey, targetingKey string) uint64 {
	return uint64(refMurmur3([]byte(flagKey+targetingKey))) * 10000 >> 32
}

func TestRefMurmur3(t *testing.T) {
	for _, in := range []string{"", "a", "ab", "abc", "abcd", "hello", "The quick brown fox jumps over the lazy dog",
		"headerColorrachel@faas.com", "recommendationsuser-1"} {
		assert.Equal(t, murmur3(in, ""), refMurmur3([]byte(in)), "%q", in)
	}
	assert.Equal(t, uint32(0x2e4ff723), refMurmur3([]byte("The quick brown fox jumps over the lazy dog")))
}

// pinnedFlags returns an OpenFeature client whose provider reads a dimmer
// controller serving features, and a function that pins every feature at a
// level. The quantum is 0.0001 so that a pin keeps the level to the
// provider's 10 000-weight resolution.
func pinnedFlags(t *testing.T, features ...string) (*openfeature.Client, func(level float64)) {
	t.Helper()
	fs := make([]dimmer.Feature, len(features))
	for i, f := range features {
		fs[i] = dimmer.Feature{Name: f}
	}
	ctl, err := dimmer.New(dimmer.Config{
		Targets:  []dimmer.Target{{Signal: signals.LatencyP99, Target: 1}},
		Features: fs,
		Quantum:  0.0001,
	})
	require.NoError(t, err)
	p, err := New(ctl, Options{RequireTargetingKey: true})
	require.NoError(t, err)
	api := isolated.NewAPI()
	require.NoError(t, api.SetProviderAndWait(t.Context(), p))
	t.Cleanup(func() { api.Shutdown(context.Background()) })
	pin := func(level float64) {
		t.Helper()
		for _, f := range features {
			st, err := ctl.PinAt(t0, f, level, time.Hour, "test")
			require.NoError(t, err)
			fst, _ := st.Feature(f)
			require.InDelta(t, level, fst.Level, 1e-12, "%s pinned", f)
		}
	}
	return api.NewClient(), pin
}

// evaluate asks the client for flag as user, through the OpenFeature
// evaluation context, and fails the test on an evaluation error.
func evaluate(t *testing.T, flags *openfeature.Client, flag, user string) bool {
	t.Helper()
	d, err := flags.BooleanValueDetails(t.Context(), flag, false, openfeature.NewEvaluationContext(user, nil))
	require.NoError(t, err, "%s for %s", flag, user)
	require.Equal(t, openfeature.SplitReason, d.Reason, "%s for %s", flag, user)
	return d.Value
}

// flagdKeys are the flag keys (or explicit seeds, which flagd prepends the
// same way) of the cases in testdata/flagd-fractional-vectors.json.
var flagdKeys = []string{"headerColor", "my-seed"}

// TestFlagdFractionalVectors: the users of flagd's own fractional tests
// (testdata/flagd-fractional-vectors.json, a copy of
// shared/reference/flagd-fractional-vectors.json) land where flagd puts
// them, through the provider's evaluation path. A case with cumulative
// weights w₁ < w₂ < … < total says the user's bucket lies in
// [w_{k−1}, w_k) for the wanted variant k; the weights are whole
// hundredths, so at level w_j/total the provider must turn the user on
// exactly when k ≤ j.
func TestFlagdFractionalVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/flagd-fractional-vectors.json")
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

	flags, pin := pinnedFlags(t, flagdKeys...)
	for _, c := range v.Cases {
		var flag, user string
		for _, k := range flagdKeys {
			if rest, ok := strings.CutPrefix(c.Bucketing, k); ok {
				flag, user = k, rest
			}
		}
		require.NotEmpty(t, flag, "%s: add its flag key to flagdKeys", c.Bucketing)
		var total float64
		want := -1
		for i, vr := range c.Variants {
			total += vr[1].(float64)
			if vr[0].(string) == c.Want {
				want = i
			}
		}
		require.GreaterOrEqual(t, want, 0, "%s: wanted variant %s is not among the variants", c.Bucketing, c.Want)
		var cum float64
		for j, vr := range c.Variants[:len(c.Variants)-1] {
			cum += vr[1].(float64)
			level := cum / total
			pin(level)
			got := evaluate(t, flags, flag, user)
			assert.Equal(t, want <= j, got, "%s for %s at level %v (flagd: %s)", flag, user, level, c.Want)
		}
	}
}

// TestBucketResolution: at the provider's 10 000-weight resolution a user
// in bucket b is on exactly when b < round(level × 10000). For each level
// the test finds users in the buckets just below and at the threshold,
// with the reference hash, and asks the provider through OpenFeature.
func TestBucketResolution(t *testing.T) {
	flagKeys := []string{"recommendations", "headerColor", "r"} // 15, 11 and 1 bytes: blocks straddle the join
	levels := []struct {
		level     float64
		threshold uint64
	}{
		{0.0001, 1}, {0.0002, 2}, {0.3333, 3333}, {0.5, 5000}, {0.6667, 6667}, {0.9999, 9999},
	}
	// users[flag][bucket] is a targeting key that lands in that bucket.
	want := map[uint64]bool{}
	for _, l := range levels {
		want[l.threshold-1], want[l.threshold] = true, true
	}
	users := map[string]map[uint64]string{}
	for _, f := range flagKeys {
		users[f] = map[uint64]string{}
		for i := 0; len(users[f]) < len(want); i++ {
			require.Less(t, i, 5_000_000, "no users found for every bucket of %s", f)
			u := "user-" + strconv.Itoa(i)
			if b := refBucket(f, u); want[b] && users[f][b] == "" {
				users[f][b] = u
			}
		}
	}

	flags, pin := pinnedFlags(t, flagKeys...)
	for _, l := range levels {
		pin(l.level)
		for _, f := range flagKeys {
			below, at := users[f][l.threshold-1], users[f][l.threshold]
			assert.True(t, evaluate(t, flags, f, below), "%s at level %v: %s in bucket %d should be on", f, l.level, below, l.threshold-1)
			assert.False(t, evaluate(t, flags, f, at), "%s at level %v: %s in bucket %d should be off", f, l.level, at, l.threshold)
		}
	}
	// The ends: level 0 turns bucket 0 off, level 1 turns bucket 9999 on.
	pin(0)
	for _, f := range flagKeys {
		assert.False(t, evaluate(t, flags, f, users[f][0]), "%s at level 0", f)
	}
	pin(1)
	for _, f := range flagKeys {
		assert.True(t, evaluate(t, flags, f, users[f][9999]), "%s at level 1", f)
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

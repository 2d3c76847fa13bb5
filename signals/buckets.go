package signals

import (
	"math"
	"math/bits"
	"time"
)

// Log-linear bucketing. A value v in nanoseconds below 64 has a bucket of its
// own; above that, each power-of-two octave [2^k, 2^(k+1)) is cut into 32
// equal sub-buckets. The bucket of v is found with one bit-length and one
// shift:
//
//	s     = bits.Len64(v) - 6        // so that v>>s lies in [32, 64)
//	index = 32*s + v>>s
//
// A bucket's width is at most 1/32 of its lower bound, so reporting its
// midpoint is within 1/64 ≈ 1.6 % of any value inside it. 1024 buckets reach
// 2^36 ns ≈ 68.7 s, which covers the 1 µs – 60 s range the controller cares
// about with room to spare.
const (
	subBits    = 5
	subCount   = 1 << subBits // sub-buckets per octave
	NumBuckets = 1024         // buckets in a log-linear histogram

	// MaxValue is the largest duration a window records exactly; larger
	// ones are clamped to it and counted.
	MaxValue = time.Duration(1<<36 - 1)
)

// bucketIndex returns the bucket of v, which must be ≤ MaxValue.
func bucketIndex(v uint64) int {
	if v < 2*subCount {
		return int(v)
	}
	s := bits.Len64(v) - (subBits + 1)
	return s<<subBits + int(v>>uint(s))
}

// BucketLower returns the smallest value, in nanoseconds, that falls in
// bucket i (0 ≤ i ≤ NumBuckets).
func BucketLower(i int) uint64 { return bucketLower(i) }

// BucketUpper returns one past the largest value, in nanoseconds, that falls
// in bucket i.
func BucketUpper(i int) uint64 { return bucketLower(i + 1) }

func bucketLower(i int) uint64 {
	if i < 2*subCount {
		return uint64(i)
	}
	s := i>>subBits - 1
	return uint64(i-s<<subBits) << uint(s)
}

// bucketMid returns the value reported for bucket i: the midpoint of its
// range, or the value itself for the exact buckets below 64 ns.
func bucketMid(i int) float64 {
	lo, hi := bucketLower(i), bucketLower(i+1)
	if hi-lo <= 1 {
		return float64(lo)
	}
	return float64(lo) + float64(hi-lo-1)/2
}

// clampValue maps a duration to the recordable range. ok is false when the
// input was out of range (not positive, or larger than MaxValue).
func clampValue(d time.Duration) (v uint64, ok bool) {
	switch {
	case d <= 0:
		return 0, false
	case d > MaxValue:
		return uint64(MaxValue), false
	}
	return uint64(d), true
}

// rankFor is the 1-based rank of quantile q among n samples, matching the
// nearest-rank definition sorted[ceil(q·n)-1]. q is clamped to [0, 1].
func rankFor(q float64, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	if !(q > 0) { // also catches NaN
		return 1
	}
	if q >= 1 {
		return n
	}
	r := uint64(math.Ceil(q * float64(n)))
	if r < 1 {
		r = 1
	}
	if r > n {
		r = n
	}
	return r
}

package provider

import (
	"math"
	"math/bits"
)

// murmur3 returns MurmurHash3 x86_32 (seed 0) of a+b, as if the two strings
// were concatenated, without concatenating them. It is what flagd's
// fractional operation hashes (github.com/twmb/murmur3 SeedSum32(0, …)).
func murmur3(a, b string) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	var h uint32
	var tail [4]byte
	nt := 0 // bytes in tail
	n := len(a) + len(b)
	mix := func(k uint32) {
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	for _, s := range [2]string{a, b} {
		i := 0
		// Finish a block started by the previous string.
		for nt > 0 && nt < 4 && i < len(s) {
			tail[nt] = s[i]
			nt++
			i++
		}
		if nt == 4 {
			mix(uint32(tail[0]) | uint32(tail[1])<<8 | uint32(tail[2])<<16 | uint32(tail[3])<<24)
			nt = 0
		}
		for ; i+4 <= len(s); i += 4 {
			mix(uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24)
		}
		for ; i < len(s); i++ {
			tail[nt] = s[i]
			nt++
		}
	}
	if nt > 0 {
		var k uint32
		switch nt {
		case 3:
			k ^= uint32(tail[2]) << 16
			fallthrough
		case 2:
			k ^= uint32(tail[1]) << 8
			fallthrough
		case 1:
			k ^= uint32(tail[0])
			k *= c1
			k = bits.RotateLeft32(k, 15)
			k *= c2
			h ^= k
		}
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// BucketWeight is the total weight of the sticky split: levels resolve to
// a hundredth of a percent.
const BucketWeight = 10000

// bucket returns the user's bucket in [0, w), as flagd's fractional does:
// (uint64(hash) × w) >> 32.
func bucket(h uint32, w uint64) uint64 { return uint64(h) * w >> 32 }

// On reports whether the user with targetingKey gets flagKey at level:
// bucket < round(level × BucketWeight). This is flagd's fractional
// [["on", level×W], ["off", (1−level)×W]] with the default bucketing string
// flagKey+targetingKey, so a user lands where flagd would put them; and
// since the threshold only grows with the level, raising the level only
// adds users.
func On(flagKey, targetingKey string, level float64) bool {
	return bucket(murmur3(flagKey, targetingKey), BucketWeight) < threshold(level)
}

func threshold(level float64) uint64 {
	switch {
	case !(level > 0): // also NaN
		return 0
	case level >= 1:
		return BucketWeight
	}
	return uint64(math.Round(level * BucketWeight))
}

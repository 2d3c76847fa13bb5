package shed

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"strings"
)

// Client keys come from the client (a user id header of up to what the
// server reads of headers, an address); what is kept of them is a hash of
// fixed size:
//
//   - this process's rate-limit memory keys its clients by SipHash-2-4
//     under a key drawn at random when the memory is made: 8 bytes a
//     client, and nobody outside the process can aim two keys at one
//     allowance;
//   - a RateLimitStore shared by a fleet gets StoreKey, 128 bits of
//     SHA-256 (the same on every instance, so that instances meet on the
//     same keys, with no secret to share);
//   - the cascade picks the clients it sheds by SipHash-2-4 under the
//     fleet's shed seed (Config.ShedSeed), so that which user ids are
//     shed last cannot be worked out offline, yet every instance that has
//     the seed sheds the same ones.

// sipHash returns SipHash-2-4 (Aumasson and Bernstein, 2012) of s under
// the 128-bit key (k0, k1), the key's first and second 8 bytes read
// little-endian. It is a pseudo-random function built for short inputs:
// without the key its outputs cannot be told from random ones, so a
// client that chooses its key cannot choose where it lands. It reads s in
// place (no allocation) at about 1 ns a byte.
func sipHash(k0, k1 uint64, s string) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	n := len(s)
	for ; len(s) >= 8; s = s[8:] {
		m := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
	}
	last := uint64(n) << 56
	for i := len(s) - 1; i >= 0; i-- {
		last |= uint64(s[i]) << (8 * i)
	}
	v3 ^= last
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= last
	v2 ^= 0xff
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// sipRound is SipHash's round, SipRound.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// hashKey is a SipHash key, drawn at random or read from a seed.
type hashKey struct{ k0, k1 uint64 }

func randomHashKey() hashKey {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return hashKeyOf(b)
}

func hashKeyOf(b [16]byte) hashKey {
	return hashKey{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

func (k hashKey) sum(s string) uint64 { return sipHash(k.k0, k.k1, s) }

// fraction maps s to [0, 1): the top 53 bits of its hash.
func (k hashKey) fraction(s string) float64 { return float64(k.sum(s)>>11) / (1 << 53) }

// storeDigest is how many bytes of SHA-256 a store key keeps: 128 bits.
// A client that wants another's allowance must find a second preimage
// (2^128 tries); a collision between two keys it chose (2^64) gains it
// nothing but sharing its own; and among honest clients a collision is
// about n²/2^129 likely (1e-27 for a million).
const storeDigest = 16

// StoreKey returns what a RateLimitStore is given for a client key (e.g.
// Shedder.ClientKey's): its kind ("u:" for a user id, "ip:" for an
// address; nothing for a key from Config.ClientKey) and 128 bits of its
// SHA-256, base64url — at most 25 bytes whatever the client sent, the
// same on every instance. An operator finds a client's key in Redis with
// it (after the store's prefix).
func StoreKey(key string) string {
	kind := ""
	for _, k := range [...]string{"u:", "ip:"} {
		if strings.HasPrefix(key, k) {
			kind = k
			break
		}
	}
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.Grow(len(kind) + base64.RawURLEncoding.EncodedLen(storeDigest))
	b.WriteString(kind)
	var enc [24]byte // base64 of 16 bytes: 22 characters
	base64.RawURLEncoding.Encode(enc[:], sum[:storeDigest])
	b.Write(enc[:base64.RawURLEncoding.EncodedLen(storeDigest)])
	return b.String()
}

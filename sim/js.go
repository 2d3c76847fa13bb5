package sim

import (
	"math"
	"math/big"
	"strings"
)

// The sources' simulators are JavaScript. To print exactly what they print,
// the ports use JavaScript's arithmetic where Go's differs: V8's Math.log is
// fdlibm's __ieee754_log (Go's math.Log is an assembly routine on amd64 and a
// simplified fdlibm elsewhere, and differs in the last bit for some inputs,
// see TestLogMatchesV8), and Number.prototype.toFixed rounds ties away from
// zero on the exact binary value (Go's strconv rounds them to even).

// Mulberry32 is the sources' seeded generator: 32 bits of state, floats in
// [0, 1) with 32 random bits. The zero value is the generator seeded with 0.
type Mulberry32 struct{ s uint32 }

// NewMulberry32 returns a generator seeded with seed.
func NewMulberry32(seed uint32) *Mulberry32 { return &Mulberry32{s: seed} }

// Float64 returns the next number in [0, 1).
func (m *Mulberry32) Float64() float64 {
	m.s += 0x6D2B79F5
	s := m.s
	t := (s ^ s>>15) * (1 | s)
	t = (t + (t^t>>7)*(61|t)) ^ t
	return float64(t^t>>14) / 4294967296
}

// Exp returns an exponential variate of the given mean, as the sources
// draw it: −log(1 − u) · mean.
func (m *Mulberry32) Exp(mean float64) float64 {
	return -jsLog(1-m.Float64()) * mean
}

// jsLog is fdlibm's __ieee754_log (e_log.c), which V8 uses for Math.log.
// The float64(…) conversions forbid fused multiply-adds, which would change
// the last bit.
func jsLog(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 3fe62e42 fee00000
		ln2Lo = 1.90821492927058770002e-10 // 3dea39ef 35793c76
		two54 = 1.80143985094819840000e+16 // 43500000 00000000
		lg1   = 6.666666666666735130e-01   // 3FE55555 55555593
		lg2   = 3.999999999940941908e-01   // 3FD99999 9997FA04
		lg3   = 2.857142874366239149e-01   // 3FD24924 94229359
		lg4   = 2.222219843214978396e-01   // 3FCC71C5 1D8E78AF
		lg5   = 1.818357216161805012e-01   // 3FC74664 96CB03DE
		lg6   = 1.531383769920937332e-01   // 3FC39A09 D078C69F
		lg7   = 1.479819860511658591e-01   // 3FC2F112 DF3E5244
	)
	bits := math.Float64bits(x)
	hx := int32(bits >> 32)
	lx := uint32(bits)
	k := int32(0)
	if hx < 0x00100000 { // x < 2^-1022
		if (hx&0x7fffffff)|int32(lx) == 0 {
			return math.Inf(-1)
		}
		if hx < 0 {
			return math.NaN()
		}
		k -= 54
		x *= two54 // subnormal: scale up
		hx = int32(math.Float64bits(x) >> 32)
	}
	if hx >= 0x7ff00000 {
		return x + x
	}
	k += hx>>20 - 1023
	hx &= 0x000fffff
	i := (hx + 0x95f64) & 0x100000
	// Normalize x or x/2 by setting the high word's exponent.
	x = math.Float64frombits(uint64(uint32(hx|(i^0x3ff00000)))<<32 | math.Float64bits(x)&0xffffffff)
	k += i >> 20
	f := x - 1.0
	if (0x000fffff & (2 + hx)) < 3 { // -2^-20 <= f < 2^-20
		if f == 0 {
			if k == 0 {
				return 0
			}
			dk := float64(k)
			return float64(dk*ln2Hi) + float64(dk*ln2Lo)
		}
		R := float64(f*f) * float64(0.5-float64(0.33333333333333333*f))
		if k == 0 {
			return f - R
		}
		dk := float64(k)
		return float64(dk*ln2Hi) - ((R - float64(dk*ln2Lo)) - f)
	}
	s := f / (2.0 + f)
	dk := float64(k)
	z := s * s
	i = hx - 0x6147a
	w := z * z
	j := 0x6b851 - hx
	t1 := float64(w * float64(lg2+float64(w*float64(lg4+float64(w*lg6)))))
	t2 := float64(z * float64(lg1+float64(w*float64(lg3+float64(w*float64(lg5+float64(w*lg7)))))))
	i |= j
	R := t2 + t1
	if i > 0 {
		hfsq := float64(0.5*f) * f
		if k == 0 {
			return f - (hfsq - float64(s*(hfsq+R)))
		}
		return float64(dk*ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + float64(dk*ln2Lo))) - f)
	}
	if k == 0 {
		return f - float64(s*(f-R))
	}
	return float64(dk*ln2Hi) - ((float64(s*(f-R)) - float64(dk*ln2Lo)) - f)
}

// toFixed formats x with digits decimals as JavaScript's toFixed does:
// from the exact binary value, ties away from zero. NaN prints "NaN".
func toFixed(x float64, digits int) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	}
	neg := x < 0
	if neg {
		x = -x
	}
	// The exact decimal expansion of a float64 has at most 1074 decimals.
	exact := new(big.Float).SetFloat64(x).Text('f', 1100)
	dot := strings.IndexByte(exact, '.')
	intPart, frac := exact[:dot], exact[dot+1:]
	keep := []byte(intPart + frac[:digits])
	if frac[digits] >= '5' { // ties (…5000…) round up, like JavaScript
		for i := len(keep) - 1; ; i-- {
			if i < 0 {
				keep = append([]byte{'1'}, keep...)
				break
			}
			if keep[i] == '9' {
				keep[i] = '0'
				continue
			}
			keep[i]++
			break
		}
	}
	n := len(keep) - digits
	out := string(keep[:n])
	if digits > 0 {
		out += "." + string(keep[n:])
	}
	if neg { // JavaScript prints (-0.4).toFixed(0) as "-0"
		out = "-" + out
	}
	return out
}

func padStart(s string, n int) string {
	if d := n - len([]rune(s)); d > 0 {
		return strings.Repeat(" ", d) + s
	}
	return s
}

func padEnd(s string, n int) string {
	if d := n - len([]rune(s)); d > 0 {
		return s + strings.Repeat(" ", d)
	}
	return s
}

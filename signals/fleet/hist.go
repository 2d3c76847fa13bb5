package fleet

import (
	"errors"
	"fmt"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
)

// hist is a cumulative histogram read from a Prometheus exposition, or the
// difference of two such reads. Classic buckets are kept as per-bucket (not
// cumulative) counts by upper bound; native buckets, when every input had
// them, as absolute counts by index at one schema.
type hist struct {
	count, sum float64
	bounds     []float64 // classic upper bounds, ascending, +Inf last
	classic    []float64 // count per classic bucket
	native     bool
	schema     int32
	zero       float64
	pos        map[int]float64
}

var (
	errBuckets = errors.New("bucket bounds differ")
	errValue   = errors.New("not a finite, non-negative value")
)

// histFromDTO reads one histogram metric.
func histFromDTO(h *dto.Histogram) (hist, error) {
	if h == nil {
		return hist{}, errors.New("series carries no histogram data")
	}
	out := hist{count: float64(h.GetSampleCount()), sum: h.GetSampleSum()}
	if h.SampleCountFloat != nil {
		out.count = h.GetSampleCountFloat()
	}
	if !finiteNonNeg(out.count) || math.IsNaN(out.sum) || math.IsInf(out.sum, 0) {
		return hist{}, fmt.Errorf("count or sum: %w", errValue)
	}
	prev := 0.0
	for _, b := range h.GetBucket() {
		cum := float64(b.GetCumulativeCount())
		if b.CumulativeCountFloat != nil {
			cum = b.GetCumulativeCountFloat()
		}
		ub := b.GetUpperBound()
		if !finiteNonNeg(cum) || math.IsNaN(ub) {
			return hist{}, fmt.Errorf("bucket le=%g: %w", ub, errValue)
		}
		if cum < prev || (len(out.bounds) > 0 && ub <= out.bounds[len(out.bounds)-1]) {
			return hist{}, fmt.Errorf("bucket le=%g: buckets are not cumulative and ascending", ub)
		}
		out.bounds = append(out.bounds, ub)
		out.classic = append(out.classic, cum-prev)
		prev = cum
	}
	if len(out.bounds) == 0 || !math.IsInf(out.bounds[len(out.bounds)-1], 1) {
		out.bounds = append(out.bounds, math.Inf(1))
		out.classic = append(out.classic, max(out.count-prev, 0))
	}
	if len(h.GetPositiveSpan()) > 0 || len(h.GetNegativeSpan()) > 0 || h.GetZeroThreshold() > 0 || h.GetZeroCount() > 0 {
		if sc := h.GetSchema(); sc < minNativeSchema || sc > maxNativeSchema {
			return hist{}, fmt.Errorf("native buckets: schema %d: want %d to %d", sc, minNativeSchema, maxNativeSchema)
		}
		out.native, out.schema, out.pos = true, h.GetSchema(), map[int]float64{}
		out.zero = float64(h.GetZeroCount()) + h.GetZeroCountFloat()
		idx, cnt := 0, 0.0
		deltas, counts, k := h.GetPositiveDelta(), h.GetPositiveCount(), 0
		for _, sp := range h.GetPositiveSpan() {
			idx += int(sp.GetOffset())
			for range sp.GetLength() {
				switch {
				case k < len(deltas):
					cnt += float64(deltas[k])
				case k < len(counts):
					cnt = counts[k]
				default:
					return hist{}, errors.New("native buckets: fewer counts than spans say")
				}
				if !finiteNonNeg(cnt) {
					return hist{}, fmt.Errorf("native bucket %d: %w", idx, errValue)
				}
				out.pos[idx] += cnt
				idx++
				k++
			}
		}
		// Negative observations cannot be durations; fold them into zero.
		for _, d := range h.GetNegativeDelta() {
			out.zero += math.Abs(float64(d))
		}
	}
	return out, nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// add merges o into h. Classic bounds must match; native buckets are kept
// only while both sides have them, at the coarser schema.
func (h *hist) add(o hist) error {
	if h.bounds == nil {
		*h = o.clone()
		return nil
	}
	if !slices.Equal(h.bounds, o.bounds) {
		return errBuckets
	}
	h.count += o.count
	h.sum += o.sum
	for i := range h.classic {
		h.classic[i] += o.classic[i]
	}
	if !h.native || !o.native {
		h.native, h.pos = false, nil
		return nil
	}
	s := min(h.schema, o.schema)
	h.reduce(s)
	o = o.clone()
	o.reduce(s)
	h.zero += o.zero
	for i, c := range o.pos {
		h.pos[i] += c
	}
	return nil
}

func (h hist) clone() hist {
	h.bounds = slices.Clone(h.bounds)
	h.classic = slices.Clone(h.classic)
	if h.pos != nil {
		p := make(map[int]float64, len(h.pos))
		for k, v := range h.pos {
			p[k] = v
		}
		h.pos = p
	}
	return h
}

// reduce lowers the native schema to s by merging buckets: bucket i at
// schema h.schema lies in bucket ceil(i / 2^d) at schema s.
func (h *hist) reduce(s int32) {
	if !h.native || s >= h.schema {
		return
	}
	d := uint(h.schema - s)
	p := make(map[int]float64, len(h.pos))
	for i, c := range h.pos {
		p[((i-1)>>d)+1] += c
	}
	h.pos, h.schema = p, s
}

// sub returns h − old. ok is false when a count or the sum went down (the
// process restarted: durations never lower the sum); the caller then uses h
// alone.
func (h hist) sub(old hist) (d hist, ok bool) {
	if !slices.Equal(h.bounds, old.bounds) || h.count < old.count || h.sum < old.sum {
		return hist{}, false
	}
	d = h.clone()
	d.count -= old.count
	d.sum -= old.sum
	for i := range d.classic {
		if d.classic[i] -= old.classic[i]; d.classic[i] < 0 {
			return hist{}, false
		}
	}
	if d.native && old.native && d.schema == old.schema {
		d.zero -= old.zero
		for i, c := range old.pos {
			if d.pos[i] -= c; d.pos[i] < 0 {
				return hist{}, false
			}
		}
	} else {
		d.native, d.pos = false, nil
	}
	return d, true
}

// quantile estimates the q-quantile: from native buckets when present
// (exponential interpolation), else from classic buckets (linear
// interpolation, as PromQL's histogram_quantile). ok is false with no data.
func (h hist) quantile(q float64) (float64, bool) {
	if h.count <= 0 {
		return 0, false
	}
	rank := q * h.count
	if h.native {
		if rank <= h.zero {
			return 0, true
		}
		seen := h.zero
		keys := make([]int, 0, len(h.pos))
		for k, c := range h.pos {
			if c > 0 {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return 0, true
		}
		slices.Sort(keys)
		for _, k := range keys {
			c := h.pos[k]
			if seen+c >= rank {
				// Within bucket k, (base^(k−1), base^k], exponentially:
				// base^(k−1+f), computed as one power so that a bucket
				// whose bounds underflow to 0 or overflow (an index of
				// tens of thousands) gives 0 or the largest float, not
				// 0/0.
				return nativeBound(h.schema, float64(k-1)+(rank-seen)/c), true
			}
			seen += c
		}
		return nativeBound(h.schema, float64(keys[len(keys)-1])), true
	}
	seen, lo := 0.0, 0.0
	for i, ub := range h.bounds {
		c := h.classic[i]
		if seen+c >= rank && c > 0 {
			if math.IsInf(ub, 1) {
				return lo, true // as histogram_quantile: the highest finite bound
			}
			return lo + (ub-lo)*(rank-seen)/c, true
		}
		seen += c
		if !math.IsInf(ub, 1) {
			lo = ub
		}
	}
	return lo, true
}

// minNativeSchema and maxNativeSchema bound a native histogram's schema,
// as Prometheus does for exponential buckets: growth factors from 2^16
// down to 2^(1/256).
const minNativeSchema, maxNativeSchema = -4, 8

// nativeBound is base^x for the native buckets of schema (base =
// 2^(2^−schema)), within [0, the largest float].
func nativeBound(schema int32, x float64) float64 {
	return min(math.Exp2(x*math.Exp2(-float64(schema))), math.MaxFloat64)
}

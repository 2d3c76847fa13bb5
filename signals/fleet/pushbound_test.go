package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brownout/brownout/internal/hostile"
	"github.com/brownout/brownout/internal/race"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// wide is a push from instance at time at whose latency histogram has n
// native buckets (schema 8, indices centred on 0), padded with an unknown
// field to at least pad bytes.
func wide(instance string, at time.Time, n, pad int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"v":1,"instance":%q,"time":%q,"latency":{"count":%d,"sum":1,"native":{"schema":8,"buckets":[`,
		instance, at.Format(time.RFC3339Nano), n)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("[" + strconv.Itoa(i-n/2) + ",1]")
	}
	b.WriteString("]}}")
	if rest := pad - b.Len() - len(`,"pad":""}`); rest > 0 {
		b.WriteString(`,"pad":"` + strings.Repeat("x", rest) + `"`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// kept returns how many readings and buckets src keeps of instance.
func kept(src *PushSource, instance string) (reads, buckets int) {
	src.mu.Lock()
	defer src.mu.Unlock()
	in := src.mu.instances[instance]
	if in == nil {
		return 0, 0
	}
	for _, r := range in.reads {
		buckets += r.st.buckets()
	}
	return len(in.reads), buckets
}

// TestPushSourceThinsAnInstance: an instance pushing far more often than
// the window needs keeps at most maxReadings readings, spread over the
// window with its base kept, and its rates stay exact.
func TestPushSourceThinsAnInstance(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c) // 10 s window
	rec := signals.NewRecorder(signals.Config{})
	start := t0.Add(-time.Minute)
	for range 400 { // every 50 ms for 20 s: 200 readings in each window
		serve(rec, c.t, signals.Default, 5, time.Millisecond, 0, 0)
		mustPush(t, src, body(t, rec, "a", start, c.t))
		c.t = c.t.Add(50 * time.Millisecond)
	}
	reads, _ := kept(src, "a")
	assert.LessOrEqual(t, reads, maxReadings)
	assert.Greater(t, reads, maxReadings/2, "thinning keeps the window's spread, not a few readings")
	src.mu.Lock()
	s := src.mu.instances["a"].reads
	span := s[len(s)-1].at.Sub(s[0].at)
	src.mu.Unlock()
	assert.GreaterOrEqual(t, span, 10*time.Second, "the base is a window before the newest")
	assert.Less(t, span, 11*time.Second, "and not much more")

	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	arr, ok := snap.Get(signals.ArrivalRate)
	require.True(t, ok)
	assert.InDelta(t, 100, arr, 1e-6, "5 arrivals every 50 ms, whatever the base")
}

// TestPushSourceBoundsBuckets: an instance's kept buckets stay under
// maxInstanceBuckets however wide its pushes; a push over maxPushBuckets
// is refused with 413 and ErrPushTooLarge and changes nothing.
func TestPushSourceBoundsBuckets(t *testing.T) {
	c := &clock{t: t0}
	src := newPushSource(c)
	for range 40 {
		mustPush(t, src, wide("a", c.t, maxPushBuckets-1, 0)) // the classic +Inf bucket is the last one
		c.t = c.t.Add(10 * time.Millisecond)
	}
	reads, buckets := kept(src, "a")
	assert.LessOrEqual(t, buckets, maxInstanceBuckets, "%d readings", reads)
	assert.GreaterOrEqual(t, reads, 2, "the base and the newest stay")

	w := post(src, wide("a", c.t, maxPushBuckets+1, 0))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	p := problemOf(t, w)
	assert.Equal(t, "urn:brownout:push:too-large", p.Type)
	assert.Contains(t, p.Detail, fmt.Sprintf("the push holds %d histogram buckets: at most %d", maxPushBuckets+1, maxPushBuckets))
	require.ErrorIs(t, src.Push(wide("a", c.t, maxPushBuckets+1, 0)), ErrPushTooLarge)
	r2, b2 := kept(src, "a")
	assert.Equal(t, [2]int{reads, buckets}, [2]int{r2, b2}, "a refused push changes nothing")
}

// TestHeapPushOneInstance: 40 pushes of 0.9 MB to one instance, then 100
// of the widest allowed, keep the heap within what one instance may keep
// (they kept about 100 MB, then 15 MB, when every reading of the window
// was kept). Without -race, whose allocations would blur the figure.
func TestHeapPushOneInstance(t *testing.T) {
	if race.Enabled {
		t.Skip("heap figures are meaningless under -race")
	}
	c := &clock{t: t0}
	src := newPushSource(c)
	huge := make([][]byte, 40)
	for i := range huge {
		huge[i] = wide("a", t0.Add(time.Duration(i)*time.Millisecond), 70_000, 900_000)
	}
	widest := make([][]byte, 100)
	for i := range widest {
		widest[i] = wide("a", t0.Add(time.Second+time.Duration(i)*time.Millisecond), maxPushBuckets-1, 0)
	}
	refused := 0
	grew := hostile.HeapGrowth(func() {
		for _, b := range huge {
			if post(src, b).Code == http.StatusRequestEntityTooLarge {
				refused++
			}
		}
		c.t = t0.Add(time.Second)
		for _, b := range widest {
			mustPush(t, src, b)
		}
	})
	runtime.KeepAlive(src)
	runtime.KeepAlive(huge)
	runtime.KeepAlive(widest)
	t.Logf("heap grew %.1f MB; %d of 40 pushes of 0.9 MB refused", float64(grew)/1e6, refused)
	assert.Equal(t, 40, refused, "0.9 MB of buckets is over maxPushBuckets")
	assert.Less(t, grew, int64(2<<20), "one instance keeps at most maxInstanceBuckets (≈ 290 KB)")
}

// TestHeapPushManyInstances: pushes from 200 distinct instances, each as
// wide as allowed, keep the heap within MaxInstances × what one instance
// may keep; the instances past MaxInstances get 429.
func TestHeapPushManyInstances(t *testing.T) {
	if race.Enabled {
		t.Skip("heap figures are meaningless under -race")
	}
	const maxInstances = 50
	c := &clock{t: t0}
	src := NewPushSource(PushConfig{Now: c.now, MaxInstances: maxInstances})
	one := wide("x", t0, maxPushBuckets-1, 0)
	bodies := make([][]byte, 200)
	for i := range bodies {
		bodies[i] = []byte(strings.Replace(string(one), `"instance":"x"`, fmt.Sprintf(`"instance":"shop-%d"`, i), 1))
	}
	refused := 0
	grew := hostile.HeapGrowth(func() {
		for _, b := range bodies {
			switch w := post(src, b); w.Code {
			case http.StatusTooManyRequests:
				refused++
			case http.StatusNoContent:
			default:
				t.Fatalf("push: %d %s", w.Code, w.Body)
			}
		}
	})
	runtime.KeepAlive(src)
	runtime.KeepAlive(bodies)
	t.Logf("heap grew %.1f MB; %d of 200 instances refused", float64(grew)/1e6, refused)
	assert.Equal(t, 200-maxInstances, refused)
	assert.Less(t, grew, int64(maxInstances*(300<<10)), "MaxInstances × what one instance may keep")
}

// largestRecorderPush is the largest push a Recorder makes: the latency
// and every class's sojourn with all 526 native buckets of NativeSchema
// and the classic ones, every count at 2^53 (the widest a count is).
func largestRecorderPush(instance string, at time.Time) []byte {
	hist := func() *pushHist {
		h := &pushHist{Count: maxCount, Sum: 1.2345678901234567e+08, Native: &pushNative{Schema: signals.NativeSchema}}
		for _, ub := range signals.DefaultBuckets() {
			h.Buckets = append(h.Buckets, []float64{ub, maxCount})
		}
		for i := range 526 { // as wide as counts that add up to at most count go
			h.Native.Buckets = append(h.Native.Buckets, []float64{float64(i - 478), math.Floor(maxCount / 526)})
		}
		return h
	}
	b := pushBody{V: 1, Instance: instance, Time: at.Format(time.RFC3339Nano), Start: at.Format(time.RFC3339Nano), Latency: hist(), Classes: map[string]pushClass{}}
	for cl := range signals.Class(signals.NumClasses) {
		b.Classes[cl.String()] = pushClass{Arrived: maxCount, Completed: maxCount, Failed: maxCount, Good: maxCount, Waited: maxCount, Sojourn: hist()}
	}
	out, _ := json.Marshal(b)
	return out
}

// widestPush is the widest push the source takes: maxPushBuckets − 1
// classic buckets (and the +Inf one count implies) whose numbers are as
// wide as a bound (23 characters: no sign) and a count are written.
func widestPush(instance string, at time.Time) []byte {
	h := &pushHist{Count: maxCount}
	ub := 1.2345678901234567e-300
	for range maxPushBuckets - 1 {
		h.Buckets = append(h.Buckets, []float64{ub, maxCount})
		ub = math.Nextafter(ub, math.Inf(1))
	}
	g := 1.2345678901234567e+08
	out, _ := json.Marshal(pushBody{V: 1, Instance: strings.Repeat("i", maxInstanceLen), Time: at.Format(time.RFC3339Nano), Start: at.Format(time.RFC3339Nano),
		InFlight: &g, Gate: &pushGate{Limit: g, InFlight: g, Queued: maxCount}, Latency: h})
	return out
}

// TestPushMaxBodyHoldsTheWidestPush: the default body cap holds the
// widest push the source keeps with room to spare, and refuses a body
// past it (413) before decoding it: a push of 0.9 MB was decoded whole,
// about 100 ms of CPU.
func TestPushMaxBodyHoldsTheWidestPush(t *testing.T) {
	widest, largest := widestPush("a", t0.Add(-time.Second)), largestRecorderPush("a", t0)
	t.Logf("widest push %d bytes, a Recorder's largest %d bytes, cap %d", len(widest), len(largest), DefaultMaxPushBody)
	assert.LessOrEqual(t, len(widest), maxPushBuckets*maxBucketJSON+2<<10, "maxBucketJSON bounds a bucket's JSON")
	assert.Less(t, float64(len(widest))*1.4, float64(DefaultMaxPushBody), "room for spaces")
	assert.Less(t, len(largest)*4, DefaultMaxPushBody)

	c := &clock{t: t0}
	src := newPushSource(c)
	mustPush(t, src, widest)
	mustPush(t, src, largestRecorderPush("a", t0.Add(time.Second)))

	w := post(src, wide("b", t0, 10, DefaultMaxPushBody+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Equal(t, fmt.Sprintf("the body is over %d bytes", DefaultMaxPushBody), problemOf(t, w).Detail)
	for _, in := range src.Health().Instances {
		assert.NotEqual(t, "b", in.Name, "refused before its instance is known")
	}
}

// BenchmarkDecodePush is what a push costs the source to decode: a
// Recorder's largest, the widest the source keeps, and bodies at the
// default cap and at the former 1 MiB one, of buckets or of an unknown
// field.
func BenchmarkDecodePush(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"recorder-largest", largestRecorderPush("a", t0)},
		{"widest", widestPush("a", t0)},
		{"buckets-at-cap", wide("a", t0, 19_500, DefaultMaxPushBody-100)},
		{"buckets-0.9MB", wide("a", t0, 70_000, 900_000)},
		{"unknown-field-0.9MB", wide("a", t0, 100, 900_000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				decodePush(c.body)
			}
		})
	}
}

// widestFeatures adds MaxFeatures features to a push body, their names
// and numbers as wide as the source takes.
func widestFeatures(body []byte) []byte {
	var b pushBody
	if err := json.Unmarshal(body, &b); err != nil {
		panic(err)
	}
	m := pushMoments{N: maxCount, Sum: 1.2345678901234567e+08, SumSq: 1.2345678901234567e+16}
	b.Features = map[string]pushFeature{}
	for i := range signals.MaxFeatures {
		name := fmt.Sprintf("%03d", i) + strings.Repeat("f", signals.MaxFeatureLen-3)
		b.Features[name] = pushFeature{On: m, Off: m, Unattributed: maxCount}
	}
	out, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return out
}

// TestPushMaxBodyHoldsTheFeatures: 64 features of the longest names
// (about 22 KB) still fit the default body cap on top of the widest push,
// and a Recorder's largest push with them keeps three times its size of
// room.
func TestPushMaxBodyHoldsTheFeatures(t *testing.T) {
	widest := widestFeatures(widestPush("a", t0.Add(-time.Second)))
	largest := widestFeatures(largestRecorderPush("a", t0))
	t.Logf("widest push with features %d bytes, a Recorder's largest %d bytes, cap %d", len(widest), len(largest), DefaultMaxPushBody)
	assert.Less(t, len(widest), DefaultMaxPushBody)
	assert.Less(t, len(largest)*3, DefaultMaxPushBody)
	c := &clock{t: t0}
	src := newPushSource(c)
	mustPush(t, src, widest)
	mustPush(t, src, largest)
	c.t = t0.Add(time.Second)
	mustPush(t, src, widestFeatures(largestRecorderPush("a", c.t)))
	snap, err := src.Snapshot(context.Background(), c.t)
	require.NoError(t, err)
	assert.Len(t, snap.Tallies, signals.MaxFeatures)
}

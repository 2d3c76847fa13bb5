package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/brownout/brownout/signals"
)

// The push wire format, version 1 (doc.go shows a body). It carries the
// numbers Collector exports on /metrics, cumulative, and decodes into the
// targetState a scrape parses into, so that the fleet computation is the
// same for both.

// pushVersion is the wire format's version this package writes and reads.
const pushVersion = 1

// maxInstanceLen bounds an instance id.
const maxInstanceLen = 128

// maxPushBuckets bounds one push's histogram buckets, classic and native,
// over the latency and every class's sojourn: a Recorder's push holds at
// most 4 × (526 + 16) = 2 168 (see maxInstanceBuckets), and two of the
// largest allowed fit in what the source keeps per instance.
const maxPushBuckets = maxInstanceBuckets / 2

// pushBody is one push. Counts are JSON numbers (whole, non-negative),
// durations seconds. Every field but v, instance and time is optional;
// decoders ignore fields they do not know.
type pushBody struct {
	V        int    `json:"v"`
	Instance string `json:"instance"`
	// Time is the instance's clock when it read its Recorder; Start is when
	// its pusher started (a new Start is a new run). RFC 3339.
	Time     string               `json:"time,omitempty"`
	Start    string               `json:"start,omitempty"`
	InFlight *float64             `json:"in_flight,omitempty"`
	Gate     *pushGate            `json:"gate,omitempty"`
	Latency  *pushHist            `json:"latency,omitempty"`
	Classes  map[string]pushClass `json:"classes,omitempty"`
	// Features holds each registered feature's cumulative tally (see
	// Tally), by feature name; at most MaxFeatures.
	Features map[string]pushFeature `json:"features,omitempty"`
	// Work is the cumulative work of every tallied request, features or
	// none (Recorder.Work).
	Work *pushMoments `json:"work,omitempty"`
}

// pushFeature is one feature's cumulative tally.
type pushFeature struct {
	On           pushMoments `json:"on"`
	Off          pushMoments `json:"off"`
	Unattributed float64     `json:"unattributed"`
}

// pushMoments is Moments on the wire: a count and the sums of the service
// times and of their squares, in seconds.
type pushMoments struct {
	N     float64 `json:"n"`
	Sum   float64 `json:"sum"`
	SumSq float64 `json:"sum_sq"`
}

type pushGate struct {
	Limit    float64 `json:"limit"`
	InFlight float64 `json:"in_flight"`
	Queued   float64 `json:"queued"`
}

// pushHist is a cumulative histogram: classic buckets as [upper bound,
// cumulative count] pairs with the +Inf bucket implied by Count, and
// optionally native buckets.
type pushHist struct {
	Count   float64     `json:"count"`
	Sum     float64     `json:"sum"`
	Buckets [][]float64 `json:"buckets,omitempty"`
	Native  *pushNative `json:"native,omitempty"`
}

// pushNative holds native-histogram buckets as [index, count] pairs
// (counts per bucket, not cumulative) in ascending index; bucket i holds
// (2^((i−1)/2^schema), 2^(i/2^schema)], as in Prometheus. Zero counts the
// observations of 0 (durations that were not positive).
type pushNative struct {
	Schema  int32       `json:"schema"`
	Zero    float64     `json:"zero"`
	Buckets [][]float64 `json:"buckets,omitempty"`
}

type pushClass struct {
	Arrived   float64 `json:"arrived"`
	Completed float64 `json:"completed"`
	Failed    float64 `json:"failed"`
	Good      float64 `json:"good"`
	Waited    float64 `json:"waited"`
	// Rejected counts refusals by reason name; absent reasons are zero.
	Rejected   map[string]float64 `json:"rejected,omitempty"`
	Sojourn    *pushHist          `json:"sojourn,omitempty"`
	SojournMin *float64           `json:"sojourn_min,omitempty"`
	Standing   bool               `json:"standing"`
}

// pushOf reads rec at now as Collector does: cumulative histograms with
// the classic bounds given and native buckets at NativeSchema, gauges and
// counters. The caller fills in V, Instance, Time and Start.
func pushOf(rec *signals.Recorder, now time.Time, bounds []float64) pushBody {
	var b pushBody
	rec.Latency().Cumulative(now, func(n *[signals.NumBuckets]uint64, sum float64, count uint64) {
		b.Latency = pushHistOf(n, sum, count, bounds)
	})
	inFlight := float64(max(rec.Counters().InFlight(), 0)) // shards read one by one may add up below zero
	b.InFlight = &inFlight
	gr, gated := rec.Gate()
	if gated {
		b.Gate = &pushGate{Limit: gr.Limit, InFlight: gr.InFlight, Queued: float64(gr.Queued)}
	}
	counts := rec.Counters().Load()
	b.Classes = make(map[string]pushClass, signals.NumClasses)
	for cl := range signals.Class(signals.NumClasses) {
		cc := counts[cl]
		pc := pushClass{Arrived: float64(cc.Arrived), Completed: float64(cc.Completed), Failed: float64(cc.Failed),
			Good: float64(cc.Good), Waited: float64(cc.Waited)}
		for why, n := range cc.Rejected {
			if n > 0 {
				if pc.Rejected == nil {
					pc.Rejected = map[string]float64{}
				}
				pc.Rejected[signals.Reason(why).String()] = float64(n)
			}
		}
		sj := rec.Sojourn(cl)
		sj.Window().Cumulative(now, func(n *[signals.NumBuckets]uint64, sum float64, count uint64) {
			pc.Sojourn = pushHistOf(n, sum, count, bounds)
		})
		st := sj.Stats(now)
		if st.MinOK {
			m := st.Min.Seconds()
			pc.SojournMin = &m
		}
		pc.Standing = st.Standing
		if gated { // the gate decides; the tracker only estimates
			pc.Standing = gr.Standing[cl]
		}
		b.Classes[cl.String()] = pc
	}
	if tl := rec.Tallies(); len(tl) > 0 {
		b.Features = make(map[string]pushFeature, len(tl))
		for _, t := range tl {
			b.Features[t.Feature] = pushFeature{On: pushMomentsOf(t.On), Off: pushMomentsOf(t.Off), Unattributed: float64(t.Unattributed)}
		}
		w := pushMomentsOf(rec.Work())
		b.Work = &w
	}
	return b
}

func pushMomentsOf(m signals.Moments) pushMoments {
	return pushMoments{N: float64(m.N), Sum: m.Sum, SumSq: m.SumSq}
}

func pushHistOf(n *[signals.NumBuckets]uint64, sumNs float64, count uint64, bounds []float64) *pushHist {
	classic, native, zero := signals.ExportBuckets(n, bounds)
	h := &pushHist{Count: float64(count), Sum: sumNs / 1e9, Native: &pushNative{Schema: signals.NativeSchema, Zero: float64(zero)}}
	var cum uint64
	for j, ub := range bounds {
		cum += classic[j]
		h.Buckets = append(h.Buckets, []float64{ub, float64(cum)})
	}
	idx := make([]int, 0, len(native))
	for i := range native {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		h.Native.Buckets = append(h.Native.Buckets, []float64{float64(i), float64(native[i])})
	}
	return h
}

// pushed is a decoded, checked push.
type pushed struct {
	instance   string
	clock, run time.Time
	st         targetState
}

// pushProblem is why a push was refused: an HTTP status, the last part of
// the problem type (urn:brownout:push:<kind>) and a detail that says
// exactly what is wrong.
type pushProblem struct {
	status int
	kind   string
	detail string
}

func (e *pushProblem) Error() string { return "fleet: push refused: " + e.detail }

// Unwrap returns the sentinel of the problem's kind, if it has one.
func (e *pushProblem) Unwrap() error {
	switch e.kind {
	case "too-many-instances":
		return ErrTooManyInstances
	case "too-large":
		return ErrPushTooLarge
	}
	return nil
}

var pushTitles = map[string]string{
	"method":             "Method not allowed",
	"media-type":         "Unsupported media type",
	"too-large":          "Push too large",
	"malformed":          "Malformed JSON",
	"version":            "Unsupported push version",
	"invalid":            "Invalid push",
	"stale":              "Stale push",
	"duplicate-instance": "Instance id used by another run",
	"timeout":            "Request timeout",
	"too-many-instances": "Too many instances",
}

func invalid(format string, args ...any) *pushProblem {
	return &pushProblem{status: http.StatusBadRequest, kind: "invalid", detail: fmt.Sprintf(format, args...)}
}

// decodePush parses and checks a body. On error, the returned push still
// names its instance when the body got that far.
func decodePush(body []byte) (pushed, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return pushed{}, &pushProblem{http.StatusBadRequest, "malformed", "empty body: want a JSON object"}
	}
	// The version first, so that a body of another version is refused for
	// its version and not for a field whose shape changed.
	var head struct {
		V json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return pushed{}, jsonProblem(body, err)
	}
	if v := string(head.V); v != "1" {
		var f float64
		switch {
		case v == "" || v == "null":
			return pushed{}, &pushProblem{http.StatusBadRequest, "version", `"v" missing: this server reads version 1`}
		case json.Unmarshal(head.V, &f) != nil:
			return pushed{}, &pushProblem{http.StatusBadRequest, "version", fmt.Sprintf(`"v" is %s: want the number 1`, truncate(v))}
		case f != pushVersion:
			return pushed{}, &pushProblem{http.StatusBadRequest, "version", fmt.Sprintf("version %s is not supported: this server reads version 1", truncate(v))}
		}
	}
	var b pushBody
	if err := json.Unmarshal(body, &b); err != nil {
		nameKey(body, err)
		return pushed{}, jsonProblem(body, err)
	}
	return b.decode()
}

// nameKey puts into a type error the whole path of the value it is
// about: encoding/json names a struct's fields but neither a map's keys
// nor an array's elements ("features.on.sum", "latency.buckets"), which
// leaves a push of a dozen features to guess which one is wrong
// (`features["banner"].on.sum`, `latency.buckets[3][1]`). It runs only
// for a body already refused, so a push that decodes pays nothing, and
// keeps encoding/json's field names unless the path it finds has the
// same ones (the error is then the same value's).
func nameKey(body []byte, err error) {
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &typ) || typ.Field == "" || !crossesKeys(reflect.TypeFor[pushBody](), typ.Field) {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // (a number out of float64's range is a token still)
	w := typeWalk{dec: dec, want: strings.Split(typ.Field, ".")}
	if bad, err := w.value(reflect.TypeFor[pushBody]()); err == nil && bad && strings.TrimPrefix(w.fields, ".") == typ.Field {
		typ.Field = strings.TrimPrefix(w.path, ".")
	}
}

// crossesKeys reports whether the path of struct fields encoding/json
// names in t (its Field) passes through a map or a slice, whose keys or
// indices it leaves out: a path of fields alone is whole as it is, and
// the body is not walked again for it.
func crossesKeys(t reflect.Type, field string) bool {
	for name := range strings.SplitSeq(field, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Map || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			return true
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		f, ok := matchField(jsonFields(t), name)
		if !ok {
			return false
		}
		t = f.typ
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Map || t.Kind() == reflect.Slice || t.Kind() == reflect.Array
}

// typeWalk finds, in one pass over a JSON body, the first value in the
// body's order that does not decode into its place in a Go type for a type
// error — the one encoding/json reports, as it keeps the first — by
// encoding/json's rules for the kinds a push holds (numbers, strings,
// booleans, structs, maps of string keys, slices, pointers; null fits
// any). It keeps the value's path: a struct's fields as ".name" (by
// their JSON names, matched as encoding/json matches them: exactly, else
// without regard to case), a map's keys as ["key"] (quoted and
// truncated, as anything from outside in a message), an array's elements
// as [i]; and the same path with the struct fields alone, as
// encoding/json names it. One pass, along the fields encoding/json
// named: a refusal of the largest body (MaxBody) costs a few times its
// decoding where the path crosses a large map or array, about one
// elsewhere.
type typeWalk struct {
	dec          *json.Decoder
	path, fields string
	// want is the fields encoding/json named still to come: a struct's
	// other fields are skipped, the first error in the body's order
	// being on that path.
	want    []string
	skipped json.RawMessage // a field skipped
}

// value reads the next value for type t: bad reports a type error in it,
// w.path and w.fields its path below here; err, a body that is not JSON.
func (w *typeWalk) value(t reflect.Type) (bad bool, err error) {
	tok, err := w.dec.Token()
	if err != nil {
		return false, err
	}
	if tok == nil {
		return false, nil // null fits any
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch v := tok.(type) {
	case json.Delim:
		switch {
		case v == '{' && t.Kind() == reflect.Struct:
			return w.object(t, nil)
		case v == '{' && t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
			return w.object(nil, t.Elem())
		case v == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			for i := 0; w.dec.More(); i++ {
				if bad, err := w.value(t.Elem()); bad || err != nil {
					w.path = "[" + strconv.Itoa(i) + "]" + w.path
					return bad, err
				}
			}
			_, err := w.dec.Token() // ]
			return false, err
		}
		return true, nil // an object or array where t is not one
	case json.Number:
		switch t.Kind() {
		case reflect.Float64, reflect.Float32:
			_, err := strconv.ParseFloat(string(v), t.Bits())
			return err != nil, nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err := strconv.ParseInt(string(v), 10, t.Bits())
			return err != nil, nil
		}
		return true, nil
	case string:
		return t.Kind() != reflect.String, nil
	case bool:
		return t.Kind() != reflect.Bool, nil
	}
	return true, nil
}

// object reads an object's members, its opening brace read: a struct
// st's fields, or a map's values of type elem.
func (w *typeWalk) object(st, elem reflect.Type) (bad bool, err error) {
	var names []fieldName
	if st != nil {
		names = jsonFields(st)
	}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return false, err
		}
		key, _ := tok.(string)
		if st == nil {
			if bad, err := w.value(elem); bad || err != nil {
				w.path = keyed("", key) + w.path
				return bad, err
			}
			continue
		}
		f, ok := matchField(names, key)
		want := w.want
		if !ok || len(want) == 0 || f.name != want[0] {
			if err := w.dec.Decode(&w.skipped); err != nil {
				return false, err
			}
			continue
		}
		w.want = want[1:]
		bad, err := w.value(f.typ)
		w.want = want
		if bad || err != nil {
			w.path, w.fields = "."+f.name+w.path, "."+f.name+w.fields
			return bad, err
		}
	}
	_, err = w.dec.Token() // }
	return false, err
}

// fieldName is a struct field as JSON names it.
type fieldName struct {
	name string
	typ  reflect.Type
}

// fieldNames caches jsonFields by type: a hostile body names a field
// tens of thousands of times.
var fieldNames sync.Map // reflect.Type → []fieldName

// jsonFields lists the fields of struct t that JSON reads, by their JSON
// names.
func jsonFields(t reflect.Type) []fieldName {
	if v, ok := fieldNames.Load(t); ok {
		return v.([]fieldName)
	}
	var fs []fieldName
	for sf := range t.Fields() {
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, fieldName{name, sf.Type})
	}
	fieldNames.Store(t, fs)
	return fs
}

// matchField is the field a JSON object's key decodes into, as
// encoding/json picks it: the field of that name, else the first whose
// name matches it without regard to case.
func matchField(fs []fieldName, key string) (fieldName, bool) {
	for _, f := range fs {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fs {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return fieldName{}, false
}

// keyed is path's value under the map key k, as every refusal names one:
// path["k"], the key quoted and shortened (a name from outside may hold a
// dot, a newline or a quarter of a megabyte). A key Go quotes as it is
// costs one allocation, as a path of dots did.
func keyed(path, k string) string {
	k = truncate(k)
	for _, r := range k {
		if r == utf8.RuneError || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return path + "[" + strconv.Quote(k) + "]"
		}
	}
	return path + `["` + k + `"]`
}

// jsonProblem explains a json.Unmarshal error.
func jsonProblem(body []byte, err error) *pushProblem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		d := fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)
		if at := body[max(min(syn.Offset-1, int64(len(body))), 0):]; bytes.HasPrefix(at, []byte("NaN")) ||
			bytes.HasPrefix(at, []byte("Inf")) || bytes.HasPrefix(at, []byte("+Inf")) || bytes.HasPrefix(at, []byte("-Inf")) {
			d += " (JSON has no NaN or Infinity: every value must be a finite number)"
		}
		return &pushProblem{http.StatusBadRequest, "malformed", d}
	case errors.As(err, &typ):
		want := kindWord(typ.Type)
		if typ.Field == "" {
			return &pushProblem{http.StatusBadRequest, "malformed", fmt.Sprintf("the body is a JSON %s: want %s", typ.Value, want)}
		}
		// (The value is the literal for a number: a hostile one may be a
		// quarter of a megabyte of digits.)
		if strings.HasPrefix(typ.Value, "number") && want == "a number" {
			return invalid("%s: %s is out of range", typ.Field, truncate(typ.Value))
		}
		return invalid("%s: %s is not %s", typ.Field, truncate(typ.Value), want)
	}
	return &pushProblem{http.StatusBadRequest, "malformed", "malformed JSON: " + err.Error()}
}

func kindWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// checkInstance says what is wrong with an instance id.
func checkInstance(s string) error {
	switch {
	case s == "":
		return errors.New(`"instance" missing: name the pushing instance (e.g. its host or pod name)`)
	case len(s) > maxInstanceLen:
		return fmt.Errorf(`"instance" is %d bytes long: at most %d`, len(s), maxInstanceLen)
	case !utf8.ValidString(s):
		return errors.New(`"instance" is not valid UTF-8`)
	case strings.TrimSpace(s) != s:
		return fmt.Errorf(`"instance" %q has leading or trailing space`, s)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf(`"instance" %q contains a control character`, s)
	}
	return nil
}

func (b *pushBody) decode() (pushed, error) {
	var p pushed
	if err := checkInstance(b.Instance); err != nil {
		return p, invalid("%v", err)
	}
	p.instance = b.Instance
	// Without its time a push cannot be ordered: a late or replayed one
	// would take the place of a newer one and read as a counter reset.
	if b.Time == "" {
		return p, invalid(`"time" missing: give each push its instance's clock when it read its counts (RFC 3339); pushes are ordered by it`)
	}
	if n := b.buckets(); n > maxPushBuckets {
		return p, &pushProblem{http.StatusRequestEntityTooLarge, "too-large", fmt.Sprintf(
			"the push holds %d histogram buckets: at most %d (a Recorder's push holds under 2 200)", n, maxPushBuckets)}
	}
	for _, t := range []struct {
		name, v string
		into    *time.Time
	}{{"time", b.Time, &p.clock}, {"start", b.Start, &p.run}} {
		if t.v == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			return p, invalid("%q %q is not an RFC 3339 time (e.g. 2026-11-11T00:00:01.25Z)", t.name, truncate(t.v))
		}
		*t.into = v
	}
	st := &p.st
	if b.InFlight != nil {
		if err := checkGauge("in_flight", *b.InFlight); err != nil {
			return p, err
		}
		st.inFlight, st.hasInFlight = *b.InFlight, true
	}
	if g := b.Gate; g != nil {
		for _, c := range []struct {
			name string
			v    float64
		}{{"gate.limit", g.Limit}, {"gate.in_flight", g.InFlight}} {
			if err := checkGauge(c.name, c.v); err != nil {
				return p, err
			}
		}
		if err := checkCount("gate.queued", g.Queued); err != nil {
			return p, err
		}
		st.gate = signals.GateReading{Limit: g.Limit, InFlight: g.InFlight, Queued: int(g.Queued)}
		st.hasGate = true
	}
	if b.Latency != nil {
		h, err := b.Latency.decode("latency")
		if err != nil {
			return p, err
		}
		st.latency, st.hasLat = h, true
	}
	names := make([]string, 0, len(b.Classes))
	for n := range b.Classes {
		names = append(names, n)
	}
	slices.Sort(names) // the first error is always the same one
	for _, name := range names {
		cl, ok := classNamed(name)
		if !ok {
			continue // a class this version does not know
		}
		if err := st.readClass(cl, b.Classes[name]); err != nil {
			return p, err
		}
	}
	if err := st.readFeatures(b.Features); err != nil {
		return p, err
	}
	if b.Work != nil {
		w, err := b.Work.decode("work")
		if err != nil {
			return p, err
		}
		if err := checkTalliedWork(st.tallies, w); err != nil {
			return p, err
		}
		st.work, st.hasWork = w, true
	}
	st.parsed = true
	return p, nil
}

// readFeatures checks a push's feature tallies and keeps them sorted by
// name.
func (st *targetState) readFeatures(fs map[string]pushFeature) error {
	if len(fs) > signals.MaxFeatures {
		return invalid("features: %d features: at most %d per push", len(fs), signals.MaxFeatures)
	}
	if len(fs) == 0 {
		return nil
	}
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	slices.Sort(names)
	st.tallies = make([]signals.Tally, 0, len(names))
	for _, name := range names {
		if err := signals.CheckFeature(name); err != nil {
			return invalid("features: %s", strings.TrimPrefix(err.Error(), "signals: "))
		}
		f := fs[name]
		path := keyed("features", name)
		t := signals.Tally{Feature: name}
		for _, m := range []struct {
			name string
			w    pushMoments
			into *signals.Moments
		}{{"on", f.On, &t.On}, {"off", f.Off, &t.Off}} {
			v, err := m.w.decode(path + "." + m.name)
			if err != nil {
				return err
			}
			*m.into = v
		}
		if err := checkCount(path+".unattributed", f.Unattributed); err != nil {
			return err
		}
		t.Unattributed = int64(f.Unattributed)
		st.tallies = append(st.tallies, t)
	}
	return nil
}

// maxRequestWork bounds the mean service time of a push's moments, in
// seconds: an hour, longer than any request a brownout controller dims
// (its latency targets are seconds). It keeps every sum finite in what the
// estimates compute from them — a mean, a variance, a contrast between
// two features' means — so that one push cannot move them by more than
// an hour's request would: a sum of 1e300 seconds took every learned cost
// out of a daemon's state, and they did not come back.
const maxRequestWork = 3600.0

// momentsSlack is the relative rounding the float sums of n terms may
// carry, added one by one in any order: n unit roundoffs (2⁻⁵³ each),
// twice over for a square's own rounding, and at least 1e-9. A bound
// checked on them holds within it. (A fixed 1e-9 refused a Recorder's
// honest work after 3·10⁷ requests of one equal time each: their sum had
// drifted by 5·10⁻¹⁰ of it, their squares' by as much the other way.)
func momentsSlack(n int64) float64 { return max(1e-9, 4*float64(n)*0x1p-53) }

// decode checks moments on the wire, named path in errors: counts and
// sums as they must be (whole, not negative, no time without a request),
// a mean service time of at most maxRequestWork, and a sum of squares
// that n service times summing to sum can have (sum² ≤ n·sum_sq,
// Cauchy–Schwarz: n requests of 0.2 s sum to 1000 s only with squares
// that sum to 200 s² or more).
func (w pushMoments) decode(path string) (signals.Moments, error) {
	if err := checkCount(path+".n", w.N); err != nil {
		return signals.Moments{}, err
	}
	for _, g := range []struct {
		name string
		v    float64
	}{{"sum", w.Sum}, {"sum_sq", w.SumSq}} {
		if err := checkGauge(path+"."+g.name, g.v); err != nil {
			return signals.Moments{}, err
		}
		if w.N == 0 && g.v != 0 {
			return signals.Moments{}, invalid("%s.%s: %g with n 0: no request, no time", path, g.name, g.v)
		}
	}
	if w.N > 0 {
		switch {
		case w.Sum > w.N*maxRequestWork:
			return signals.Moments{}, invalid("%s.sum: %g s over %g requests is %.3g s a request: over an hour, no request's service time (sum is in seconds)", path, w.Sum, w.N, w.Sum/w.N)
		case w.SumSq > w.N*maxRequestWork*maxRequestWork:
			return signals.Moments{}, invalid("%s.sum_sq: %g s² over %g requests: more than an hour's request each (sum_sq is in seconds squared)", path, w.SumSq, w.N)
		case w.Sum*w.Sum > w.N*w.SumSq*(1+momentsSlack(int64(w.N))):
			return signals.Moments{}, invalid("%s: sum %g and sum_sq %g cannot come from %g requests: their sum squared is at most n·sum_sq (sum_sq is the sum of each request's time squared)", path, w.Sum, w.SumSq, w.N)
		}
	}
	return signals.Moments{N: int64(w.N), Sum: w.Sum, SumSq: w.SumSq}, nil
}

// checkTalliedWork checks a push's tallies against its work (both
// cumulative): every tallied request's time is in the work, so no
// feature counts more requests, or more time, than the work does. (A
// Recorder reads its tallies before its work, and a request adds to its
// work before its tallies: its pushes hold to it.)
func checkTalliedWork(tallies []signals.Tally, work signals.Moments) error {
	for _, t := range tallies {
		if n := t.On.N + t.Off.N; n > work.N {
			return invalid("%s: %d requests tallied (on and off), more than the %d of work: every tallied request's time is in work", keyed("features", t.Feature), n, work.N)
		}
		if sum := t.On.Sum + t.Off.Sum; sum > work.Sum*(1+momentsSlack(work.N)) {
			return invalid("%s: %g s tallied (on and off), more than work's %g s: every tallied request's time is in work", keyed("features", t.Feature), sum, work.Sum)
		}
	}
	return nil
}

// buckets counts the histogram buckets of b, classic and native, over
// its latency and every class's sojourn (known classes or not).
func (b *pushBody) buckets() int {
	n := b.Latency.buckets()
	for _, c := range b.Classes {
		n += c.Sojourn.buckets()
	}
	return n
}

func (h *pushHist) buckets() int {
	if h == nil {
		return 0
	}
	n := len(h.Buckets)
	if h.Native != nil {
		n += len(h.Native.Buckets)
	}
	return n
}

func (st *targetState) readClass(cl signals.Class, c pushClass) error {
	path := keyed("classes", cl.String())
	cc := &st.classes[cl]
	for _, f := range []struct {
		name string
		v    float64
		into *uint64
	}{{"arrived", c.Arrived, &cc.Arrived}, {"completed", c.Completed, &cc.Completed}, {"failed", c.Failed, &cc.Failed},
		{"good", c.Good, &cc.Good}, {"waited", c.Waited, &cc.Waited}} {
		if err := checkCount(path+"."+f.name, f.v); err != nil {
			return err
		}
		*f.into = uint64(f.v)
	}
	for r := range signals.Reason(signals.NumReasons) {
		// (In the reasons' order, so that of two bad counts the same is
		// named each time; a reason this version does not know is
		// skipped.)
		n, ok := c.Rejected[r.String()]
		if !ok {
			continue
		}
		if checkCount("", n) != nil { // (the path formatted for a refusal only)
			return checkCount(keyed(path+".rejected", r.String()), n)
		}
		cc.Rejected[r] = uint64(n)
	}
	st.hasClasses = true
	if c.Sojourn != nil {
		h, err := c.Sojourn.decode(path + ".sojourn")
		if err != nil {
			return err
		}
		if err := st.sojourn.add(h); err != nil {
			return invalid("%s.sojourn: bucket bounds differ from the other classes'", path)
		}
		st.hasSoj = true
	}
	if c.SojournMin != nil {
		if err := checkGauge(path+".sojourn_min", *c.SojournMin); err != nil {
			return err
		}
		st.sojournMin, st.hasSojMin = max(st.sojournMin, *c.SojournMin), true
	}
	st.standing = st.standing || c.Standing
	return nil
}

// maxCount is the largest count a float64 holds exactly.
const maxCount = 1 << 53

// validCount reports whether v is a count checkCount takes, without
// formatting anything: the decoders check every bucket with it, and name
// the bucket only when it fails.
func validCount(v float64) bool { return v >= 0 && v == math.Trunc(v) && v <= maxCount }

func checkCount(path string, v float64) error {
	switch {
	case v < 0:
		return invalid("%s: %g is negative", path, v)
	case v != math.Trunc(v):
		return invalid("%s: %g is not a whole number", path, v)
	case v > maxCount:
		return invalid("%s: %g is too large (over 2^53)", path, v)
	}
	return nil
}

func checkGauge(path string, v float64) error {
	if v < 0 {
		return invalid("%s: %g is negative", path, v)
	}
	return nil
}

// bucketPath names a bucket in a refusal ("latency.buckets[3]"), formatted
// only when a refusal says it: a push has hundreds of buckets.
type bucketPath struct {
	hist, list string
	i          int
}

func (p bucketPath) String() string { return p.hist + p.list + "[" + strconv.Itoa(p.i) + "]" }

// decode checks a histogram and converts it.
func (w *pushHist) decode(path string) (hist, error) {
	if err := checkCount(path+".count", w.Count); err != nil {
		return hist{}, err
	}
	if err := checkGauge(path+".sum", w.Sum); err != nil {
		return hist{}, err
	}
	h := hist{count: w.Count, sum: w.Sum}
	prevB, prevC := 0.0, 0.0
	for i, b := range w.Buckets {
		p := bucketPath{path, ".buckets", i}
		if len(b) != 2 {
			return hist{}, invalid("%s: want [upper bound, cumulative count], got %d numbers", p, len(b))
		}
		ub, cum := b[0], b[1]
		switch {
		case ub < 0:
			return hist{}, invalid("%s: upper bound %g is negative", p, ub)
		case i > 0 && ub <= prevB:
			return hist{}, invalid("%s: upper bound %g is not above the previous bucket's %g: bounds must ascend", p, ub, prevB)
		}
		if !validCount(cum) {
			return hist{}, checkCount(p.String(), cum)
		}
		if cum < prevC {
			return hist{}, invalid("%s: cumulative count %g is below the previous bucket's %g", p, cum, prevC)
		}
		h.bounds = append(h.bounds, ub)
		h.classic = append(h.classic, cum-prevC)
		prevB, prevC = ub, cum
	}
	if prevC > w.Count {
		return hist{}, invalid("%s.count: %g is below the last bucket's cumulative count %g", path, w.Count, prevC)
	}
	h.bounds = append(h.bounds, math.Inf(1))
	h.classic = append(h.classic, w.Count-prevC)
	n := w.Native
	if n == nil {
		return h, nil
	}
	if n.Schema < minNativeSchema || n.Schema > maxNativeSchema {
		return hist{}, invalid("%s.native.schema: %d is not a native-histogram schema (-4 to 8)", path, n.Schema)
	}
	if err := checkCount(path+".native.zero", n.Zero); err != nil {
		return hist{}, err
	}
	h.native, h.schema, h.zero, h.pos = true, n.Schema, n.Zero, make(map[int]float64, len(n.Buckets))
	limit := 1023 * math.Exp2(float64(n.Schema)) // beyond, a bucket's bounds overflow float64
	total, prev := n.Zero, 0.0
	for i, b := range n.Buckets {
		p := bucketPath{path, ".native.buckets", i}
		if len(b) != 2 {
			return hist{}, invalid("%s: want [index, count], got %d numbers", p, len(b))
		}
		idx, cnt := b[0], b[1]
		switch {
		case idx != math.Trunc(idx):
			return hist{}, invalid("%s: index %g is not a whole number", p, idx)
		case math.Abs(idx) > limit:
			return hist{}, invalid("%s: index %g is out of range at schema %d", p, idx, n.Schema)
		case i > 0 && idx <= prev:
			return hist{}, invalid("%s: index %g is not above the previous bucket's %g: indices must ascend", p, idx, prev)
		}
		if !validCount(cnt) {
			return hist{}, checkCount(p.String(), cnt)
		}
		h.pos[int(idx)] = cnt
		total += cnt
		prev = idx
	}
	if total > w.Count {
		return hist{}, invalid("%s.native: the buckets hold %g observations, more than count %g", path, total, w.Count)
	}
	return h, nil
}

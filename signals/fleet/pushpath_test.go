package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brownout/brownout/signals"
)

// TestPushPathNamesTheValueJSONRefused: a refusal for a type error names
// the value encoding/json refused. Good pushes are mutated at random —
// values of the wrong type anywhere, keys case-folded (the Kelvin sign and
// the long s included) or escaped, duplicated with a bad copy, strange map
// keys, members shuffled — and the path in each refusal is checked against
// the value at the byte offset encoding/json reports, found by an
// independent walk; the same body is refused with the same detail twice.
func TestPushPathNamesTheValueJSONRefused(t *testing.T) {
	rec := goldenRecorder()
	for r := range signals.Reason(signals.NumReasons) {
		for c := range signals.Class(signals.NumClasses) {
			rec.Reject(c, r)
		}
	}
	names := []string{"feat-a", "feat-b", "feat-c"}
	require.NoError(t, rec.Features(names...))
	for i, n := range names {
		tally(rec, n, i%2 == 0, 20*time.Millisecond)
	}
	good := body(t, rec, "shop-1", t0.Add(-time.Hour), t0)
	base := parseNode(numDec(string(good)))
	rng := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for range 2000 {
		root := base.clone()
		mutate(rng, root)
		var sb strings.Builder
		root.write(rng, &sb)
		b := []byte(sb.String())
		var pb pushBody
		var typ *json.UnmarshalTypeError
		if !errors.As(json.Unmarshal(b, &pb), &typ) || typ.Field == "" || pb.V != 1 {
			continue
		}
		_, err := decodePush(b)
		var p *pushProblem
		require.ErrorAs(t, err, &p)
		_, again := decodePush(b)
		require.Equal(t, p.detail, again.(*pushProblem).detail, "the same body, the same detail")
		assert.Less(t, len(p.detail), 1024)
		path, fields := oracle(b, 0, reflect.TypeFor[pushBody](), int(typ.Offset)-1)
		want := strings.TrimPrefix(path, ".")
		if strings.TrimPrefix(fields, ".") != typ.Field {
			want = typ.Field // (encoding/json's own name is kept)
		}
		checked++
		if !strings.HasPrefix(p.detail, want+": ") {
			t.Errorf("detail %q, the value refused at %q (Field %q, offset %d)\nbody %s", p.detail, want, typ.Field, typ.Offset, b)
		}
	}
	t.Logf("%d refusals for a type error checked", checked)
	assert.Greater(t, checked, 200)
}

// BenchmarkPushRefusal: what naming the path costs a refusal, beside a
// plain decode of the same body (the anchor): a 256 KiB push of many
// features whose last one is bad, where the walk crosses the whole map.
func BenchmarkPushRefusal(b *testing.B) {
	const timed = `{"v":1,"instance":"x","time":"2026-11-11T00:00:05Z","features":{`
	var sb strings.Builder
	sb.WriteString(timed)
	for i := 0; sb.Len() < 250<<10; i++ {
		fmt.Fprintf(&sb, `"f%d":{"on":{"n":1,"sum":0.1,"sum_sq":0.01}},`, i)
	}
	sb.WriteString(`"last":{"on":{"n":"x"}}}}`)
	body := []byte(sb.String())
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var pb pushBody
			_ = json.Unmarshal(body, &pb)
		}
	})
	b.Run("decodePush", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = decodePush(body)
		}
	})
}

// node is a JSON value as a tree that keeps its members' order: objects
// (kind o), arrays (a) and literals (l).
type node struct {
	kind byte // 'o','a','l'
	keys []string
	kids []*node
	lit  string
}

func parseNode(dec *json.Decoder) *node {
	t, err := dec.Token()
	if err != nil {
		panic(err)
	}
	switch t {
	case json.Delim('{'):
		n := &node{kind: 'o'}
		for dec.More() {
			k, _ := dec.Token()
			n.keys = append(n.keys, k.(string))
			n.kids = append(n.kids, parseNode(dec))
		}
		dec.Token()
		return n
	case json.Delim('['):
		n := &node{kind: 'a'}
		for dec.More() {
			n.kids = append(n.kids, parseNode(dec))
		}
		dec.Token()
		return n
	}
	b, _ := json.Marshal(t)
	if t == nil {
		b = []byte("null")
	}
	if num, ok := t.(json.Number); ok {
		b = []byte(num)
	}
	return &node{kind: 'l', lit: string(b)}
}

func (n *node) clone() *node {
	c := *n
	c.keys = append([]string(nil), n.keys...)
	c.kids = nil
	for _, k := range n.kids {
		c.kids = append(c.kids, k.clone())
	}
	return &c
}

func encKey(r *rand.Rand, k string) string {
	b, _ := json.Marshal(k)
	s := string(b)
	if r.IntN(4) == 0 && len(k) > 0 { // escape a letter
		i := r.IntN(len(k))
		if k[i] >= 'a' && k[i] <= 'z' {
			s = `"` + k[:i] + fmt.Sprintf(`\u%04x`, k[i]) + k[i+1:] + `"`
		}
	}
	return s
}

func (n *node) write(r *rand.Rand, b *strings.Builder) {
	switch n.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(encKey(r, k))
			b.WriteString(" : ")
			n.kids[i].write(r, b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(", ")
			}
			k.write(r, b)
		}
		b.WriteByte(']')
	default:
		b.WriteString(n.lit)
	}
}

var badLits = []string{`"x"`, `{}`, `[]`, `true`, `1e400`, `[[1]]`, `{"a":"b"}`, `-1e999`, `"\u00e9"`, `1.5`, `null`, `0`, `[1,"x"]`, `{"on":"x"}`, `{"n":"x"}`, `[[1,"x"]]`}

func allNodes(n *node, out *[]*node) {
	*out = append(*out, n)
	for _, k := range n.kids {
		allNodes(k, out)
	}
}

func mutate(r *rand.Rand, root *node) {
	var all []*node
	allNodes(root, &all)
	for range 1 + r.IntN(4) {
		n := all[r.IntN(len(all))]
		switch r.IntN(6) {
		case 0, 1: // replace a child with a bad literal
			if len(n.kids) > 0 {
				i := r.IntN(len(n.kids))
				lit := badLits[r.IntN(len(badLits))]
				n.kids[i] = parseNode(numDec(lit))
			}
		case 2: // case-fold a key
			if n.kind == 'o' && len(n.keys) > 0 {
				i := r.IntN(len(n.keys))
				if r.IntN(2) == 0 {
					n.keys[i] = strings.ToUpper(n.keys[i])
				} else {
					n.keys[i] = strings.ReplaceAll(strings.ReplaceAll(n.keys[i], "k", "\u212a"), "s", "\u017f")
				}
			}
		case 3: // duplicate a key, mutated copy
			if n.kind == 'o' && len(n.keys) > 0 {
				i := r.IntN(len(n.keys))
				c := n.kids[i].clone()
				var cs []*node
				allNodes(c, &cs)
				m := cs[r.IntN(len(cs))]
				if len(m.kids) > 0 {
					m.kids[r.IntN(len(m.kids))] = parseNode(numDec(badLits[r.IntN(len(badLits))]))
				}
				j := r.IntN(len(n.keys) + 1)
				n.keys = append(n.keys[:j], append([]string{n.keys[i]}, n.keys[j:]...)...)
				n.kids = append(n.kids[:j], append([]*node{c}, n.kids[j:]...)...)
			}
		case 4: // a strange map key
			if n.kind == 'o' && len(n.keys) > 0 {
				i := r.IntN(len(n.keys))
				n.keys[i] = []string{"a.b", "\n", "", "\xff\xfe", strings.Repeat("€", 30), "x\"]", "\u2028"}[r.IntN(7)]
			}
		case 5: // shuffle
			if n.kind == 'o' && len(n.keys) > 1 {
				r.Shuffle(len(n.keys), func(a, b int) {
					n.keys[a], n.keys[b] = n.keys[b], n.keys[a]
					n.kids[a], n.kids[b] = n.kids[b], n.kids[a]
				})
			}
		}
	}
}

// oracle is the path (and its fields alone) of the deepest value of t's
// shape in raw, whose first byte is at base in the body, that holds the
// body's byte target: found by byte offsets, not as typeWalk finds it.
func oracle(raw []byte, base int, t reflect.Type, target int) (path, fields string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	open, _ := dec.Token()
	switch {
	case open == json.Delim('{') && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
		for dec.More() {
			k, _ := dec.Token()
			v, start, holds := member(dec, base, target)
			if !holds {
				continue
			}
			key := k.(string)
			if t.Kind() == reflect.Map {
				p, f := oracle(v, start, t.Elem(), target)
				return keyed("", key) + p, f
			}
			sf, ok := matchField(jsonFields(t), key)
			if !ok {
				return "?unknown", "?"
			}
			p, f := oracle(v, start, sf.typ, target)
			return "." + sf.name + p, "." + sf.name + f
		}
	case open == json.Delim('[') && (t.Kind() == reflect.Slice):
		for i := 0; dec.More(); i++ {
			v, start, holds := member(dec, base, target)
			if !holds {
				continue
			}
			p, f := oracle(v, start, t.Elem(), target)
			return fmt.Sprintf("[%d]", i) + p, f
		}
	}
	return "", ""
}

// member reads the next member's value from dec, whose input begins at
// base in the body: the value, where it begins, and whether it holds the
// body's byte target.
func member(dec *json.Decoder, base, target int) (v json.RawMessage, start int, holds bool) {
	_ = dec.Decode(&v)
	end := base + int(dec.InputOffset())
	start = end - len(v)
	return v, start, start <= target && target < end
}

func numDec(s string) *json.Decoder {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	return d
}

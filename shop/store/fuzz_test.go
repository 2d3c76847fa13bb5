package store

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzParseDSN: a PostgreSQL URL passes through untouched; any other
// accepted string becomes a file: URI that decodes back to the cleaned
// path, whose query is exactly the store's settings.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"shop.db", "/tmp/x.db", "postgres://u@h/db", "postgresql://h", "POSTGRES://x",
		"a?b#c%d", "//host/share", "file:x.db?mode=ro", ":memory:", "", "%zz", "x?_txlock=deferred"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		kind, src, err := parseDSN(dsn)
		if err != nil {
			return
		}
		lower := strings.ToLower(dsn)
		if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
			if kind != kindPostgres || src != dsn {
				t.Fatalf("%q: kind %d, %q", dsn, kind, src)
			}
			return
		}
		if kind != kindSQLite {
			t.Fatalf("%q: not SQLite", dsn)
		}
		rest, ok := strings.CutPrefix(src, "file:")
		if !ok {
			t.Fatalf("%q: %q has no file: prefix", dsn, src)
		}
		path, query, ok := strings.Cut(rest, "?")
		if !ok || strings.ContainsAny(path, "#") {
			t.Fatalf("%q: %q", dsn, src)
		}
		decoded, err := url.PathUnescape(path)
		if err != nil {
			t.Fatalf("%q: path %q does not decode: %v", dsn, path, err)
		}
		if want := filepath.Clean(dsn); decoded != want {
			t.Fatalf("%q: decodes to %q, want %q", dsn, decoded, want)
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatalf("%q: query %q: %v", dsn, query, err)
		}
		if got := q["_txlock"]; !slices.Equal(got, []string{"immediate"}) {
			t.Fatalf("%q: _txlock %v", dsn, got)
		}
		if len(q) != 2 || len(q["_pragma"]) != 3 {
			t.Fatalf("%q: query %v", dsn, q)
		}
	})
}

// FuzzNormalize: an accepted request's user is UTF-8 text without control
// characters; its items are sorted, distinct, each 1..MaxQty, with the
// same units per product as the request; the canonical form does not
// depend on the order of the items.
func FuzzNormalize(f *testing.F) {
	f.Add("u", []byte{1, 3, 2, 1, 1, 2})
	f.Add("", []byte{1, 1})
	f.Add("u", []byte{})
	f.Add("u", []byte{0, 1})
	f.Add("u", []byte{5, 6, 5, 5})
	f.Add("u\xff", []byte{1, 1})
	f.Add("u\x00", []byte{1, 1})
	f.Fuzz(func(t *testing.T, user string, raw []byte) {
		var req CheckoutRequest
		req.User = user
		for i := 0; i+1 < len(raw); i += 2 {
			req.Items = append(req.Items, Item{ProductID: int64(int8(raw[i])), Qty: int64(int8(raw[i+1]))})
		}
		items, canon, err := normalize(req)
		if err != nil {
			return
		}
		if user == "" || len(req.Items) == 0 || len(req.Items) > MaxItems {
			t.Fatalf("accepted %+v", req)
		}
		if !utf8.ValidString(user) || strings.ContainsFunc(user, unicode.IsControl) {
			t.Fatalf("accepted user %q", user)
		}
		want := map[int64]int64{}
		for _, it := range req.Items {
			if it.ProductID < 1 || it.Qty < 1 || it.Qty > MaxQty {
				t.Fatalf("accepted item %+v", it)
			}
			want[it.ProductID] += it.Qty
		}
		if len(items) != len(want) {
			t.Fatalf("%+v: %d items, want %d", req, len(items), len(want))
		}
		for i, it := range items {
			if i > 0 && items[i-1].ProductID >= it.ProductID {
				t.Fatalf("not sorted: %+v", items)
			}
			if it.Qty != want[it.ProductID] || it.Qty > MaxQty {
				t.Fatalf("%+v: %+v", req, it)
			}
		}
		rev := req
		rev.Items = slices.Clone(req.Items)
		slices.Reverse(rev.Items)
		_, canon2, err := normalize(rev)
		if err != nil || canon2 != canon {
			t.Fatalf("%+v: canonical %q, reversed %q (%v)", req, canon, canon2, err)
		}
	})
}

package service

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"shop", true}, {"a", true}, {"0", true}, {"shop-eu.1_b", true}, {strings.Repeat("a", MaxName), true},
		{"", false}, {strings.Repeat("a", MaxName+1), false}, {"Shop", false}, {"-shop", false}, {".", false}, {"..", false},
		{"a/b", false}, {"a b", false}, {"é", false}, {"a%2F", false}, {"a\n", false},
	} {
		if err := Check(c.name); (err == nil) != c.ok {
			t.Errorf("Check(%q) = %v, want ok %v", c.name, err, c.ok)
		}
	}
	if err := Check(strings.Repeat("A", 500)); err == nil || len(err.Error()) > 200 {
		t.Errorf("a long name's error is bounded: got %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("shop")
	f.Add("a/../b")
	f.Fuzz(func(t *testing.T, name string) {
		if Check(name) != nil {
			return
		}
		if strings.ContainsAny(name, "/?#%\\ \t\r\n:") || strings.HasPrefix(name, ".") || strings.ToLower(name) != name {
			t.Fatalf("Check took %q", name)
		}
	})
}

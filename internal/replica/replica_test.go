package replica

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckTakesReplicas(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		base bool
		want []string
	}{
		{"one", []string{"http://brownoutd:8080"}, true, []string{"http://brownoutd:8080"}},
		{"trailing slashes of a base URL", []string{"http://a:8080/", "https://b/prefix//"}, true, []string{"http://a:8080", "https://b/prefix"}},
		{"order kept", []string{"http://c", "http://a", "http://b"}, true, []string{"http://c", "http://a", "http://b"}},
		{"an endpoint as given", []string{"http://a/v1/signals", "http://b/v1/signals?tenant=x"}, false, []string{"http://a/v1/signals", "http://b/v1/signals?tenant=x"}},
		{"other ports are other replicas", []string{"http://a:8080", "http://a:8081"}, true, []string{"http://a:8080", "http://a:8081"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Check(tc.in, tc.base)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCheckRefusesBadLists(t *testing.T) {
	many := make([]string, Max+1)
	for i := range many {
		many[i] = "http://a:" + string(rune('0'+i%10)) + string(rune('0'+i/10))
	}
	for _, tc := range []struct {
		name string
		in   []string
		base bool
		want string
	}{
		{"empty", nil, true, "no URL"},
		{"too many", many, true, "17 URLs: at most 16"},
		{"no scheme", []string{"brownoutd:8080"}, true, "want an http or https URL"},
		{"ftp", []string{"ftp://a"}, true, "want an http or https URL"},
		{"no host", []string{"http://"}, true, "no host"},
		{"empty port", []string{"http://a:"}, true, "empty port"},
		{"credentials", []string{"http://u:p@a"}, true, "credentials in the URL"},
		{"fragment", []string{"http://a#x"}, true, "a fragment"},
		{"query in a base URL", []string{"http://a?x=1"}, true, "a query"},
		{"empty", []string{""}, true, "not a URL"},
		{"duplicate", []string{"http://a:8080", "http://b", "http://a:8080/"}, true, `"http://a:8080" and "http://a:8080/": the same replica twice`},
		{"duplicate by case and default port", []string{"http://Brownoutd", "HTTP://brownoutd:80"}, true, "the same replica twice"},
		{"duplicate https default port", []string{"https://a:443/", "https://a"}, true, "the same replica twice"},
		{"duplicate endpoint", []string{"http://a/v1/signals", "http://a/v1/signals/"}, false, "the same replica twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.in, tc.base)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParse(t *testing.T) {
	got, err := Parse(" http://a:8080/ , http://b:8080")
	require.NoError(t, err)
	assert.Equal(t, []string{"http://a:8080", "http://b:8080"}, got)
	for in, want := range map[string]string{
		"":                                    "no URL",
		" ":                                   "no URL",
		"http://a,":                           "URL 2 of 2 is empty",
		",http://a":                           "URL 1 of 2 is empty",
		"http://a,http://a":                   "the same replica twice",
		"http://a;http://b":                   "",
		strings.Repeat("http://a,", 17) + "x": "18 URLs: at most 16",
	} {
		_, err := Parse(in)
		if want == "" {
			assert.Error(t, err, "%q", in)
			continue
		}
		assert.ErrorContains(t, err, want, "%q", in)
	}
}

// FuzzParse: whatever the input, Parse does not panic; what it accepts
// is 1 to Max distinct base URLs that Parse reads back the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"http://a:8080", "http://a, https://b:8443/x/", "http://a,http://A:80/", "", ",", "http://u:p@a",
		"http://a?q", "http://[::1]:8080,http://[::1]:8081", "http://a#", "http://%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s)
		if err != nil {
			return
		}
		if len(got) == 0 || len(got) > Max {
			t.Fatalf("%q: %d URLs", s, len(got))
		}
		again, err := Parse(strings.Join(got, ","))
		if err != nil {
			t.Fatalf("%q: read back %q: %v", s, got, err)
		}
		if strings.Join(again, ",") != strings.Join(got, ",") {
			t.Fatalf("%q: read back %q as %q", s, got, again)
		}
		for _, u := range got {
			if strings.HasSuffix(u, "/") || strings.ContainsAny(u, ", \t") {
				t.Fatalf("%q: %q kept a trailing slash or a separator", s, u)
			}
		}
	})
}

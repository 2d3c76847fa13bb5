package signals

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseClass(t *testing.T) {
	for in, want := range map[string]Class{"critical": Critical, " Default ": Default, "SHEDDABLE": Sheddable, "A": Critical, "c": Sheddable} {
		got, err := ParseClass(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := ParseClass("urgent")
	assert.ErrorContains(t, err, `unknown priority class "urgent"`)
	r := httptest.NewRequest("GET", "/", nil)
	assert.Equal(t, Default, ClassOf(r), "no header")
	r.Header.Set(PriorityHeader, "vip")
	assert.Equal(t, Default, ClassOf(r), "unknown header")
}

// TestPriorityHeaderLowersNeverRaises: by default a client's X-Priority
// may lower a request's class, never raise it; trusted, it decides.
func TestPriorityHeaderLowersNeverRaises(t *testing.T) {
	route := func(*http.Request) Class { return Default }
	for _, tc := range []struct {
		header       string
		classify     func(*http.Request) Class
		plain, trust Class
	}{
		{"", nil, Default, Default},
		{"critical", nil, Default, Critical},
		{"sheddable", nil, Sheddable, Sheddable},
		{"vip", nil, Default, Default},
		{"", route, Default, Default},
		{"critical", route, Default, Critical},
		{"sheddable", route, Sheddable, Sheddable},
		{"default", func(*http.Request) Class { return Critical }, Default, Default},
		{"vip", func(*http.Request) Class { return Critical }, Critical, Critical},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set(PriorityHeader, tc.header)
		}
		name := fmt.Sprintf("header %q, classify %v", tc.header, tc.classify != nil)
		assert.Equal(t, tc.plain, PriorityClassifier(tc.classify, false)(r), "%s, not trusted", name)
		assert.Equal(t, tc.trust, PriorityClassifier(tc.classify, true)(r), "%s, trusted", name)
	}
}

// TestMiddlewareDoesNotTrustPriority: a zero MiddlewareConfig counts a
// client's "critical" as default; TrustPriority believes it.
func TestMiddlewareDoesNotTrustPriority(t *testing.T) {
	for _, trust := range []bool{false, true} {
		rec := NewRecorder(Config{})
		h := Middleware(rec, MiddlewareConfig{TrustPriority: trust})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(PriorityHeader, "critical")
		h.ServeHTTP(httptest.NewRecorder(), r)
		c := rec.counters.Load()
		want := Default
		if trust {
			want = Critical
		}
		assert.Equal(t, uint64(1), c[want].Arrived, "trust %v: counted as %s", trust, want)
	}
}

func TestDeadlineOf(t *testing.T) {
	now := t0
	r := httptest.NewRequest("GET", "/", nil)
	_, ok, err := DeadlineOf(r, now)
	assert.False(t, ok)
	assert.NoError(t, err)

	r.Header.Set(DeadlineHeader, FormatDeadline(now.Add(2*time.Second)))
	r.Header.Set(TimeoutHeader, "500m")
	d, ok, err := DeadlineOf(r, now)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, d.Equal(now.Add(500*time.Millisecond)), "the earlier of the two: %v", d)

	r.Header.Set(TimeoutHeader, "5X")
	d, ok, err = DeadlineOf(r, now)
	assert.ErrorIs(t, err, ErrBadDeadline)
	assert.True(t, ok, "a bad budget does not hide a good deadline")
	assert.True(t, d.Equal(now.Add(2*time.Second)))

	for in, want := range map[string]time.Duration{"1S": time.Second, "250m": 250 * time.Millisecond, "99999999H": 1<<63 - 1, "7n": 7} {
		got, err := ParseTimeout(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "m", "123456789S", "-1S", "1.5S", "10s"} {
		_, err := ParseTimeout(in)
		assert.ErrorIs(t, err, ErrBadDeadline, in)
	}
}

func FuzzHeaders(f *testing.F) {
	for _, s := range []string{"critical", "B", "2026-11-11T00:00:01.250Z", "250m", "99999999H", "\xff", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := ParseClass(s); err == nil && c >= NumClasses {
			t.Fatalf("class %d out of range", c)
		} else if err != nil && len(err.Error()) > 300 {
			t.Fatalf("error echoes the whole input: %d bytes", len(err.Error()))
		}
		if d, err := ParseTimeout(s); err == nil && d < 0 {
			t.Fatalf("negative timeout %v from %q", d, s)
		}
		if _, err := ParseDeadline(s); err != nil && len(err.Error()) > 300 {
			t.Fatalf("error echoes the whole input: %d bytes", len(err.Error()))
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(PriorityHeader, s)
		r.Header.Set(DeadlineHeader, s)
		r.Header.Set(TimeoutHeader, s)
		_ = ClassOf(r)
		DeadlineOf(r, t0)
	})
}

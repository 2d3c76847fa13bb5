package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRedact: a store URL's password is never printed, whether in its
// user info or in its query (libpq takes password= and sslpassword=
// there too), and the rest of the URL stays as it was written.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@db:5432/b", "postgres://u@db:5432/b"},
		{"postgres://u:secret@db:5432/b", "postgres://u:xxxxx@db:5432/b"},
		{"postgres://u@db/b?password=secret&sslmode=disable", "postgres://u@db/b?password=xxxxx&sslmode=disable"},
		{"postgresql://db/b?sslmode=verify-full&sslpassword=secret&pool_max_conns=4", "postgresql://db/b?sslmode=verify-full&sslpassword=xxxxx&pool_max_conns=4"},
		{"postgres://u:secret@db/b?pass%77ord=secret", "postgres://u:xxxxx@db/b?pass%77ord=xxxxx"},
		{"postgres://db/b?password", "postgres://db/b?password=xxxxx"},
		{"postgres://db/b?application_name=password", "postgres://db/b?application_name=password"},
		{"postgres://u:se#cret@db/b", "(a store URL that does not parse)"},
	} {
		got := Redact(tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.NotContains(t, got, "secret", tc.in)
	}
}

// TestConnectErrorsHideThePassword: an error of Connect names the store
// without its password, wherever the URL carries it.
func TestConnectErrorsHideThePassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://u:secret@127.0.0.1:1/b?sslmode=bogus",
		"postgres://u@127.0.0.1:1/b?password=secret&sslmode=bogus",
		"postgres://u@127.0.0.1:1/b?sslpassword=secret&pool_max_conns=x",
		"postgres://u@127.0.0.1:1/b?password=secret&sslmode=disable",
	} {
		_, err := Connect(context.Background(), raw, 1, 200*time.Millisecond)
		if assert.Error(t, err, raw) {
			assert.False(t, strings.Contains(err.Error(), "secret"), "%s: %v", raw, err)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runArgs(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestBadCommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"serve-fast"}, `unknown command "serve-fast"`},
		{[]string{"sim", "run", "--scenario", "burst"}, "brownout-lab run --scenario burst"},
	} {
		_, _, err := runArgs(c.args...)
		require.Error(t, err, "%q", c.args)
		assert.True(t, errors.As(err, new(usageError)), "%q: a usage error (exit 2)", c.args)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		out, errOut, err := runArgs(arg)
		require.NoError(t, err)
		assert.Regexp(t, `^brownoutd \S+.* go1\.\d+`, out)
		assert.Empty(t, errOut)
	}
}

// TestHelpOnStdout: every command's --help goes to stdout and succeeds.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"check-config", "--help"}} {
		out, errOut, err := runArgs(args...)
		if err != nil {
			assert.ErrorIs(t, err, flag.ErrHelp, "%v", args)
		}
		assert.Contains(t, out, "Usage", "%v", args)
		assert.Empty(t, errOut, "%v", args)
	}
}

// TestServeHelpNamesEveryRoute: serve --help names every route the
// daemon serves (the streams were missing).
func TestServeHelpNamesEveryRoute(t *testing.T) {
	out, _, _ := runArgs("serve", "--help")
	out, _, _ = strings.Cut(out, "Flags:") // the description, not the flags'
	for _, route := range []string{"/v1/signals", "/ofrep/v1/evaluate/flags", "/ofrep/v1/events", "/v1/state", "/v1/history",
		"/v1/events", "/v1/stream", "/v1/stream/token", "/v1/features/{name}/override", "/v1/freeze", "/v1/unfreeze",
		"/v1/shadow", "/metrics", "/healthz", "/readyz"} {
		assert.Regexp(t, regexp.QuoteMeta(route)+`([^/a-z]|$)`, out)
	}
}

func TestServeLogFlags(t *testing.T) {
	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		_, _, err := runArgs(append([]string{"serve", "--state-dir", t.TempDir()}, args...)...)
		var ue usageError
		if assert.ErrorAs(t, err, &ue, "%v", args) {
			assert.Contains(t, ue.Error(), args[0])
		}
	}
}

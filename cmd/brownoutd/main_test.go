package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runArgs(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestSimSeedPrintsTheSourcesOutput(t *testing.T) {
	for name, file := range map[string]string{"overload": "overload-policies.out", "codel": "codel-vs-taildrop.out", "retry": "retry-storm.out"} {
		want, err := os.ReadFile(filepath.Join("..", "..", "sim", "testdata", "seeds", file))
		require.NoError(t, err)
		got, _, err := runArgs("sim", "seed", name)
		require.NoError(t, err)
		assert.Equal(t, string(want), got, name)
	}
}

func TestSimRun(t *testing.T) {
	out, _, err := runArgs("sim", "run", "--scenario", "burst", "--seed", "3", "--format", "csv")
	require.NoError(t, err)
	assert.Contains(t, out, "policy,load,t,arrivals")
	again, _, _ := runArgs("sim", "run", "--scenario", "burst", "--seed", "3", "--format", "csv")
	assert.Equal(t, out, again, "deterministic")

	help, _, err := runArgs("sim", "--help")
	require.NoError(t, err)
	for _, s := range []string{"overload-sweep", "burst", "capacity-dip", "sale", "overload", "codel", "retry"} {
		assert.Contains(t, help, s)
	}
}

func TestSimBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"serve-fast"}, `unknown command "serve-fast"`},
		{[]string{"sim", "seed"}, "want exactly one name"},
		{[]string{"sim", "seed", "nope"}, `unknown seed simulator "nope"`},
		{[]string{"sim", "run"}, "--scenario is required"},
		{[]string{"sim", "run", "--scenario", "nope"}, `unknown scenario "nope"`},
		{[]string{"sim", "run", "--scenario", "burst", "--format", "xml"}, `--format "xml"`},
		{[]string{"sim", "run", "--scenario", "burst", "--duration", "-5s"}, "want between 1s and 24h"},
		{[]string{"sim", "run", "--scenario", "burst", "--seed", "-1"}, "invalid value"},
		{[]string{"sim", "run", "--scenario", "burst", "extra"}, "unexpected arguments"},
	} {
		_, _, err := runArgs(c.args...)
		require.Error(t, err, "%q", c.args)
		assert.True(t, errors.As(err, new(usageError)), "%q: a usage error (exit 2)", c.args)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
	}
	_, _, err := runArgs("sim", "run", "--help")
	assert.ErrorIs(t, err, flag.ErrHelp)
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
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"check-config", "--help"}, {"sim", "--help"},
		{"sim", "run", "--help"}, {"sim", "real", "-h"}, {"sim", "seed", "--help"}} {
		out, errOut, err := runArgs(args...)
		if err != nil {
			assert.ErrorIs(t, err, flag.ErrHelp, "%v", args)
		}
		assert.Contains(t, out, "Usage", "%v", args)
		assert.Empty(t, errOut, "%v", args)
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

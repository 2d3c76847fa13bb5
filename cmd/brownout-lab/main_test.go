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
		got, _, err := runArgs("seed", name)
		require.NoError(t, err)
		assert.Equal(t, string(want), got, name)
	}
}

func TestSimRun(t *testing.T) {
	out, _, err := runArgs("run", "--scenario", "burst", "--seed", "3", "--format", "csv")
	require.NoError(t, err)
	assert.Contains(t, out, "policy,load,t,arrivals")
	again, _, _ := runArgs("run", "--scenario", "burst", "--seed", "3", "--format", "csv")
	assert.Equal(t, out, again, "deterministic")

	help, _, err := runArgs("--help")
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
		{[]string{"serve"}, `unknown command "serve"`},
		{[]string{"seed"}, "want exactly one name"},
		{[]string{"seed", "nope"}, `unknown seed simulator "nope"`},
		{[]string{"run"}, "--scenario is required"},
		{[]string{"run", "--scenario", "nope"}, `unknown scenario "nope"`},
		{[]string{"run", "--scenario", "burst", "--format", "xml"}, `--format "xml"`},
		{[]string{"run", "--scenario", "burst", "--duration", "-5s"}, "want between 1s and 24h"},
		{[]string{"run", "--scenario", "burst", "--seed", "-1"}, "invalid value"},
		{[]string{"run", "--scenario", "burst", "extra"}, "unexpected arguments"},
	} {
		_, _, err := runArgs(c.args...)
		require.Error(t, err, "%q", c.args)
		assert.True(t, errors.As(err, new(usageError)), "%q: a usage error (exit 2)", c.args)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
	}
	_, _, err := runArgs("run", "--help")
	assert.ErrorIs(t, err, flag.ErrHelp)
}

// TestHelpOnStdout: every command's --help goes to stdout and succeeds.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"real", "-h"}, {"seed", "--help"}, {"explore", "--help"}, {"explore", "trace", "-h"}} {
		out, errOut, err := runArgs(args...)
		if err != nil {
			assert.ErrorIs(t, err, flag.ErrHelp, "%v", args)
		}
		assert.Contains(t, out, "Usage", "%v", args)
		assert.Empty(t, errOut, "%v", args)
	}
}

func TestVersion(t *testing.T) {
	out, _, err := runArgs("version")
	require.NoError(t, err)
	assert.Regexp(t, `^brownout-lab \S+.* go1\.\d+`, out)
}

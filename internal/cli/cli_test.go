package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.Int("n", 1, "a number")
		fs.Usage = func() { fmt.Fprintln(fs.Output(), "Usage: x [flags]"); fs.PrintDefaults() }
		return fs
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		var out, errOut bytes.Buffer
		err := Parse(newFS(), []string{h}, &out, &errOut)
		assert.ErrorIs(t, err, flag.ErrHelp)
		assert.Contains(t, out.String(), "Usage: x")
		assert.Contains(t, out.String(), "a number")
		assert.Empty(t, errOut.String(), "help goes to stdout")
	}
	var out, errOut bytes.Buffer
	err := Parse(newFS(), []string{"-n", "z"}, &out, &errOut)
	assert.Error(t, err)
	assert.Empty(t, out.String())
	assert.Contains(t, errOut.String(), "invalid value")
	assert.Contains(t, errOut.String(), "Usage: x")
	out.Reset()
	errOut.Reset()
	assert.NoError(t, Parse(newFS(), []string{"-n", "3"}, &out, &errOut))
	assert.Empty(t, out.String()+errOut.String())
}

func TestLogFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	l := LogFlags(fs)
	assert.NoError(t, fs.Parse([]string{"--log-level", "warn", "--log-format", "json"}))
	var buf bytes.Buffer
	log, err := l.Logger(&buf)
	assert.NoError(t, err)
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	assert.JSONEq(t, `{"level":"WARN","msg":"shown","k":1}`, stripTime(t, buf.Bytes()))
	for _, args := range [][]string{{"--log-level", "loud"}, {"--log-format", "xml"}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		l := LogFlags(fs)
		assert.NoError(t, fs.Parse(args))
		_, err := l.Logger(&buf)
		assert.ErrorContains(t, err, args[0])
	}
}

func stripTime(t *testing.T, line []byte) string {
	var m map[string]any
	assert.NoError(t, json.Unmarshal(line, &m))
	delete(m, "time")
	b, _ := json.Marshal(m)
	return string(b)
}

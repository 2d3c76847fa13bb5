package cli

import (
	"bytes"
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

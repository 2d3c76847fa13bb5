// Package cli holds what the project's commands share about their
// command lines: help on stdout with exit 0, mistakes on stderr.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
)

// Parse parses args into fs (whose Usage should write to fs.Output()).
// Asked for help (-h, -help, --help), it writes the usage to stdout and
// returns flag.ErrHelp, which a command treats as success; on a mistake
// it writes the flag package's message and the usage to stderr and
// returns the error.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
	case err != nil:
		_, _ = stderr.Write(out.Bytes())
	}
	return err
}

// IsHelp reports whether arg asks for help.
func IsHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

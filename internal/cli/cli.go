// Package cli holds what the project's commands share about their
// command lines: help on stdout with exit 0, mistakes on stderr.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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

// Log is the --log-level and --log-format flags of a command.
type Log struct {
	level, format string
}

// LogFlags registers --log-level and --log-format on fs.
func LogFlags(fs *flag.FlagSet) *Log {
	l := &Log{}
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text (key=value) or json (one object a line)")
	return l
}

// Logger returns the logger the flags ask for, writing to w; an unknown
// level or format is an error naming the flag.
func (l *Log) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

// Command brownout-lab is the project's lab, apart from the daemon:
//
//	brownout-lab seed overload|codel|retry
//	brownout-lab run --scenario NAME [--seed N] [--duration D] [--format table|csv|json] [--series]
//	brownout-lab real [--stack brownout|shed|failsafe|none] [--workers N] …
//	brownout-lab explore VIEW [--load R] [--seed N] …
//
// `brownout-lab --help` lists the scenarios; docs/measurements.md has the
// figures they produce.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "brownout-lab:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "brownout-lab:", err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// Command brownoutd is the brownout daemon:
//
//	brownoutd serve [--config FILE] [--listen ADDR] …
//	brownoutd check-config FILE
//	brownoutd import-state --store postgres://… [--service NAME] FILE
//	brownoutd version
//
// The lab (the simulator and the real-HTTP harness) is cmd/brownout-lab.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/brownout/brownout"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "brownoutd:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "brownoutd:", err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

const usage = `brownoutd — dimmer, not dark

Usage:
  brownoutd serve [flags]         the controller as a service: OFREP, operator API, /metrics (brownoutd serve --help)
  brownoutd check-config FILE     check a YAML configuration; every error with its line and field path
  brownoutd import-state --store URL [--service NAME] FILE   a state file (operator.json) into the replicas' store
  brownoutd version               the build: version, commit, Go
`

// run is the whole command behind main, so that tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	switch args[0] {
	case "sim":
		return usagef("the lab moved to its own command: %s (go run ./cmd/brownout-lab --help)", strings.TrimSpace("brownout-lab "+strings.Join(args[1:], " ")))
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "check-config":
		return runCheckConfig(args[1:], stdout, stderr)
	case "import-state":
		return runImport(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "brownoutd", brownout.Version())
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
}

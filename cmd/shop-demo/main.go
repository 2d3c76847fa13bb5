// Command shop-demo is the 11.11 flash-sale shop, protected by this
// project's packages, and the traffic that tests it:
//
//	shop-demo serve [--listen ADDR] [--state DIR] [--db URL] [--protect none|shed|brownout] [--payment URL] [--sms URL] [--recs URL]
//	shop-demo sale  [--target URL] [--compare] [--json] [--quiet] [--scale X] [--duration D] [--dial ADDR]
//	shop-demo knee  --target URL [--from R] [--step R] [--steps N] [--hold D]
//	shop-demo deps  [--payment ADDR] [--sms ADDR] [--recs ADDR]
//
// `shop-demo COMMAND --help` documents every flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/brownout/brownout"
	"github.com/brownout/brownout/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, new(usageError)):
		fmt.Fprintln(os.Stderr, "shop-demo:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "shop-demo:", err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

const usage = `shop-demo — the 11.11 flash sale, dimmer, not dark

Usage:
  shop-demo serve   run the shop (embedded defaults: 127.0.0.1:8081, SQLite, brownout)
  shop-demo sale    send the sale's traffic to a shop (its own, or --target URL)
  shop-demo knee    find where a URL's p99 turns steep, and the settings that follow
  shop-demo deps    run the simulated payment gateway, SMS provider and recommendation engine on their own
  shop-demo version the build: version, commit, Go

Run "shop-demo COMMAND --help" for a command's flags.
`

// run is the whole command behind main, so that tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "sale":
		return runSale(ctx, args[1:], stdout, stderr)
	case "knee":
		return runKnee(ctx, args[1:], stdout, stderr)
	case "deps":
		return runDeps(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "shop-demo", brownout.Version())
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
}

// parse parses a flag set, reporting mistakes as usage errors.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

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

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/proxy"
)

func main() {
	os.Exit(signalled(func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) }))
}

// signalled runs run until it returns and gives the process's exit status. The first SIGTERM
// or interrupt ends run's context, and the proxy drains for its grace period; a second one,
// no longer caught, ends the process at once, as it does `meridian`.
func signalled(run func(context.Context) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	unwatch := context.AfterFunc(ctx, stop)
	err := run(ctx)
	unwatch()
	stop()
	return exitCode(err, os.Stderr)
}

// errUsage marks a command-line error.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "proxy" { // the container args of `meridian proxy`
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "await" { // a pod's postStart hook
		fs := flag.NewFlagSet("meridian-proxy await", flag.ContinueOnError)
		return proxy.AwaitCommand(ctx, fs, parser(fs, args[1:], stdout, "Waits until the proxy on this host is ready (a pod's postStart hook)."))
	}
	fs := flag.NewFlagSet("meridian-proxy", flag.ContinueOnError)
	return proxy.Command(ctx, os.LookupEnv, fs, parser(fs, args, stdout, "Every flag is also a LINKERD2_PROXY_* variable."))
}

// parser returns the parse function of a command: -h prints the usage (about, then the
// flags) on stdout; a bad flag or a stray argument is a usage error, which exitCode reports
// once, on stderr.
func parser(fs *flag.FlagSet, args []string, stdout io.Writer, about string) func() error {
	fs.SetOutput(io.Discard)
	return func() error {
		switch err := fs.Parse(args); {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprintf(stdout, "usage: %s [flags]\n\n%s\n\nflags:\n", fs.Name(), about)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		case err != nil:
			return fmt.Errorf("%w: %s (run '%s -h' for the flags)", errUsage, quote.FlagError(err), fs.Name())
		case fs.NArg() > 0:
			return fmt.Errorf("%w: unexpected arguments %s", errUsage, quote.Message(fmt.Sprintf("%q", fs.Args())))
		}
		return nil
	}
}

// exitCode is the process's status for run's error, which it prints to stderr.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "meridian-proxy:", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return 2
	}
	fmt.Fprintln(stderr, "meridian-proxy:", err)
	return 1
}

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

	"github.com/meridian-mesh/meridian/proxy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// errUsage marks a command-line error.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "proxy" { // the container args of `meridian proxy`
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "await" { // a pod's postStart hook
		fs := flag.NewFlagSet("meridian-proxy await", flag.ContinueOnError)
		fs.SetOutput(io.Discard) // a bad flag is reported once, on stderr, by exitCode
		return proxy.AwaitCommand(ctx, fs, func() error {
			switch err := fs.Parse(args[1:]); {
			case errors.Is(err, flag.ErrHelp):
				fmt.Fprintf(stdout, "usage: meridian-proxy await [flags]\n\nWaits until the proxy on this host is ready (a pod's postStart hook).\n\nflags:\n")
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return err
			case err != nil:
				return fmt.Errorf("%w: %v (run 'meridian-proxy await -h' for the flags)", errUsage, err)
			case fs.NArg() > 0:
				return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
			}
			return nil
		})
	}
	fs := flag.NewFlagSet("meridian-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return proxy.Command(ctx, os.LookupEnv, fs, func() error {
		switch err := fs.Parse(args); {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprintf(stdout, "usage: meridian-proxy [flags]\n\nEvery flag is also a LINKERD2_PROXY_* variable.\n\nflags:\n")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		case err != nil:
			return fmt.Errorf("%w: %v (run 'meridian-proxy -h' for the flags)", errUsage, err)
		case fs.NArg() > 0:
			return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
		}
		return nil
	})
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

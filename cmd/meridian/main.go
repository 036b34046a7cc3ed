package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// command is one subcommand. run receives the arguments after the subcommand name and a
// context cancelled on SIGINT or SIGTERM.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]*command{}

// stdout is where subcommands print their results, stderr where errors go (tests replace
// them).
var (
	stdout io.Writer = os.Stdout
	stderr io.Writer = os.Stderr
)

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("meridian: duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: meridian <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'meridian <command> -h' for its flags.\n")
}

func main() { os.Exit(runMain(os.Args[1:])) }

// runMain runs the command line args (without the program name) and returns the exit code:
// 0 on success and for an asked-for help text, 1 when the command fails, 2 for a usage error.
func runMain(args []string) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "meridian: unknown command %s\n\n", quote.Prefix(args[0], 64))
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal stops the command gracefully (a server drains); a second one, no
	// longer caught, ends the process at once.
	unwatch := context.AfterFunc(ctx, func() {
		stop()
		fmt.Fprintf(stderr, "meridian %s: stopping; a second interrupt ends it at once\n", c.name)
	})
	err := c.run(ctx, args[1:])
	unwatch()
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "meridian %s: %s\n", c.name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		return 2
	default:
		fmt.Fprintf(stderr, "meridian %s: %v\n", c.name, err)
		return 1
	}
}

// errUsage marks an error in how a command was called (flags that do not parse).
var errUsage = errors.New("usage")

// usageError marks err, a flag value found invalid after parsing, as a usage error (exit 2), as
// a flag that does not parse is.
func usageError(err error) error {
	if err == nil || errors.Is(err, errUsage) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}

// newFlagSet returns a flag set for a subcommand that reports errors instead of exiting;
// -h and --help print its usage to stdout (and the command then exits 0), a bad flag prints
// it to stderr.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("meridian "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseFlags prints what is needed
	// A command with arguments, or more to say, replaces Usage (parseFlags prints it for -h).
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
	}
	return fs
}

// withSubcommands makes fs's usage (what -h prints) name the command's subcommands too, each
// of which takes -h for its own flags.
func withSubcommands(fs *flag.FlagSet, subs ...string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n       %[1]s {%s} [flags]   (each takes -h)\n\nflags:\n", fs.Name(), strings.Join(subs, "|"))
		fs.PrintDefaults()
	}
}

// listFlag collects every value of a repeatable flag, in order (a value with commas is kept
// whole; the command splits it where its flag allows lists).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// parseFlags parses args into fs. Asked for help (-h, --help), it prints the usage to stdout
// and returns flag.ErrHelp (the command exits 0); for a flag that does not parse it returns
// the error marked errUsage (exit 2, with a hint to -h).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(io.Discard)
		return err
	default:
		return fmt.Errorf("%w: %s (run '%s -h' for the flags)", errUsage, quote.FlagError(err), fs.Name())
	}
}

// parseNoArgs is parseFlags for a command that takes no arguments: any left after the flags
// are a usage error.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %s", errUsage, quote.Message(fmt.Sprintf("%q", fs.Args())))
	}
	return nil
}

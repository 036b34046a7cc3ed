// Command meridian is the single binary of the Meridian mesh: one subcommand per process
// (destination, identity, policy, injector, proxy, demo, bench) and the CLI tools.
//
// This package only parses flags, handles signals and wires packages together. Each
// subcommand lives in its own file and registers itself with register in an init func.
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
	"syscall"
)

// command is one subcommand. run receives the arguments after the subcommand name and a
// context cancelled on SIGINT or SIGTERM.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]*command{}

// stdout is where subcommands print their results (tests replace it).
var stdout io.Writer = os.Stdout

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("meridian: duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: meridian <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'meridian <command> -h' for its flags.\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "meridian: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := c.run(ctx, os.Args[2:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "meridian %s: %v\n", c.name, err)
		os.Exit(1)
	}
}

// newFlagSet returns a flag set for a subcommand that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("meridian "+name, flag.ContinueOnError)
	return fs
}

package main

import (
	"context"
	"fmt"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	register(&command{name: "version", summary: "print the version", run: func(_ context.Context, args []string) error {
		fs := newFlagSet("version")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
		}
		fmt.Fprintln(stdout, "meridian", version)
		return nil
	}})
}

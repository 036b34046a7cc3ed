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
		if err := parseNoArgs(fs, args); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "meridian", version)
		return nil
	}})
}

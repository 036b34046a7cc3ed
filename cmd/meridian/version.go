package main

import (
	"context"
	"fmt"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func init() {
	register(&command{name: "version", summary: "print the version", run: func(context.Context, []string) error {
		fmt.Println("meridian", version)
		return nil
	}})
}

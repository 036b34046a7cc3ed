//go:build !linux

package demo

import (
	"context"
	"os"
)

// Keys is not implemented outside Linux: the view runs without keys.
func Keys(*os.File) func(ctx context.Context) <-chan byte { return nil }

package main

import (
	"context"
	"io"
)

func runBenchFailover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errUsage
}

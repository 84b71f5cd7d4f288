package main

import (
	"context"
	"io"
	"os"
)

// simStdin is what `sturdy sim -exit-on-eof` watches; tests replace it.
var simStdin io.Reader = os.Stdin

// cancelOnEOF returns a context cancelled when simStdin reaches end of file
// (or fails), so a parent that holds the other end of a pipe takes the sim
// down with it however the parent ends, even by SIGKILL.
func cancelOnEOF(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, simStdin)
		cancel()
	}()
	return ctx, cancel
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// subcommand runs one "sturdy X" command with its own flag set.
type subcommand struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var subcommands = []subcommand{
	{"demo", "run the counter workload under injected faults, strategy by strategy", runDemo},
	{"sim", "run mongosim, the in-memory MongoDB-compatible server", runSim},
	{"proxy", "MongoDB-aware fault-injection proxy in front of mongod, mongos or a replica set", runProxy},
	{"soak", "chaos run: a mixed workload under a seeded fault schedule, proving nothing is lost, applied twice or stuck", runSoak},
	{"bench", "benchmarks against the official driver: 'bench overload', 'bench faults', 'bench failover', 'bench connect'", runBench},
	{"version", "print the module version and commit this binary was built from", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range subcommands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		}
		fmt.Fprintf(stderr, "sturdy %s: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stderr, "sturdy: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage marks a bad command line; the flag package has already said why.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sturdy <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
}

// parseFlags parses args into fs, mapping parse failures to errUsage.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	return nil
}
